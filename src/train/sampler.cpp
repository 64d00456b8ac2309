#include "train/sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "core/uma_error.h"

namespace uma::train {

MaxAtomsSampler::MaxAtomsSampler(int64_t max_atoms, uint64_t seed, int processes, int rank,
                                 bool shuffle)
    : max_atoms_(max_atoms), seed_(seed), processes_(processes), rank_(rank), shuffle_(shuffle) {
  if (max_atoms < 1) throw Error("max_atoms must be at least 1");
  if (processes < 1 || rank < 0 || rank >= processes) throw Error("internal: bad process rank");
}

void MaxAtomsSampler::plan(const std::vector<int64_t>& all) {
  // After a restart, the epoch's plan is made again from the samples it was first made from.
  const size_t count = resume_samples_ >= 0
                           ? std::min(all.size(), static_cast<size_t>(resume_samples_))
                           : all.size();
  resume_samples_ = -1;
  const std::vector<int64_t> natoms(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(count));
  planned_samples_ = static_cast<int64_t>(count);
  std::vector<int64_t> order(natoms.size());
  std::iota(order.begin(), order.end(), 0);
  if (shuffle_) std::shuffle(order.begin(), order.end(), std::mt19937_64(seed_ + 2 * epoch_));
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> current;
  int64_t atoms = 0;
  left_out_ = 0;
  for (int64_t i : order) {
    if (natoms[i] > max_atoms_) {
      ++left_out_;
      continue;
    }
    if (atoms + natoms[i] > max_atoms_) {
      batches.push_back(current);
      current.clear();
      atoms = 0;
    }
    current.push_back(i);
    atoms += natoms[i];
  }
  if (!current.empty()) batches.push_back(current);
  if (shuffle_)
    std::shuffle(batches.begin(), batches.end(), std::mt19937_64(seed_ + 2 * epoch_ + 1));
  mine_.clear();
  if (batches.empty()) return;
  const size_t padded = (batches.size() + processes_ - 1) / processes_ * processes_;
  for (size_t k = rank_; k < padded; k += processes_) mine_.push_back(batches[k % batches.size()]);
}

std::vector<int64_t> MaxAtomsSampler::next(const std::vector<int64_t>& natoms) {
  if (epoch_ < 0) epoch_ = 0;
  if (planned_ != epoch_) {
    plan(natoms);
    planned_ = epoch_;
  }
  if (position_ >= static_cast<int64_t>(mine_.size())) {
    ++epoch_;
    position_ = 0;
    plan(natoms);
    planned_ = epoch_;
  }
  if (mine_.empty()) return {};
  return mine_[position_++];
}

}  // namespace uma::train
