#include "first_failure.h"

#include <exception>

namespace LAMMPS_NS {

std::string first_failure(MPI_Comm comm, const std::string& mine) {
  int me = 0, nprocs = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &nprocs);
  int candidate = mine.empty() ? nprocs : me, reporter = nprocs;
  MPI_Allreduce(&candidate, &reporter, 1, MPI_INT, MPI_MIN, comm);
  if (reporter == nprocs) return {};
  std::string message = mine;
  int length = static_cast<int>(message.size());
  MPI_Bcast(&length, 1, MPI_INT, reporter, comm);
  message.resize(length);
  MPI_Bcast(message.data(), length, MPI_CHAR, reporter, comm);
  return message;
}

std::string on_rank_zero(MPI_Comm comm, const std::function<void()>& work) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  std::string mine;
  if (me == 0) {
    try {
      work();
    } catch (const std::exception& e) {
      mine = e.what();
      if (mine.empty()) mine = "failed";
    }
  }
  return first_failure(comm, mine);
}

}  // namespace LAMMPS_NS
