#include "held_out.h"

#include <string>

#include "error.h"
#include "update.h"

#include "api/uma.h"
#include "label_gate.h"
#include "rank_zero.h"

using namespace LAMMPS_NS;

HeldOutScores HeldOutScorer::score(uma::train::Trainer &trainer, const std::vector<int64_t> &held) {
  HeldOutScores s;
  if (held.empty()) return s;
  double mae[2] = {NAN, NAN};  // energy, forces
  train_on_rank_zero(lmp, "errors on the held-out frames", [&] {
    const auto e = trainer.errors(held, set_.use_average);
    mae[0] = e.energy;
    mae[1] = e.forces;
  });
  MPI_Bcast(mae, 2, MPI_DOUBLE, 0, world);
  s.energy_mae = mae[0];
  s.forces_mae = mae[1];
  if (set_.committee > 0) s.rank_correlation = calibration(trainer, held);
  return s;
}

double HeldOutScorer::calibration(uma::train::Trainer &trainer, const std::vector<int64_t> &held) {
  // Rank 0: per held-out frame the estimate and the true errors; their rank
  // correlation goes to every rank.
  double rho = std::nan("");
  train_on_rank_zero(lmp, "uncertainty on the held-out frames", [&] {
    std::vector<calibration::Frame> frames;
    for (int64_t id : held) {
      const auto u = trainer.uncertainty(trainer.sample(id));
      const auto e = trainer.errors({id}, set_.use_average);
      frames.push_back({u.max, u.mean, e.forces, e.energy,
                        static_cast<int64_t>(trainer.sample(id).atoms.numbers.size())});
    }
    rho = calibration::report(frames, update->ntimestep, set_.calibration_file, calibration_written_);
  });
  calibration_written_ = !set_.calibration_file.empty();
  MPI_Bcast(&rho, 1, MPI_DOUBLE, 0, world);
  return rho;
}
