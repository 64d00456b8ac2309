#include "train/training_loop.h"

#include <algorithm>

#include "runtime/transfers.h"

namespace uma::train {

int64_t TrainingLoop::add(const Sample& sample, bool held_out) {
  const int64_t id = trainer_.add_sample(sample);
  if (held_out) {
    held_ids_.push_back(id);
  } else {
    train_ids_.push_back(id);
    train_atoms_.push_back(static_cast<int64_t>(sample.atoms.numbers.size()));
  }
  return id;
}

std::string TrainingLoop::oversized(const std::vector<Sample>& samples,
                                    const std::string& from) const {
  const auto larger = std::count_if(samples.begin(), samples.end(), [&](const Sample& s) {
    return static_cast<int64_t>(s.atoms.numbers.size()) > sampler_.max_atoms();
  });
  if (larger == 0) return "";
  return std::to_string(larger) + " of " + std::to_string(samples.size()) + " frames" +
         (from.empty() ? "" : " from " + from) + " have more than " + option_ + " " + std::to_string(sampler_.max_atoms()) +
         " atoms and are left out of training; raise " + option_ + " to train on them";
}

void TrainingLoop::steps(int64_t count, const StepCounts& after_step) {
  for (int64_t k = 0; k < count; ++k) {
    const auto picks = sampler_.next(train_atoms_);
    if (picks.empty()) throw NoBatchError(sampler_.max_atoms(), option_);
    std::vector<int64_t> batch;
    for (int64_t p : picks) batch.push_back(train_ids_[p]);
    const int64_t reads = host_read_count(), uploads = upload_count();
    trainer_.step(batch);
    if (after_step) after_step(host_read_count() - reads, upload_count() - uploads);
  }
}

}  // namespace uma::train
