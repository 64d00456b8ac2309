/* -*- c++ -*- ----------------------------------------------------------
   fix uma/train's label gate: when the committee's uncertainty on the
   running frame is checked, whether that frame is labelled (label auto
   THRESHOLD, min_interval, max_interval), and how well the estimate ranks
   the held-out frames' true errors (calibration).
------------------------------------------------------------------------- */

#ifndef LMP_UMA_LABEL_GATE_H
#define LMP_UMA_LABEL_GATE_H

#include <cstdint>
#include <string>
#include <vector>

#include "train_settings.h"

namespace LAMMPS_NS {

class LabelGate {
 public:
  explicit LabelGate(const FixTrainSettings &s)
      : auto_(s.label_auto),
        threshold_(s.threshold),
        committee_(s.committee),
        check_every_(s.check_every),
        min_interval_(s.min_interval),
        max_interval_(s.max_interval) {}

  // Whether the uncertainty is estimated at this step (there is a committee).
  bool checks(long long step) const { return committee_ > 0 && step % check_every_ == 0; }
  // Takes the estimate at `step` (max and mean over atoms, eV); returns why
  // the frame is to be labelled, or an empty string when it is not.
  std::string decide(long long step, double max, double mean);
  // A frame was labelled at `step` (by the gate or on a fixed interval).
  void labelled(long long step) { last_label_ = step; }
  long long last_label() const { return last_label_; }

  // Since the last take_counts(): estimates made, frames the gate labelled,
  // and the latest estimate (max, mean).
  struct Counts {
    long long checks = 0, gated = 0;
    double max = 0, mean = 0;
  };
  Counts take_counts();
  double latest() const { return counts_.max; }

 private:
  bool auto_;
  double threshold_;
  int committee_, check_every_, min_interval_, max_interval_;
  long long last_label_ = 0;
  Counts counts_;
};

namespace calibration {
struct Frame {
  double uncertainty_max = 0, uncertainty_mean = 0, force_mae = 0, energy_mae = 0;
  int64_t atoms = 0;
};
// Spearman's rank correlation of the frames' max uncertainty and force MAE;
// with a file name, the frames appended to it (a header first when !append).
// Throws std::runtime_error when the file cannot be written.
double report(const std::vector<Frame> &frames, long long step, const std::string &file,
              bool append);
}  // namespace calibration

}  // namespace LAMMPS_NS

#endif
