#include "rank_agreement.h"

#include "first_failure.h"

namespace LAMMPS_NS {

namespace {

// Runs `step`; its failure in the words of `describe`, or empty.
template <class Step>
std::string failure_of(Step &&step,
                       const std::function<std::string(const std::exception &)> &describe) {
  try {
    step();
  } catch (const std::exception &e) {
    return describe(e);
  }
  return {};
}

// A collective: throws AgreedFailure on every rank if any rank failed.
void agree(MPI_Comm world, const std::string &mine) {
  const std::string first = first_failure(world, mine);
  if (!first.empty()) throw AgreedFailure(first);
}

}  // namespace

uma::Evaluation evaluate_on_every_rank(
    uma::Engine &engine, const uma::Atoms &local, const uma::Request &what,
    uma::HostEvaluation &out, MPI_Comm world,
    const std::function<std::string(const std::exception &)> &describe) {
  agree(world, failure_of([&] { engine.validate({local}); }, describe));
  uma::Evaluation ev;
  uma::until_capacity_fits([&] {
    ev = engine.evaluate({local}, what);
    int fits = 0, all_fit = 0;
    agree(world, failure_of([&] { fits = engine.read(ev, out) ? 1 : 0; }, describe));
    MPI_Allreduce(&fits, &all_fit, 1, MPI_INT, MPI_MIN, world);
    return all_fit == 1;
  });
  return ev;
}

}  // namespace LAMMPS_NS
