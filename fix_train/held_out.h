/* -*- c++ -*- ----------------------------------------------------------
   fix uma/train's held-out scores: the held-out frames' energy and force
   errors and, with a committee, how well its uncertainty ranks them (the
   calibration), computed on rank 0 and given to every rank.
------------------------------------------------------------------------- */

#ifndef LMP_UMA_HELD_OUT_H
#define LMP_UMA_HELD_OUT_H

#include <cmath>
#include <cstdint>
#include <vector>

#include "pointers.h"
#include "train_settings.h"

namespace uma::train {
class Trainer;
}

namespace LAMMPS_NS {

struct HeldOutScores {
  double energy_mae = NAN, forces_mae = NAN;  // NaN: no held-out frames
  double rank_correlation = NAN;              // NaN: no committee (or no frames)
};

class HeldOutScorer : protected Pointers {
 public:
  HeldOutScorer(LAMMPS *lmp, const FixTrainSettings &set) : Pointers(lmp), set_(set) {}
  // A collective: the scores of the trainer's samples `held` (the training
  // loop's held-out frames), the same on every rank; the calibration lines
  // appended to the settings' calibration file, if one is named.
  HeldOutScores score(uma::train::Trainer &trainer, const std::vector<int64_t> &held);

 private:
  const FixTrainSettings &set_;
  bool calibration_written_ = false;
  double calibration(uma::train::Trainer &trainer, const std::vector<int64_t> &held);
};

}  // namespace LAMMPS_NS

#endif
