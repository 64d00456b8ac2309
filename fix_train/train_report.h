/* -*- c++ -*- ----------------------------------------------------------
   fix uma/train's statistics: the values of its global vector (f_ID[i])
   and the lines it logs every `print` training calls.
------------------------------------------------------------------------- */

#ifndef LMP_UMA_TRAIN_REPORT_H
#define LMP_UMA_TRAIN_REPORT_H

#include <cstddef>
#include <string>

#include "label_gate.h"
#include "train_settings.h"
#include "pointers.h"

namespace uma::train {
struct TrainStats;
}

namespace LAMMPS_NS {

class TrainReport : protected Pointers {
 public:
  // The global vector's entries (doc/fix_uma_train.rst), 1-based there.
  enum Stat {
    LOSS,
    ENERGY_MAE,
    FORCES_MAE,
    STRESS_MAE,
    GRAD_NORM,
    LR,
    STEPS,
    FRAMES,
    SKIPPED,
    HELD_ENERGY_MAE,
    HELD_FORCES_MAE,
    READS_PER_STEP,
    UNCERTAINTY,
    REFERENCE_CALLS,
    RANK_CORRELATION,
    NSTATS
  };

  explicit TrainReport(LAMMPS *lmp) : Pointers(lmp) {}
  double value(int i) const { return stats_[i]; }
  void set(Stat i, double v) { stats_[i] = v; }
  // The host transfers of one optimizer step of this rank.
  void count_step(long long reads, long long uploads);

  // What the print covers besides the trainer's statistics.
  struct Context {
    long long optimizer_steps = 0, frames = 0, reference_calls = 0;
    size_t held_frames =
        0;  // 0: no held-out errors (HELD_* and RANK_CORRELATION set by the caller)
    bool committee = false, label_auto = false;
    LabelGate::Counts gate;
  };
  // On rank 0, the log lines of a new trainer: what trains, how, and the gate.
  void log_setup(const FixTrainSettings &s, const std::string &model, const std::string &task);
  // Sets the vector from `s` and, on rank 0, logs the lines.
  void print(const uma::train::TrainStats &s, const Context &c);

 private:
  double stats_[NSTATS] = {};
  long long step_reads_ = 0, step_uploads_ = 0, steps_counted_ = 0;  // since the last print
};

}  // namespace LAMMPS_NS

#endif
