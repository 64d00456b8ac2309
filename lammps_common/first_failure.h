// Failures agreed over MPI ranks: a rank that fails alone must not leave the
// others waiting in a collective it never reaches.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

namespace LAMMPS_NS {

// Called on every rank of `comm` with that rank's failure (empty: none).
// Returns, on every rank, the failure of the lowest-numbered rank that
// failed, or an empty string when none did: one reduction, plus one
// broadcast of the message when some rank failed.
std::string first_failure(MPI_Comm comm, const std::string& mine);

// Runs `work` on rank 0 of `comm` (a collective): returns on every rank the
// message of what `work` threw there ("failed" for an empty one), or an
// empty string when it did not throw.
std::string on_rank_zero(MPI_Comm comm, const std::function<void()>& work);

}  // namespace LAMMPS_NS
