// Edge work summed into nodes, chunk by chunk, recomputed in the backward
// pass instead of stored.
//
// out = sum over chunks of contribution(x, vec[chunk]) for the edges in [0, edges):
// the forward pass runs one chunk of edges at a time without recording
// anything, so its peak is one chunk's work; the backward pass recomputes each
// chunk with gradients on and passes the incoming gradient through it at
// once.  Only x, vec and the tensors the contribution reads are kept.
//
// Second derivatives (force and stress training): a backward with
// create_graph returns the first derivatives as one more chunked function,
// whose own backward recomputes each chunk twice over (its first derivative
// with a graph, then that graph's backward).  A third backward is refused.
#pragma once

#include <functional>
#include <vector>

#include <torch/torch.h>

namespace uma::edges {

// Contributions of edges [begin, end): x is the whole node tensor (or an
// empty tensor when the work does not read nodes), vec the chunk's edge
// vectors [end - begin, 3] and reads the tensors passed as `reads` below.
// Returns the chunk's sum into nodes, out_shape.
using EdgeContribution = std::function<torch::Tensor(
    const torch::Tensor& x, const torch::Tensor& vec, const std::vector<torch::Tensor>& reads,
    int64_t begin, int64_t end)>;

// Returns [nodes, rows, channels] (the dtype and device of vec).  Gradients
// flow to x, vec and `reads`: every tensor the contribution reads that needs
// a gradient.  Leaves (parameters) it may read where it holds them; every
// other read (mixing coefficients, say) it must take from its `reads`
// argument, which holds a new leaf in its place when a chunk is recomputed,
// so that the recomputation never runs into the caller's graph.  A tensor it
// reads and that is not listed gets no gradient.
torch::Tensor chunked_edge_sum(const torch::Tensor& x, const torch::Tensor& vec, int64_t edges,
                               int64_t chunk_edges, const std::vector<int64_t>& out_shape,
                               const std::vector<torch::Tensor>& reads,
                               EdgeContribution contribution);

}  // namespace uma::edges
