// A batch of systems gathered from the host into the model's device tensors:
// the inputs the backbone reads, positions wrapped into their cells, and the
// per-system geometry the graph builder and the stress need.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "backbone.h"
#include "engine.h"

namespace uma {

struct BatchInput {
  BatchTensors in;
  torch::Tensor positions;           // [N, 3] wrapped along periodic directions, model dtype
  std::vector<GraphSystem> graph;    // [B] one block of the radius graph per system
  std::vector<double> cells;         // [B * 9] rows are lattice vectors
  std::vector<double> volumes;       // [B] |det cell| (0 for a cell without volume)
};

// `systems` must already be valid (Engine::validate).
BatchInput make_batch_input(const std::vector<Atoms>& systems, const torch::TensorOptions& float_options);

// [B, 3, 3] cells on `options`' device in its dtype.
torch::Tensor cell_tensor(const BatchInput& batch, const torch::TensorOptions& options);

// Edge vectors r_src - r_tgt + n . cell for the graph's edges, without grad.
torch::Tensor edge_vectors(const torch::Tensor& positions, const RadiusGraph& graph, const torch::Tensor& cells);

double cell_volume(const Matrix3& cell);

}  // namespace uma
