// The per-edge kernels agree with plain ATen (bmm) in value, gradient and
// second derivative (training differentiates forces once more).
#include <gtest/gtest.h>

#include "nn/edge_matmul.h"

namespace uma::nn {
namespace {

using torch::autograd::grad;

torch::Tensor leaf(std::vector<int64_t> shape, int seed) {
  torch::manual_seed(seed);
  return torch::randn(shape, torch::kFloat64).requires_grad_(true);
}

// Value, first and second derivatives of sum(f(A, x)^2 * w) w.r.t. A and x.
std::vector<torch::Tensor> derivatives(const std::function<torch::Tensor(torch::Tensor, torch::Tensor)>& f,
                                       const torch::Tensor& A, const torch::Tensor& x) {
  auto y = f(A, x);
  auto w = torch::linspace(0.5, 1.5, y.numel(), torch::kFloat64).view(y.sizes());
  auto loss = (y.pow(2) * w).sum();
  auto g = grad({loss}, {A, x}, {}, true, true);
  auto gg = grad({g[0].pow(2).sum() + g[1].sin().sum()}, {A, x});
  return {y.detach(), g[0].detach(), g[1].detach(), gg[0], gg[1]};
}

void expect_same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-10, 1e-12)) << "item " << i;
}

TEST(EdgeOps, MatmulAndTransposeMatchBmm) {
  auto A = leaf({7, 9, 5}, 1), x = leaf({7, 5, 11}, 2), xt = leaf({7, 9, 11}, 3);
  expect_same(derivatives([](auto a, auto b) { return edge_matmul(a, b); }, A, x),
              derivatives([](auto a, auto b) { return torch::bmm(a, b); }, A, x));
  expect_same(derivatives([](auto a, auto b) { return edge_matmul(a, b, true); }, A, xt),
              derivatives([](auto a, auto b) { return torch::bmm(a.transpose(1, 2), b); }, A, xt));
}

TEST(EdgeOps, OuterMatchesBmm) {
  auto u = leaf({6, 4, 10}, 4), v = leaf({6, 3, 10}, 5);
  expect_same(derivatives([](auto a, auto b) { return edge_outer(a, b); }, u, v),
              derivatives([](auto a, auto b) { return torch::bmm(a, b.transpose(1, 2)); }, u, v));
}

TEST(EdgeOps, GatherMatmulMatchesIndexSelectAndBmm) {
  auto A = leaf({8, 9, 9}, 6), x = leaf({5, 9, 3}, 7);
  auto src = torch::tensor({0, 1, 4, 2, 2, 3, 0, 4}), tgt = torch::tensor({1, 1, 0, 3, 4, 4, 2, 2});
  expect_same(derivatives([&](auto a, auto b) { return edge_gather_matmul(a, b, src, tgt); }, A, x),
              derivatives([&](auto a, auto b) {
                return torch::bmm(a, torch::cat({b.index_select(0, src), b.index_select(0, tgt)}, 2));
              }, A, x));
}

}  // namespace
}  // namespace uma::nn
