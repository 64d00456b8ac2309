// The edgewise half of an eSCN-MD block: what every block knows of the edges
// (EdgeFrame) and the SO(2) message passing over them (Edgewise), which the
// edge backend of the frame runs (edges/edge_backend.h).
#pragma once

#include <vector>

#include <torch/torch.h>

#include "edges/edge_backend.h"
#include "edges/edge_segments.h"
#include "edges/mole.h"
#include "edges/so2_conv.h"

namespace uma::edges {

// What every block needs to know about the edges: the indices and radial
// inputs, and the rotations in the form its backend (edges/edge_backend.h)
// prepared and reads.
struct EdgeFrame {
  const EdgeBackend* backend = &reference_edges();
  torch::Tensor src, tgt;    // [E] source (neighbour) and target atoms
  torch::Tensor valid;       // [E] bool: false at the graph's padding slots; undefined: all edges
  RadialInput radial_input;  // the radial MLPs' input, in its parts
  // reference (LibTorch composition)
  torch::Tensor wigner;               // [E, 9(M), 9(L)] rotation into the edge frame
  torch::Tensor wigner_inv_envelope;  // [E, 9(L), 9(M)] back-rotation times envelope
  // lean
  torch::Tensor D;         // [E, 9(L), 9(L)] block-diagonal Wigner matrices
  torch::Tensor envelope;  // [E]
  EdgeSegments by_source,
      by_target;  // over the frame's edges (or a longer graph's: see lean_edges.h)

  // The first n edges (layer pruning), the segments kept.
  EdgeFrame first(int64_t n) const;
};

class EdgewiseImpl : public torch::nn::Module {
 public:
  EdgewiseImpl(int64_t sphere_channels, int64_t hidden_channels,
               const std::vector<int64_t>& radial_channels, int64_t num_experts);
  // x: [N, 9, C] -> [N, 9, C], the messages summed into their targets.
  torch::Tensor forward(const torch::Tensor& x, const EdgeFrame& edges, const MoleContext& ctx);
  // The messages before the sum: [E, 9, C], enveloped, in the node frame
  // (the reference backend's frame).
  torch::Tensor messages(const torch::Tensor& x, const EdgeFrame& edges, const MoleContext& ctx);
  std::vector<MoleLinear> mole_layers() const;
  SO2Conv& first_conv() { return so2_conv_1; }
  SO2Conv& second_conv() { return so2_conv_2; }

 private:
  SO2Conv so2_conv_1{nullptr}, so2_conv_2{nullptr};
};
TORCH_MODULE(Edgewise);

}  // namespace uma::edges
