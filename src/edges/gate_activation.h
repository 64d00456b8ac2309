// The gate activation of the SO(2) messages and of the spectral feed-forward.
#pragma once

#include <torch/torch.h>

namespace uma::edges {

// Gate activation: SiLU on the l = 0 row; every row of degree l > 0 times
// sigmoid(gates[:, (l - 1) * C : l * C]).  gates: [rows, 2 * C], x: [rows, 9, C].
enum class Layout { kL, kM };  // row orders of uma_architecture.md 2.2
torch::Tensor gate_activation(const torch::Tensor& gates, const torch::Tensor& x, Layout layout);

}  // namespace uma::edges
