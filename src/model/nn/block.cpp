#include "model/nn/block.h"

namespace uma::nn {

BlockImpl::BlockImpl(int64_t sphere_channels, int64_t hidden_channels,
                     const std::vector<int64_t>& radial_channels, int64_t num_experts) {
  norm_1 = register_module("norm_1", RMSNormSH(sphere_channels));
  edge_wise = register_module(
      "edge_wise", edges::Edgewise(sphere_channels, hidden_channels, radial_channels, num_experts));
  norm_2 = register_module("norm_2", RMSNormSH(sphere_channels));
  atom_wise = register_module("atom_wise", SpectralAtomwise(sphere_channels, hidden_channels));
}

torch::Tensor BlockImpl::before_edges(const torch::Tensor& x,
                                      const torch::Tensor& system_embedding) {
  auto h = norm_1->forward(x);
  auto parts = h.split_with_sizes({1, 8}, 1);
  return torch::cat({parts[0] + system_embedding.unsqueeze(1), parts[1]}, 1);
}

torch::Tensor BlockImpl::after_edges(const torch::Tensor& x, const torch::Tensor& summed_messages) {
  auto y = summed_messages + x;
  return atom_wise->forward(norm_2->forward(y)) + y;
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const torch::Tensor& system_embedding,
                                 const edges::EdgeFrame& edges, const edges::MoleContext& ctx) {
  auto h = before_edges(x, system_embedding);
  return after_edges(x, edge_wise->forward(h, edges, ctx));
}

}  // namespace uma::nn
