// fairchem's MaxAtomDistributedBatchSampler, deterministic from a seed:
// each epoch the samples are put in a seeded order, packed greedily into
// batches of at most max_atoms atoms (a larger sample is left out), the batch
// order is shuffled (seed + epoch), the list is padded by repeating batches
// to a multiple of the number of processes, and process r takes batches
// r, r + R, r + 2R, ...  Samples added during an epoch join at the next one.
#pragma once

#include <cstdint>
#include <vector>

namespace uma::train {

class MaxAtomsSampler {
 public:
  MaxAtomsSampler(int64_t max_atoms, uint64_t seed, int processes = 1, int rank = 0,
                  bool shuffle = true);

  // This process's batch for the next step, from samples with these atom counts.
  // Empty when no sample fits max_atoms.
  std::vector<int64_t> next(const std::vector<int64_t>& natoms);

  int64_t epoch() const { return epoch_; }
  int64_t position() const { return position_; }
  // How many samples the current epoch's plan was made from (samples added
  // since join at the next epoch).
  int64_t planned_samples() const { return planned_samples_; }
  // Restart: continue an epoch plan at the given step within it, planned
  // again from its first `planned_samples` samples (-1: all there are).
  void resume(int64_t epoch, int64_t position, int64_t planned_samples = -1) {
    epoch_ = epoch;
    position_ = position;
    planned_ = -1;
    resume_samples_ = planned_samples;
  }
  int64_t left_out() const { return left_out_; }  // samples larger than max_atoms in the last plan
  int64_t max_atoms() const { return max_atoms_; }

 private:
  void plan(const std::vector<int64_t>& natoms);

  int64_t max_atoms_;
  uint64_t seed_;
  int processes_, rank_;
  bool shuffle_;
  int64_t epoch_ = -1, position_ = 0, planned_ = -2, left_out_ = 0;
  int64_t planned_samples_ = 0, resume_samples_ = -1;
  std::vector<std::vector<int64_t>> mine_;  // this process's batches of the current epoch
};

}  // namespace uma::train
