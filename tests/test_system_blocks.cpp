// The per-system block GEMMs (edges/system_blocks.h) against the composition of
// per-system views they replace, in float64: values, first derivatives and
// second derivatives with respect to the rows and the weights, on unequal
// blocks including an empty one.
#include <gtest/gtest.h>

#include "edges/system_blocks.h"

namespace uma::edges {
namespace {

using torch::autograd::grad;

const std::vector<int64_t> kOffsets = {0, 5, 5, 12, 14};  // system 1 has no rows

torch::Tensor leaf(std::vector<int64_t> shape, int seed) {
  torch::manual_seed(seed);
  return torch::randn(shape, torch::kFloat64).requires_grad_(true);
}

torch::Tensor by_views(const torch::Tensor& x, const torch::Tensor& w) {
  std::vector<torch::Tensor> parts;
  for (size_t b = 0; b + 1 < kOffsets.size(); ++b)
    parts.push_back(
        torch::mm(x.narrow(0, kOffsets[b], kOffsets[b + 1] - kOffsets[b]), w[b].t()));
  return torch::cat(parts, 0);
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const char* what) {
  ASSERT_TRUE(got.defined()) << what;
  const double scale = std::max(1.0, want.abs().max().item<double>());
  EXPECT_LE((got - want).abs().max().item<double>(), 1e-13 * scale) << what;
}

TEST(SystemBlocks, LinearMatchesViewsToSecondOrder) {
  auto x = leaf({14, 6}, 1), w = leaf({4, 3, 6}, 2);
  auto r = torch::randn({14, 3}, torch::kFloat64);
  auto cx = torch::randn({14, 6}, torch::kFloat64), cw = torch::randn({4, 3, 6}, torch::kFloat64);
  std::vector<std::vector<torch::Tensor>> results;
  for (auto f : {&by_views, +[](const torch::Tensor& x, const torch::Tensor& w) {
                   return system_blocks_linear(x, w, kOffsets);
                 }}) {
    auto y = f(x, w);
    // A loss whose gradient depends on x and w, so every second derivative counts.
    auto loss = (y * y * r).sum();
    auto g = grad({loss}, {x, w}, {}, /*retain_graph=*/true, /*create_graph=*/true);
    auto s = (g[0] * cx).sum() + (g[1] * cw).sum();
    auto h = grad({s}, {x, w});
    results.push_back({y, g[0], g[1], h[0], h[1]});
  }
  const char* names[] = {"y", "dx", "dw", "d2x", "d2w"};
  for (size_t k = 0; k < results[0].size(); ++k)
    expect_close(results[1][k], results[0][k], names[k]);
}

TEST(SystemBlocks, OuterIsTheWeightGradient) {
  auto a = leaf({14, 3}, 3), c = leaf({14, 6}, 4);
  auto want = torch::stack({torch::mm(a.narrow(0, 0, 5).t(), c.narrow(0, 0, 5)),
                            torch::zeros({3, 6}, torch::kFloat64),
                            torch::mm(a.narrow(0, 5, 7).t(), c.narrow(0, 5, 7)),
                            torch::mm(a.narrow(0, 12, 2).t(), c.narrow(0, 12, 2))});
  auto got = system_blocks_outer(a, c, kOffsets);
  expect_close(got, want, "g");
  auto dg = torch::randn({4, 3, 6}, torch::kFloat64);
  auto gw = grad({(want * dg).sum()}, {a, c});
  auto gg = grad({(got * dg).sum()}, {a, c});
  expect_close(gg[0], gw[0], "da");
  expect_close(gg[1], gw[1], "dc");
}

TEST(SystemBlocks, RefusesOffsetsThatDoNotCoverTheRows) {
  auto x = torch::randn({14, 6}, torch::kFloat64), w = torch::randn({4, 3, 6}, torch::kFloat64);
  EXPECT_THROW(system_blocks_linear(x, w, {0, 5, 12, 14}), c10::Error);
  EXPECT_THROW(system_blocks_linear(x, w, {0, 5, 5, 12, 13}), c10::Error);
}

}  // namespace
}  // namespace uma::edges
