// The gather-rotate op agrees with plain ATen in value, gradient and second
// derivative (training differentiates forces once more).
#include <gtest/gtest.h>

#include "edges/edge_matmul.h"

namespace uma::nn {
namespace {

using torch::autograd::grad;

torch::Tensor leaf(std::vector<int64_t> shape, int seed) {
  torch::manual_seed(seed);
  return torch::randn(shape, torch::kFloat64).requires_grad_(true);
}

// Value, first and second derivatives of sum(f(A, x)^2 * w) w.r.t. A and x.
std::vector<torch::Tensor> derivatives(
    const std::function<torch::Tensor(torch::Tensor, torch::Tensor)>& f, const torch::Tensor& A,
    const torch::Tensor& x) {
  auto y = f(A, x);
  auto w = torch::linspace(0.5, 1.5, y.numel(), torch::kFloat64).view(y.sizes());
  auto loss = (y.pow(2) * w).sum();
  auto g = grad({loss}, {A, x}, {}, true, true);
  auto gg = grad({g[0].pow(2).sum() + g[1].sin().sum()}, {A, x});
  return {y.detach(), g[0].detach(), g[1].detach(), gg[0], gg[1]};
}

void expect_same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-10, 1e-12)) << "item " << i;
}

TEST(EdgeOps, GatherMatmulMatchesIndexSelectAndBmm) {
  auto A = leaf({8, 9, 9}, 6), x = leaf({5, 9, 3}, 7);
  auto src = torch::tensor({0, 1, 4, 2, 2, 3, 0, 4}), tgt = torch::tensor({1, 1, 0, 3, 4, 4, 2, 2});
  expect_same(
      derivatives([&](auto a, auto b) { return edge_gather_matmul(a, b, src, tgt); }, A, x),
      derivatives(
          [&](auto a, auto b) {
            return torch::bmm(a, torch::cat({b.index_select(0, src), b.index_select(0, tgt)}, 2));
          },
          A, x));
}

}  // namespace
}  // namespace uma::nn
