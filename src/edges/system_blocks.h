// Linear maps applied per system over blocks of rows, as autograd functions
// whose derivatives are again these functions: the MoLE layers' per-system
// GEMMs on unequal blocks, differentiable to any order without the split,
// select and concatenation (and their zero-filled full-size backward buffers)
// a composition of per-system views would record.
#pragma once

#include <vector>

#include <torch/torch.h>

namespace uma::edges {

// y[rows of b] = x[rows of b] w[b]^T.  x: [N, in], w: [B, out, in] -> [N, out];
// row_offsets: B + 1 host offsets (0 first, N last).
torch::Tensor system_blocks_linear(const torch::Tensor& x, const torch::Tensor& w,
                                   const std::vector<int64_t>& row_offsets);

// g[b] = a[rows of b]^T c[rows of b].  a: [N, p], c: [N, q] -> [B, p, q]: the
// weight gradient of system_blocks_linear.
torch::Tensor system_blocks_outer(const torch::Tensor& a, const torch::Tensor& c,
                                  const std::vector<int64_t>& row_offsets);

}  // namespace uma::edges
