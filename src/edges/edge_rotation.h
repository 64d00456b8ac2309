// Per-edge rotation of spherical-harmonic features into the edge frame.
//
// The frame rotates the unit edge vector onto +y (the m = 0 axis of e3nn's
// y-up real basis) through a blend of two quaternion charts, as fairchem's
// quaternion path does, with roll angle gamma = 0.
#pragma once

#include <torch/torch.h>

namespace uma {

// vec: [E, 3] -> block-diagonal Wigner matrices D [E, 9, 9] in L-layout
// (blocks l = 0, 1, 2; the l = 1 block is the 3x3 rotation matrix in (x, y, z)).
torch::Tensor edge_wigner(const torch::Tensor& vec);

// x with its 9 L-layout coefficients along `dim` reordered into the M layout
// (M position j holds L position [0, 2, 6, 3, 7, 1, 5, 8, 4][j]).  Its
// gradient is the inverse reordering, a gather too (index_select's gradient
// is an index_add: float atomics on CUDA); differentiable to any order.
torch::Tensor to_m_layout(const torch::Tensor& x, int64_t dim);

}  // namespace uma
