#include "edges/gate_activation.h"

namespace uma::edges {

torch::Tensor gate_activation(const torch::Tensor& gates, const torch::Tensor& x, Layout layout) {
  const int64_t rows = x.size(0), channels = x.size(2);
  auto g = torch::sigmoid(gates).view({rows, 2, channels});  // [rows, l - 1, C]
  auto g1 = g.narrow(1, 0, 1), g2 = g.narrow(1, 1, 1);
  if (layout == Layout::kL) {
    // rows: l0 | l1 (3) | l2 (5)
    auto parts = x.split_with_sizes({1, 3, 5}, 1);
    return torch::cat({torch::silu(parts[0]), parts[1] * g1, parts[2] * g2}, 1);
  }
  // rows: l0m0 | l1m0 l2m0 | l1+1 l2+1 l1-1 l2-1 | l2+2 l2-2: broadcast, no gathered gate copy
  auto parts = x.split_with_sizes({1, 2, 4, 2}, 1);
  auto m1 = (parts[2].view({rows, 2, 2, channels}) * g.unsqueeze(1)).view({rows, 4, channels});
  return torch::cat({torch::silu(parts[0]), parts[1] * g, m1, parts[3] * g2}, 1);
}

}  // namespace uma::edges
