// The training loop fix uma/train and `uma train` share: the frames a run
// trains on (drawn by the max-atoms sampler) and those it holds out, and the
// optimizer steps on the sampler's batches, each with its host transfers
// counted.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/training_data.h"
#include "core/uma_error.h"
#include "train/sampler.h"
#include "train/trainer.h"

namespace uma::train {

// No training frame has at most the sampler's max_atoms atoms; callers name
// their own option (fix uma/train's max_atoms, uma train's --max-atoms).
class NoBatchError : public Error {
 public:
  explicit NoBatchError(int64_t max_atoms)
      : Error("no frame has at most " + std::to_string(max_atoms) + " atoms"),
        max_atoms(max_atoms) {}
  int64_t max_atoms;
};

class TrainingLoop {
 public:
  TrainingLoop(Trainer& trainer, MaxAtomsSampler sampler)
      : trainer_(trainer), sampler_(std::move(sampler)) {}

  // Adds a frame to the trainer (Trainer::add_sample, which measures its
  // edges): one to train on, or one held out (never trained on).  Returns
  // its sample index.
  int64_t add(const Sample& sample, bool held_out);

  // `count` optimizer steps on the sampler's next batches of the training
  // frames; after each, `after_step(host reads, uploads)` of that step.
  // Throws NoBatchError when no training frame fits.
  using StepCounts = std::function<void(int64_t reads, int64_t uploads)>;
  void steps(int64_t count, const StepCounts& after_step = {});

  const std::vector<int64_t>& training() const { return train_ids_; }
  const std::vector<int64_t>& held_out() const { return held_ids_; }
  MaxAtomsSampler& sampler() { return sampler_; }

 private:
  Trainer& trainer_;
  MaxAtomsSampler sampler_;
  std::vector<int64_t> train_ids_, train_atoms_;  // what the sampler draws from, their sizes
  std::vector<int64_t> held_ids_;
};

}  // namespace uma::train
