// fix uma/train: trains the UMA model that pair_style uma evaluates while MD
// runs.  Frames come from labelled extxyz files and, every M steps, from the
// running system labelled by a reference pair style the fix owns (in a
// private single-rank LAMMPS instance), or, with `label auto`, when a
// committee's uncertainty on the running frame passes a threshold.  Every N
// steps the fix takes
// optimizer steps, data-parallel over the MPI ranks (each rank its own batch,
// gradients summed over ranks), and hands the new weights to the pair style.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fix.h"
#include "reference_labeller.h"

namespace uma {
struct Sample;
namespace train {
struct TrainOptions;
class Trainer;
class MaxAtomsSampler;
}  // namespace train
}  // namespace uma

namespace LAMMPS_NS {

class UMAModelHandle;

class FixUMATrain : public Fix {
 public:
  FixUMATrain(class LAMMPS *, int, char **);
  ~FixUMATrain() override;
  int setmask() override;
  void init() override;
  void setup(int) override;
  void end_of_step() override;
  double compute_vector(int) override;
  void write_restart(FILE *) override;
  void restart(char *) override;

  // What a restart file keeps of the fix (the optimizer's state is in its
  // own file); written in the order of kRestartFields (fix_uma_train.cpp).
  struct Resumed {
    double steps = 0, epoch = 0, position = 0, calls = 0, frames = 0, last_label_step = 0, planned_samples = 0;
  };

 private:
  // settings
  int train_every_ = 1, label_every_ = 0, steps_per_call_ = 1, print_every_ = 10;
  int checkpoint_every_ = 0, holdout_every_ = 0;
  // The uncertainty gate: label when the committee's spread passes threshold_
  // (checked every check_every_ steps), at most every min_interval_ and at
  // least every max_interval_ steps (0: no bound).
  bool label_auto_ = false;
  double threshold_ = 0;
  int committee_ = -1, check_every_ = 5, min_interval_ = 0, max_interval_ = 0;
  long long max_atoms_ = 0;
  bool use_average_ = false, shuffle_ = true;
  unsigned long long seed_ = 12345;
  std::vector<std::string> data_files_, holdout_files_;
  std::string task_, frames_file_, checkpoint_file_, state_file_, calibration_file_;
  ReferenceLabeller labeller_{"", {}, {}};

  UMAModelHandle *pair_ = nullptr;   // the pair style whose model this fix trains
  std::unique_ptr<uma::train::Trainer> trainer_;
  std::unique_ptr<uma::train::MaxAtomsSampler> sampler_;
  std::vector<int64_t> train_ids_, train_atoms_;   // trainer samples the sampler draws from, their sizes
  std::vector<int64_t> held_ids_;                  // held-out frames: never trained on
  std::vector<int> type_z_;
  std::string pair_task_;
  int charge_ = 0, spin_ = 0;
  long long calls_ = 0, frames_collected_ = 0;
  long long last_label_step_ = 0, checks_ = 0, gated_labels_ = 0;   // checks and gated labels since the last print
  double uncertainty_[2] = {0, 0};   // at the latest check: max and mean over atoms (eV)
  double stats_[15] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  long long step_reads_ = 0, step_uploads_ = 0, steps_counted_ = 0;   // since the last print
  bool restarted_ = false, calibration_written_ = false;
  Resumed resumed_;

  std::unique_ptr<uma::train::TrainOptions> options_;   // for the trainer, created at the first init

  void create_trainer();
  void push_weights();
  uma::Sample gather_frame();
  void collect_frame(uma::Sample &s);
  bool check_uncertainty(const uma::Sample &s);   // whether the gate labels this frame
  double held_out_calibration();
  void add_sample(const uma::Sample &s, bool held_out);
  // Runs `work` on rank 0; when it throws, every rank stops with its message
  // after `what` (agreed through first_failure: no rank waits alone).
  void on_rank_zero(const std::string &what, const std::function<void()> &work);
  void train();
  void print_stats();
  void write_checkpoint();
};

}  // namespace LAMMPS_NS
