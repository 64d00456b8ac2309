// Failures agreed over MPI ranks: a rank that fails alone must not leave the
// others waiting in a collective it never reaches.
#pragma once

#include <mpi.h>

#include <string>

namespace LAMMPS_NS {

// Called on every rank of `comm` with that rank's failure (empty: none).
// Returns, on every rank, the failure of the lowest-numbered rank that
// failed, or an empty string when none did: one reduction, plus one
// broadcast of the message when some rank failed.
std::string first_failure(MPI_Comm comm, const std::string& mine);

}  // namespace LAMMPS_NS
