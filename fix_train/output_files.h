/* -*- c++ -*- ----------------------------------------------------------
   fix uma/train's output files (checkpoint, calibration, write_frames and
   the optimizer's state file), checked when the input is read and when the
   run starts, not at their first write after hours of training.
------------------------------------------------------------------------- */

#ifndef LMP_UMA_OUTPUT_FILES_H
#define LMP_UMA_OUTPUT_FILES_H

#include <string>

#include "pointers.h"
#include "train_settings.h"

namespace uma::train {
class Trainer;
}

namespace LAMMPS_NS {

// Every output file named in the fix's keywords can be written (checked on
// rank 0; every rank stops with its message).  A named state file is
// checked at init by check_run_files, where a restart, which only reads it,
// is known.
void check_output_files(LAMMPS *lmp, const FixTrainSettings &set);

// At init: a new run's state file can be written, and its write_frames file
// is none of its data files (its first labelled frame would replace their
// frames) and is replaced where it exists (said in the log).  A restarted
// run only reads the state file and appends to write_frames.  A checkpoint
// that is `model_file` (what pair_coeff read) is warned of.
void check_run_files(LAMMPS *lmp, const FixTrainSettings &set, bool restarted,
                     const std::string &model_file);

// A collective: the trainer's weights (averaged with use_average) into the
// checkpoint file, after checking that every rank holds the same; logged
// with their hash.
void write_checkpoint_file(LAMMPS *lmp, uma::train::Trainer &trainer, const FixTrainSettings &set);

}  // namespace LAMMPS_NS

#endif
