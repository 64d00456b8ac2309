// Per-edge small matrix products (the Wigner rotations between the node frame
// and the edge frames).
#pragma once

#include <torch/torch.h>

namespace uma::edges {

// y[e] = A[e] @ x[e], or A[e]^T @ x[e] when `transpose`.
// A: [E, R, S] (or [E, S, R]), x: [E, S, K] -> [E, R, K].
torch::Tensor edge_matmul(const torch::Tensor& A, const torch::Tensor& x, bool transpose = false);

// y[e] = A[e] @ cat(x[src[e]], x[tgt[e]], channels): the node -> edge-frame
// rotation of a source/target feature pair, A: [E, R, S], x: [N, S, C] ->
// [E, R, 2C].  Autograd keeps x (per node) instead of the [E, S, 2C] pair,
// which the backward pass gathers again; the backward is built from
// differentiable ops, so second derivatives (force training) work.  x's
// gradient sums each node's rows as source, then as target, in edge order
// (NodeSums: no float atomics on a GPU).  Edges where `valid` ([E] bool, may
// be undefined: all edges) is false (a graph's padding slots) take zero rows
// of x and join no sum.
torch::Tensor edge_gather_matmul(const torch::Tensor& A, const torch::Tensor& x,
                                 const torch::Tensor& src, const torch::Tensor& tgt,
                                 const torch::Tensor& valid = {});

}  // namespace uma::edges
