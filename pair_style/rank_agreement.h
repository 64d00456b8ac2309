// One decomposed evaluation agreed over the MPI ranks: a rank that fails or
// must repeat the step alone would leave the others waiting in a collective
// of the model that it never reaches.
#pragma once

#include <mpi.h>

#include <exception>
#include <functional>
#include <stdexcept>
#include <string>

#include "api/uma.h"

namespace LAMMPS_NS {

// Thrown on every rank, with the same message: bad input that some rank
// found.  The caller reports it with error->all.
class AgreedFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Validates, evaluates and reads `local` (a piece) on every rank of `world`.  Bad
// input any rank finds, before the model runs (engine.validate: NaN
// or infinite positions, ...) or in the read (atoms too close), is thrown
// as AgreedFailure on every rank with the lowest failing rank's message, in
// the words of `describe`.  While any rank's edge capacity overflows, every
// rank repeats the step (uma::until_capacity_fits), so the model's
// collectives stay matched.
uma::Evaluation evaluate_on_every_rank(
    uma::Engine &engine, const uma::Atoms &local, const uma::Request &what,
    uma::HostEvaluation &out, MPI_Comm world,
    const std::function<std::string(const std::exception &)> &describe);

}  // namespace LAMMPS_NS
