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

// No training frame has at most the sampler's max_atoms atoms; the message
// names the caller's option (TrainingLoop's `max_atoms_option`).
class NoBatchError : public Error {
 public:
  NoBatchError(int64_t max_atoms, const std::string& option)
      : Error("no frame has at most " + option + " " + std::to_string(max_atoms) + " atoms; raise " +
              option),
        max_atoms(max_atoms) {}
  int64_t max_atoms;
};

class TrainingLoop {
 public:
  // `max_atoms_option`: how the user sets the sampler's max_atoms (fix
  // uma/train's "max_atoms", uma train's "--max-atoms"), for the messages.
  TrainingLoop(Trainer& trainer, MaxAtomsSampler sampler, std::string max_atoms_option)
      : trainer_(trainer), sampler_(std::move(sampler)), option_(std::move(max_atoms_option)) {}

  // The warning for frames that no batch can hold (the sampler leaves them
  // out), e.g. "2 of 5 frames from F have more than max_atoms 10 atoms and
  // are left out of training; raise max_atoms to train on them" (`from`
  // empty: no "from F"); empty when every frame fits.
  std::string oversized(const std::vector<Sample>& samples, const std::string& from) const;

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
  std::string option_;
  std::vector<int64_t> train_ids_, train_atoms_;  // what the sampler draws from, their sizes
  std::vector<int64_t> held_ids_;
};

}  // namespace uma::train
