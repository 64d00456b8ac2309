#include "data_parallel.h"

#include <map>
#include <memory>

#include "first_failure.h"
#include "api/uma.h"

void LAMMPS_NS::connect_ranks(uma::train::TrainOptions &o, MPI_Comm world) {
  int nprocs = 1;
  MPI_Comm_size(world, &nprocs);
  if (nprocs == 1) return;
  o.sum_host = [world](std::vector<double> &v) {
    MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM, world);
  };
  o.first_failure = [world](const std::string &mine) { return first_failure(world, mine); };
  // Reduce to rank 0, then broadcast: every rank gets the very same bits.
  // On a GPU the gradient goes through one persistent pinned host mirror
  // (one counted read and one upload per step, nothing allocated per step;
  // no CUDA-aware MPI or NCCL yet); on the CPU it is reduced in place.
  // One mirror per gradient size: the model's and the committee's.
  o.sum_gradients =
      [world, mirrors = std::make_shared<std::map<int64_t, uma::HostMirror>>()](torch::Tensor &g) {
        const bool on_host = g.device().is_cpu();
        uma::HostMirror *mirror = on_host ? nullptr : &(*mirrors)[g.numel()];
        torch::Tensor host = on_host ? g : mirror->read(g);
        int me = 0;
        MPI_Comm_rank(world, &me);
        const int n = static_cast<int>(host.numel());
        void *data = host.data_ptr();  // host data
        const MPI_Datatype type = host.scalar_type() == torch::kFloat64 ? MPI_DOUBLE : MPI_FLOAT;
        MPI_Reduce(me == 0 ? MPI_IN_PLACE : data, data, n, type, MPI_SUM, 0, world);
        MPI_Bcast(data, n, type, 0, world);
        if (!on_host) mirror->write(g);
      };
}

bool LAMMPS_NS::same_on_every_rank(unsigned long long value, MPI_Comm world) {
  unsigned long long low = 0, high = 0;
  MPI_Allreduce(&value, &low, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, world);
  MPI_Allreduce(&value, &high, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, world);
  return low == high;
}
