// A committee of K small energy heads on the backbone's l = 0 node features,
// each trained on its own bootstrap resample of the labelled frames.  Their
// spread in per-atom energy is fix uma/train's uncertainty: where the
// backbone's features leave the region the frames cover, heads that agree on
// the frames (from different starting weights and resamples) disagree.
//
// The heads read the features detached: training them adds a forward and
// backward through K small MLPs and nothing through the backbone, and the
// main model trains exactly as without them.  The resample is online
// bagging: sample s counts w[k, s] ~ Poisson(1) times in member k's loss,
// drawn from a hash of (seed, k, s), so every process and every restart
// draws the same weights without keeping any random state.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace uma::train {

class CommitteeImpl : public torch::nn::Module {
 public:
  // members K >= 2 heads C -> H -> H -> 1 (SiLU), each started from its own
  // draw of torch.nn.Linear's default uniform(+-1/sqrt(fan_in)), from `seed`.
  CommitteeImpl(int64_t members, int64_t channels, int64_t hidden, uint64_t seed);

  // node scalars [N, C] -> per-member per-atom raw (normalised) energies [K, N]
  torch::Tensor forward(const torch::Tensor& scalars);

  int64_t members() const { return members_; }

 private:
  int64_t members_;
  torch::Tensor w0_, b0_, w1_, b1_, w2_,
      b2_;  // [K, C, H] [K, 1, H] [K, H, H] [K, 1, H] [K, H, 1] [K, 1, 1]
};
TORCH_MODULE(Committee);

// How many times sample `sample` counts in member `member`'s loss: a
// Poisson(1) draw from a hash of the three numbers (0 leaves it out).
int bootstrap_count(uint64_t seed, int64_t member, int64_t sample);

// The committee's loss: per member the mean squared difference between its
// per-atom energies and the main head's (the target), over the atoms of the
// member's resample: member_energies [K, N], target [N], weights [K, N] (each
// atom's bootstrap count, its frame's), inverse_totals [K] (1 / the weighted
// atom count over every process's batch).  Returns the sum over members [].
torch::Tensor committee_loss(const torch::Tensor& member_energies, const torch::Tensor& target,
                             const torch::Tensor& weights, const torch::Tensor& inverse_totals);

// Per-atom spread of one frame's member energies [K, N] -> [N]: the standard
// deviation over members (n - 1) of each member's per-atom energy less that
// member's mean over the frame's atoms.  A shift of every atom's energy by
// the same amount moves no force; members that disagree only by such a
// shift (their frame energies differ, their sharing of it between the atoms
// does not) have no spread.
torch::Tensor committee_spread(const torch::Tensor& member_energies);

// Spearman's rank correlation of two equally long series (ties share their
// mean rank); NaN for fewer than 3 values or a constant series.
double rank_correlation(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace uma::train
