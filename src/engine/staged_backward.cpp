#include "engine/staged_backward.h"

namespace uma {

torch::Tensor StagedBackward::cut(const torch::Tensor& input, const Map& forward, Map backward) {
  torch::Tensor value;
  {
    torch::NoGradGuard no_grad;
    value = forward(input.detach()).detach();
  }
  auto leaf = value.requires_grad_(true);
  cuts_.push_back({{input}, leaves_.size(), std::move(backward)});
  leaves_.push_back(leaf);
  return leaf;
}

std::vector<torch::Tensor> StagedBackward::share(const std::vector<torch::Tensor>& inputs) {
  Cut c{{}, leaves_.size(), Map()};
  std::vector<torch::Tensor> out;
  for (const auto& t : inputs) {
    if (!t.requires_grad()) {
      out.push_back(t);
      continue;
    }
    c.inputs.push_back(t);
    out.push_back(t.detach().requires_grad_(true));
    leaves_.push_back(out.back());
  }
  if (!c.inputs.empty()) cuts_.push_back(std::move(c));
  return out;
}

std::vector<torch::Tensor> StagedBackward::grad(const torch::Tensor& output,
                                                const std::vector<torch::Tensor>& inputs) {
  const size_t n_in = inputs.size();
  // Gradients so far: [inputs..., leaves...].
  std::vector<torch::Tensor> acc(n_in + leaves_.size());
  // One autograd pass from `roots` (seeded with `seeds`; none: a scalar
  // root, d root / d root = 1) to the inputs and the leaves [0, upto): the
  // only leaves made before the roots were.
  auto stage = [&](const std::vector<torch::Tensor>& roots, const std::vector<torch::Tensor>& seeds,
                   size_t upto) {
    std::vector<torch::Tensor> from, with;
    for (size_t k = 0; k < roots.size(); ++k) {
      if (!roots[k].requires_grad()) continue;
      from.push_back(roots[k]);
      if (!seeds.empty()) with.push_back(seeds[k]);
    }
    if (from.empty()) return;
    std::vector<torch::Tensor> wrt(inputs);
    wrt.insert(wrt.end(), leaves_.begin(), leaves_.begin() + static_cast<std::ptrdiff_t>(upto));
    const auto g =
        torch::autograd::grad(from, wrt, with, /*retain_graph=*/false, /*create_graph=*/false,
                              /*allow_unused=*/true);
    for (size_t k = 0; k < g.size(); ++k) {
      if (!g[k].defined()) continue;
      acc[k] = acc[k].defined() ? acc[k] + g[k] : g[k];
    }
  };
  try {
    stage({output}, {}, leaves_.size());
    // Reverse order of creation: when cut k is reached, every stage that
    // could add to its leaves' gradients (those of later cuts) has run.
    for (size_t k = cuts_.size(); k-- > 0;) {
      const Cut& c = cuts_[k];
      std::vector<torch::Tensor> seeds;
      for (size_t j = 0; j < c.inputs.size(); ++j) {
        torch::Tensor g = acc[n_in + c.first_leaf + j];
        if (!g.defined()) g = torch::zeros_like(leaves_[c.first_leaf + j]);
        acc[n_in + c.first_leaf + j] = torch::Tensor();
        seeds.push_back(c.backward ? c.backward(g) : g);
      }
      stage(c.inputs, seeds, c.first_leaf);
    }
  } catch (...) {
    clear();
    throw;
  }
  clear();
  std::vector<torch::Tensor> out(acc.begin(), acc.begin() + static_cast<std::ptrdiff_t>(n_in));
  for (size_t k = 0; k < n_in; ++k)
    if (!out[k].defined()) out[k] = torch::zeros_like(inputs[k]);
  return out;
}

}  // namespace uma
