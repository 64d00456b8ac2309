// The gather-rotate op, the segment sums and the radial MLPs' fused
// LayerNorm+SiLU agree with plain ATen in value, gradient and second
// derivative (training differentiates forces once more).
#include <gtest/gtest.h>

#include "edges/edge_matmul.h"
#include "edges/edge_segments.h"
#include "measure/storage_meter.h"
#include "edges/radial.h"
#include "test_util.h"

namespace uma::edges {
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

// Value, first and second derivatives of sum(f(x)^2 * w) w.r.t. x.
std::vector<torch::Tensor> derivatives(const std::function<torch::Tensor(torch::Tensor)>& f,
                                       const torch::Tensor& x) {
  auto y = f(x);
  auto w = torch::linspace(0.5, 1.5, y.numel(), torch::kFloat64).view(y.sizes());
  auto g = grad({(y.pow(2) * w).sum()}, {x}, {}, true, true)[0];
  auto gg = grad({g.sin().sum()}, {x})[0];
  return {y.detach(), g.detach(), gg};
}

// Nodes 0..5 of which 2 and 5 have no edge, in an order the sort must keep.
const torch::Tensor& edge_nodes() {
  static const auto node = torch::tensor({3, 0, 4, 3, 1, 0, 3, 4, 1});
  return node;
}

// Every node's rows summed in their order: the same bits as index_add, which
// on the CPU adds rows one after another; first and second derivatives as
// index_add's.
TEST(SegmentSums, SegmentSumEqualsIndexAdd) {
  const auto& node = edge_nodes();
  const auto segments = segments_by_node(node, 6);
  auto v = leaf({9, 3}, 11);
  const auto ours = segment_sum(v, node, segments);
  const auto aten = torch::zeros({6, 3}, v.options()).index_add(0, node, v);
  EXPECT_TRUE(torch::equal(ours, aten));
  EXPECT_TRUE(torch::equal(ours.narrow(0, 2, 1), torch::zeros({1, 3}, v.options())));
  expect_same(derivatives([&](auto b) { return segment_sum(b.pow(3), node, segments); }, v),
              derivatives(
                  [&](auto b) {
                    return torch::zeros({6, 3}, b.options()).index_add(0, node, b.pow(3));
                  },
                  v));
  // no edges at all: zeros for every node
  const auto none = torch::zeros({0}, torch::kLong);
  EXPECT_TRUE(torch::equal(segment_sum(torch::zeros({0, 3}, torch::kFloat64), none,
                                       segments_by_node(none, 4)),
                           torch::zeros({4, 3}, torch::kFloat64)));
}

TEST(SegmentSums, GatherRowsEqualsIndexSelect) {
  const auto& node = edge_nodes();
  const auto segments = segments_by_node(node, 6);
  auto t = leaf({6, 2, 3}, 13);
  EXPECT_TRUE(torch::equal(gather_rows(t, node, segments), t.index_select(0, node)));
  expect_same(derivatives([&](auto b) { return gather_rows(b, node, segments).sin(); }, t),
              derivatives([&](auto b) { return b.index_select(0, node).sin(); }, t));
}

// Rows left out (a graph's padding slots: node `nodes`) join no sum, in value
// and in every derivative, and the gather gives them zero rows; the kept
// rows are summed in their order, as index_add over the kept rows alone.
TEST(SegmentSums, LeftOutRowsJoinNoSum) {
  const auto& node = edge_nodes();
  const auto keep = torch::tensor({true, true, false, true, true, false, true, true, false});
  const auto left = leave_out(node, keep, 6);
  EXPECT_TRUE(torch::equal(left, torch::tensor({3, 0, 6, 3, 1, 6, 3, 4, 6})));
  const auto segments = segments_by_node(left, 6);
  const auto kept = keep.nonzero().view(-1);
  auto v = leaf({9, 3}, 17);
  auto aten = [&](const torch::Tensor& b) {
    return torch::zeros({6, 3}, b.options())
        .index_add(0, node.index_select(0, kept), b.index_select(0, kept));
  };
  EXPECT_TRUE(torch::equal(segment_sum(v, left, segments), aten(v)));
  const NodeSums sums(left, 6);
  EXPECT_TRUE(torch::equal(sums(v), aten(v)));
  expect_same(derivatives([&](auto b) { return segment_sum(b.pow(3), left, segments); }, v),
              derivatives([&](auto b) { return aten(b.pow(3)); }, v));
  expect_same(derivatives([&](auto b) { return sums(b.pow(3)); }, v),
              derivatives([&](auto b) { return aten(b.pow(3)); }, v));
  auto t = leaf({6, 2}, 19);
  const auto rows = gather_rows(t, left, segments);
  EXPECT_TRUE(torch::equal(rows.index_select(0, kept), t.index_select(0, node.index_select(0, kept))));
  EXPECT_TRUE(torch::equal(rows.masked_select(~keep.unsqueeze(1)), torch::zeros({6}, t.options())));
}

// On the test device (on CUDA, the segment path: a sort and segment_reduce):
// the sums of many rows into few nodes equal index_add's to rounding, and two
// runs give the same bits (CUDA's index_add adds with float atomics).
TEST(SegmentSums, SumIntoNodesRepeatsOnTheTestDevice) {
  const auto device = uma::test::test_device();
  torch::manual_seed(15);
  const auto node = torch::randint(0, 7, {20000}, torch::kLong).to(device);
  const auto v = torch::randn({20000, 3}, torch::kFloat32).to(device);
  const auto a = sum_into_nodes(v, node, 8), b = sum_into_nodes(v, node, 8);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_TRUE(torch::allclose(a, torch::zeros({8, 3}, v.options()).index_add(0, node, v), 1e-4, 1e-4));
  const auto t = torch::randn({8, 5}, torch::kFloat64).to(device).requires_grad_(true);
  const auto g1 = grad({gather_from_nodes(t, node).sum()}, {t})[0];
  const auto g2 = grad({gather_from_nodes(t, node).sum()}, {t})[0];
  EXPECT_TRUE(torch::equal(g1, g2));
  EXPECT_TRUE(torch::equal(g1.select(1, 0).to(torch::kCPU).to(torch::kLong),
                           torch::bincount(node.to(torch::kCPU), {}, 8)));
  // rows left out, with the segments made once for two sums
  const auto keep = torch::rand({20000}, torch::kFloat32).to(device) < 0.9;
  const NodeSums sums(leave_out(node, keep, 8), 8);
  const auto kept = sums(v);
  EXPECT_TRUE(torch::equal(kept, sums(v)));
  EXPECT_TRUE(torch::allclose(
      kept, torch::zeros({8, 3}, v.options()).index_add(0, node, v * keep.unsqueeze(1)), 1e-4, 1e-4));
  // one node (a system's atoms): a plain reduction off the CPU
  const auto one = torch::zeros_like(node);
  const auto s1 = sum_into_nodes(v, one, 1);
  EXPECT_TRUE(torch::equal(s1, sum_into_nodes(v, one, 1)));
  EXPECT_TRUE(torch::allclose(s1, v.sum(0, true), 1e-4, 1e-3));
  const auto t1 = torch::randn({1, 5}, torch::kFloat64).to(device).requires_grad_(true);
  EXPECT_TRUE(torch::equal(gather_from_nodes(t1, one), t1.detach().expand({20000, 5})));
  const auto g3 = grad({gather_from_nodes(t1, one).sum()}, {t1})[0];
  EXPECT_TRUE(torch::equal(g3, torch::full({1, 5}, 20000.0, t1.options())));
}

// The radial MLP on its factored input equals its layers on the
// concatenation cat(basis, source_table[zs], target_table[zt]) that fairchem
// feeds it, with frozen weights (its fused LayerNorm+SiLU) and trained ones,
// on all edges and on the first n: values, the gradients (basis; trained:
// the first layer's weight and bias and both tables), the second derivative
// w.r.t. the basis.
TEST(RadialMLP, FactoredInputEqualsTheConcatenation) {
  constexpr int64_t E = 40, K = 8, Ec = 6, Z = 5;
  torch::manual_seed(11);
  RadialMLP mlp(std::vector<int64_t>{K + 2 * Ec, Ec, Ec, 7});
  mlp->to(torch::kFloat64);
  RadialInput in{leaf({E, K}, 12), torch::randint(0, Z, {E}), torch::randint(0, Z, {E}),
                 leaf({Z, Ec}, 13), leaf({Z, Ec}, 14)};
  const auto p = mlp->named_parameters();
  auto concatenated = [&](const RadialInput& r) {
    auto h = torch::cat({r.basis, r.source_table.index_select(0, r.source_elements),
                         r.target_table.index_select(0, r.target_elements)},
                        1);
    h = torch::linear(h, p["net.0.weight"], p["net.0.bias"]);
    h = torch::silu(torch::layer_norm(h, {Ec}, p["net.1.weight"], p["net.1.bias"], 1e-5));
    h = torch::linear(h, p["net.3.weight"], p["net.3.bias"]);
    h = torch::silu(torch::layer_norm(h, {Ec}, p["net.4.weight"], p["net.4.bias"], 1e-5));
    return torch::linear(h, p["net.6.weight"], p["net.6.bias"]);
  };
  for (bool trained : {false, true}) {
    for (auto& t : mlp->parameters()) t.requires_grad_(trained);
    std::vector<torch::Tensor> wrt{in.basis};
    if (trained)
      wrt.insert(wrt.end(), {p["net.0.weight"], p["net.0.bias"], in.source_table, in.target_table});
    for (int64_t n : {E, int64_t{25}}) {
      const auto part = in.first(n);
      const auto a = mlp->forward(part), b = concatenated(part);
      ASSERT_EQ(a.sizes(), b.sizes());
      EXPECT_TRUE(torch::allclose(a, b, 1e-13, 1e-14)) << (a - b).abs().max().item<double>();
      const auto v = torch::linspace(-1.0, 1.0, a.numel(), torch::kFloat64).view(a.sizes());
      const auto ga = grad({a}, wrt, {v}, true, true), gb = grad({b}, wrt, {v}, true, true);
      for (size_t i = 0; i < wrt.size(); ++i)
        EXPECT_TRUE(torch::allclose(ga[i], gb[i], 1e-12, 1e-13))
            << "gradient " << i << (trained ? " (trained)" : " (frozen)") << ", " << n << " edges";
      const auto gga = grad({ga[0].pow(2).sum()}, {in.basis})[0];
      const auto ggb = grad({gb[0].pow(2).sum()}, {in.basis})[0];
      EXPECT_TRUE(torch::allclose(gga, ggb, 1e-12, 1e-13))
          << "second derivative, " << n << " edges";
    }
  }
}

// layer_norm_silu against silu(layer_norm(x)): values and first derivatives
// bit for bit (the same ATen kernels; without and with create_graph, which
// take different paths), second derivatives (w.r.t. x, weight, bias and the
// incoming gradient) to rounding.
TEST(LayerNormSiLU, MatchesTheComposition) {
  constexpr int64_t C = 24;
  const auto x = leaf({50, C}, 1), weight = leaf({C}, 2), bias = leaf({C}, 3);
  const auto v = leaf({50, C}, 4);  // the incoming gradient
  auto run = [&](bool fused) {
    auto y = fused ? layer_norm_silu(x, weight, bias, 1e-5)
                   : torch::silu(torch::layer_norm(x, {C}, weight, bias, 1e-5));
    auto plain = grad({y}, {x, weight, bias}, {v}, true);
    auto g = grad({y}, {x, weight, bias}, {v}, true, true);
    auto gg = grad({(g[0] * g[0].cos()).sum() + g[1].pow(3).sum() + (g[2] * bias).sum()},
                   {x, weight, bias, v});
    std::vector<torch::Tensor> all{y.detach(), plain[0], plain[1], plain[2],
                                   g[0].detach(), g[1].detach(), g[2].detach()};
    all.insert(all.end(), gg.begin(), gg.end());
    return all;
  };
  const auto fused = run(true), composed = run(false);
  for (size_t i = 0; i < 7; ++i) EXPECT_TRUE(torch::equal(fused[i], composed[i])) << "item " << i;
  for (size_t i = 7; i < fused.size(); ++i)
    EXPECT_TRUE(torch::allclose(fused[i], composed[i], 1e-12, 1e-13))
        << "second derivative " << i - 7 << ": "
        << (fused[i] - composed[i]).abs().max().item<double>();
}

// What the backward keeps: the composition keeps the normalised rows for
// SiLU's backward (one more [E, C] tensor), the fused op its input only.
TEST(LayerNormSiLU, KeepsOnlyItsInputForTheBackward) {
  constexpr int64_t E = 4096, C = 128;
  const auto x = leaf({E, C}, 5), weight = leaf({C}, 6), bias = leaf({C}, 7);
  auto kept = [&](bool fused) {
    CpuStorageMeter meter;
    const int64_t before = meter.live();
    auto y = fused ? layer_norm_silu(x, weight, bias, 1e-5)
                   : torch::silu(torch::layer_norm(x, {C}, weight, bias, 1e-5));
    return meter.live() - before - static_cast<int64_t>(y.nbytes());
  };
  const int64_t rows = E * C * 8;
  EXPECT_LT(kept(true), rows / 8) << "fused: bytes kept beside the output";
  EXPECT_GE(kept(false), rows) << "the composition: the normalised rows (this test's premise)";
}

}  // namespace
}  // namespace uma::edges
