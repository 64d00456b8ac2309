// fix uma/train: trains the UMA model that pair_style uma evaluates while MD
// runs.  Frames come from labelled extxyz files and, every M steps, from the
// running system labelled by a reference pair style the fix owns (in a
// private single-rank LAMMPS instance), or, with `label auto`, when a
// committee's uncertainty on the running frame passes a threshold.  Every N
// steps the fix takes optimizer steps, data-parallel over the MPI ranks
// (each rank its own batch, gradients summed over ranks), and hands the new
// weights to the pair style.
//
// The fix is the LAMMPS adapter over its parts: the settings
// (train_settings: its keywords and the shared training option table), the
// frames (frame_source: the running system, the reference labeller, files),
// the label gate (label_gate), the statistics (train_report), the restart
// fields (train_restart), the rank collectives (data_parallel), and the
// engine's trainer.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fix.h"
#include "train_restart.h"
#include "train_settings.h"

namespace uma {
struct Sample;
namespace train {
class Trainer;
class TrainingLoop;
}  // namespace train
}  // namespace uma

namespace LAMMPS_NS {

class FrameSource;
class HeldOutScorer;
class LabelGate;
class TrainReport;
class UMAModelHandle;

class FixUMATrain : public Fix {
 public:
  FixUMATrain(class LAMMPS *, int, char **);
  ~FixUMATrain() override;
  int setmask() override;
  void init() override;
  void setup(int) override;
  void end_of_step() override;
  void post_run() override;
  double compute_vector(int) override;
  void write_restart(FILE *) override;
  void restart(char *) override;

 private:
  FixTrainSettings set_;
  std::unique_ptr<FrameSource> frames_;
  std::unique_ptr<LabelGate> gate_;
  UMAModelHandle *pair_ = nullptr;  // the pair style whose model this fix trains
  std::unique_ptr<uma::train::Trainer> trainer_;
  int64_t checkpointed_steps_ = -1;  // the optimizer steps the last checkpoint held
  // the frames it trains on and holds out, the sampler and the steps (shared with uma train)
  std::unique_ptr<uma::train::TrainingLoop> loop_;
  long long calls_ = 0, frames_collected_ = 0;
  std::unique_ptr<TrainReport> report_;
  std::unique_ptr<HeldOutScorer> held_out_;
  bool restarted_ = false, warned_too_large_ = false;
  TrainRestart resumed_;

  void create_trainer();
  // warns of the frames larger than max_atoms (the sampler leaves them out)
  void report_too_large(const std::vector<uma::Sample> &samples, const std::string &from);
  void resume();             // the restarted optimizer state and weights
  void push_weights();
  bool gate_labels(
      const uma::Sample &s);  // estimates the uncertainty; whether the gate labels this frame
  void collect_frame(uma::Sample &s);
  void train();
  void print_stats();
  void write_checkpoint();
};

}  // namespace LAMMPS_NS
