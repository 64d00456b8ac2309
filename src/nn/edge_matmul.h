// Per-edge small matrix products: y[e] = A[e] @ x[e] (or A[e]^T @ x[e]),
// A: [E, R, S], x: [E, S, K] -> y: [E, R, K].
//
// These are the Wigner rotations between the node frame and the edge frames.
// torch::bmm spends most of its time in per-matrix overhead at these sizes
// (9 x 9 times 9 x 256); on the CPU this op runs one fused loop per edge.
// It is differentiable to any order (its backward is built from itself and
// from edge_outer), so conservative forces can be trained on.  On other
// devices it falls back to torch::bmm.
#pragma once

#include <torch/torch.h>

namespace uma::nn {

// y = A @ x, or A^T @ x when `transpose`.
torch::Tensor edge_matmul(const torch::Tensor& A, const torch::Tensor& x, bool transpose = false);

// y[e] = A[e] @ cat(x[src[e]], x[tgt[e]], channels): the node -> edge-frame
// rotation of a source/target feature pair.  Saves x (per node) rather than
// the [E, R, 2C] pair, which is recomputed in the backward pass.
torch::Tensor edge_gather_matmul(const torch::Tensor& A, const torch::Tensor& x,
                                 const torch::Tensor& src, const torch::Tensor& tgt);

// O[e, i, j] = sum_k u[e, i, k] v[e, j, k]   (u: [E, R, K], v: [E, S, K] -> [E, R, S])
torch::Tensor edge_outer(const torch::Tensor& u, const torch::Tensor& v);

}  // namespace uma::nn
