/* -*- c++ -*- ----------------------------------------------------------
   fix uma/train's settings: its own keywords and the training options of
   uma::train's option table (shared with `uma train`), parsed and checked
   once, with LAMMPS's error messages.
------------------------------------------------------------------------- */

#ifndef LMP_UMA_TRAIN_SETTINGS_H
#define LMP_UMA_TRAIN_SETTINGS_H

#include <string>
#include <vector>

#include "pointers.h"
#include "api/uma.h"

namespace LAMMPS_NS {

struct FixTrainSettings {
  int train_every = 1;  // N: train every N steps
  int label_every = 0;  // label M: label the running frame every M steps (0: never)
  int steps_per_call = 1, print_every = 10;
  int checkpoint_every = 0, holdout_every = 0;
  // The uncertainty gate (label auto THRESHOLD): label when the committee's
  // spread passes `threshold` (checked every check_every steps), at most
  // every min_interval and at least every max_interval steps (0: no bound).
  bool label_auto = false;
  double threshold = 0;
  int committee = 0, check_every = 5, min_interval = 0, max_interval = 0;
  long long max_atoms = 0;  // 0: the running system's atom count
  bool use_average = false, shuffle = true;
  std::vector<std::string> data_files, holdout_files;
  std::string task, frames_file, checkpoint_file, state_file, calibration_file;
  bool state_given = false;  // the state keyword named the file (else ID.uma-train.state)
  // reference STYLE ARGS... coeff ARGS...
  std::string reference_style;
  std::vector<std::string> reference_args, coeff_args;
  uma::train::TrainOptions options;  // the option table's (lr, ema, committee, precision, ...)
};

// fix ID group uma/train N keyword value ...: arg[3] onwards.  Refuses bad
// input through lmp->error with a message naming the keyword.
FixTrainSettings parse_fix_train(LAMMPS *lmp, const std::string &fix_id, int narg, char **arg);

}  // namespace LAMMPS_NS

#endif
