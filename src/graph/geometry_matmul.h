// Matrix products of geometry (wrapping positions into the cell, periodic
// image shifts, the Wigner matrices of the edge frames) that `precision tf32`
// must not touch: TF32 keeps 10 mantissa bits, so a 20 A cell vector rounded
// to TF32 moves an image by about 0.01 A.
#pragma once

#include <torch/torch.h>

namespace uma {

// a.matmul(b), never on TF32 tensor cores: while LibTorch allows TF32 for
// float32 GEMMs, float32 operands are multiplied in float64 and the product
// rounded once to float32, in the forward and in the backward pass (a
// NoTF32Guard would not reach LibTorch's autograd worker threads).  Other
// dtypes, and float32 without TF32, multiply as they are.
torch::Tensor geometry_matmul(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace uma
