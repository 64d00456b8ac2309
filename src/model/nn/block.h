// One eSCN-MD block: norm -> edgewise SO(2) message passing -> residual,
// norm -> spectral feed-forward -> residual.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "edges/edgewise.h"
#include "edges/mole.h"
#include "model/nn/so3.h"

namespace uma::nn {

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int64_t sphere_channels, int64_t hidden_channels,
            const std::vector<int64_t>& radial_channels, int64_t num_experts);
  // x: [N, 9, C]; system_embedding: [N, C] added to the l = 0 row after norm_1.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& system_embedding,
                        const edges::EdgeFrame& edges, const edges::MoleContext& ctx);
  std::vector<edges::MoleLinear> mole_layers() const { return edge_wise->mole_layers(); }

  // forward() in three steps, for callers that sum the messages themselves:
  // h = before_edges(x, system_embedding); m = edge_wise(h) summed over edges;
  // after_edges(x, m).
  torch::Tensor before_edges(const torch::Tensor& x, const torch::Tensor& system_embedding);
  torch::Tensor after_edges(const torch::Tensor& x, const torch::Tensor& summed_messages);
  edges::Edgewise edge_wise{nullptr};

 private:
  RMSNormSH norm_1{nullptr}, norm_2{nullptr};
  SpectralAtomwise atom_wise{nullptr};
};
TORCH_MODULE(Block);

}  // namespace uma::nn
