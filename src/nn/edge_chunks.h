// Edge work summed into nodes, chunk by chunk, recomputed in the backward
// pass instead of stored.
//
// out = sum over chunks of contribution(x, vec[chunk]) for the edges in [0, edges):
// the forward pass runs one chunk of edges at a time without recording
// anything, so its peak is one chunk's work; the backward pass recomputes each
// chunk with gradients on and passes the incoming gradient through it at
// once.  Only x and vec are kept.  First derivatives only (forces, stress,
// virials): a second backward through it is refused.
#pragma once

#include <functional>
#include <vector>

#include <torch/torch.h>

namespace uma::nn {

// Contributions of edges [begin, end): x is the whole node tensor (or an
// empty tensor when the work does not read nodes) and vec the chunk's edge
// vectors [end - begin, 3].  Returns the chunk's sum into nodes, out_shape.
using EdgeContribution = std::function<torch::Tensor(
    const torch::Tensor& x, const torch::Tensor& vec, int64_t begin, int64_t end)>;

// Returns [nodes, rows, channels] (the dtype and device of vec).  Gradients
// flow to x and vec; the contribution's parameters get none.
torch::Tensor chunked_edge_sum(const torch::Tensor& x, const torch::Tensor& vec, int64_t edges,
                               int64_t chunk_edges, const std::vector<int64_t>& out_shape,
                               EdgeContribution contribution);

}  // namespace uma::nn
