#include "staged_backward.h"

namespace uma {

torch::Tensor StagedBackward::cut(const torch::Tensor& input, const Map& forward, Map backward) {
  torch::Tensor value;
  {
    torch::NoGradGuard no_grad;
    value = forward(input.detach()).detach();
  }
  auto leaf = value.requires_grad_(true);
  cuts_.push_back({input, leaf, std::move(backward)});
  return leaf;
}

torch::Tensor StagedBackward::share(const torch::Tensor& input) {
  if (!input.requires_grad()) return input;
  auto leaf = input.detach().requires_grad_(true);
  cuts_.push_back({input, leaf, Map()});
  return leaf;
}

std::vector<torch::Tensor> StagedBackward::grad(const torch::Tensor& output,
                                                const std::vector<torch::Tensor>& inputs) {
  const size_t n_in = inputs.size(), n_cuts = cuts_.size();
  // Gradients so far: [inputs..., cut leaves...].
  std::vector<torch::Tensor> acc(n_in + n_cuts);
  // One autograd pass from `root` (seeded with root_grad) to the inputs and
  // the leaves of cuts [0, upto): the only leaves made before root was.
  auto stage = [&](const torch::Tensor& root, const torch::Tensor& root_grad, size_t upto) {
    if (!root.requires_grad()) return;
    std::vector<torch::Tensor> wrt(inputs);
    for (size_t k = 0; k < upto; ++k) wrt.push_back(cuts_[k].leaf);
    std::vector<torch::Tensor> seed;   // empty: d root / d root = 1 (a scalar)
    if (root_grad.defined()) seed.push_back(root_grad);
    const auto g = torch::autograd::grad({root}, wrt, seed, /*retain_graph=*/false, /*create_graph=*/false,
                                         /*allow_unused=*/true);
    for (size_t k = 0; k < g.size(); ++k) {
      if (!g[k].defined()) continue;
      acc[k] = acc[k].defined() ? acc[k] + g[k] : g[k];
    }
  };
  try {
    stage(output, torch::Tensor(), n_cuts);
    // Reverse order of creation: when cut k is reached, every stage that
    // could add to its leaf's gradient (those of later cuts) has run.
    for (size_t k = n_cuts; k-- > 0;) {
      const Cut& c = cuts_[k];
      torch::Tensor g = acc[n_in + k];
      if (!g.defined()) g = torch::zeros_like(c.leaf);
      acc[n_in + k] = torch::Tensor();
      stage(c.input, c.backward ? c.backward(g) : g, k);
    }
  } catch (...) {
    cuts_.clear();
    throw;
  }
  cuts_.clear();
  std::vector<torch::Tensor> out(acc.begin(), acc.begin() + n_in);
  for (size_t k = 0; k < n_in; ++k)
    if (!out[k].defined()) out[k] = torch::zeros_like(inputs[k]);
  return out;
}

}  // namespace uma
