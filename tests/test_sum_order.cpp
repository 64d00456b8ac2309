// Sums without float atomics.  Where sums run in segments (on a GPU; on the
// CPU while a SegmentSumsOnTheCpu lives) an evaluation calls no ATen
// operator that adds floating-point rows with atomics on CUDA, and gives
// the CPU's results: bit for bit where the order of the additions is kept
// (the sums into atoms and nodes), to 1e-13 in float64 where it changes
// (the gradients into embedding tables, a system's single sum).
#include <gtest/gtest.h>

#include "edges/edge_matmul.h"
#include "edges/edge_rotation.h"
#include "edges/edge_segments.h"
#include "edges/table_rows.h"
#include "op_watch.h"
#include "test_util.h"

namespace uma::test {
namespace {

using torch::autograd::grad;

// Value, gradients and second derivatives of sum(f(a, b)^2 * w) w.r.t. a, b.
std::vector<torch::Tensor> derivatives(
    const std::function<torch::Tensor(torch::Tensor, torch::Tensor)>& f, const torch::Tensor& a,
    const torch::Tensor& b) {
  auto y = f(a, b);
  auto w = torch::linspace(0.5, 1.5, y.numel(), y.options()).view(y.sizes());
  auto g = grad({(y.pow(2) * w).sum()}, {a, b}, {}, true, true);
  auto gg = grad({g[0].pow(2).sum() + g[1].sin().sum()}, {a, b});
  return {y.detach(), g[0].detach(), g[1].detach(), gg[0], gg[1]};
}

double largest_difference(const std::vector<torch::Tensor>& a,
                          const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(
        worst, ((a[i] - b[i]).abs().max() / b[i].abs().max().clamp_min(1e-300)).item<double>());
  return worst;
}

torch::Tensor leaf(std::vector<int64_t> shape, int seed,
                   torch::ScalarType dtype = torch::kFloat64) {
  torch::manual_seed(seed);
  return torch::randn(shape, dtype).requires_grad_(true);
}

// A table's rows picked by 300 indices (rows 0 and 5 never): the rows
// exactly, the gradient into the table and the second derivatives as
// LibTorch's embedding's, to 1e-13 (the one-hot product adds in another
// order), and the same bits on every run; a float32 table's gradient is
// summed in float64.
TEST(SumOrder, TableRowsGradientIsOneProduct) {
  torch::manual_seed(21);
  const auto index = torch::randint(1, 5, {300}, torch::kLong);
  auto table = leaf({6, 4}, 22), lift = leaf({300, 4}, 23);
  auto ours = [&](auto t, auto l) { return edges::table_rows(t, index) * l; };
  auto aten = [&](auto t, auto l) { return torch::embedding(t, index) * l; };
  const auto expected = derivatives(aten, table, lift);
  EXPECT_TRUE(torch::equal(edges::table_rows(table, index), torch::embedding(table, index)));
  for (size_t i = 0; i < expected.size(); ++i)  // the CPU's own path is LibTorch's embedding
    EXPECT_TRUE(torch::equal(derivatives(ours, table, lift)[i], expected[i])) << "item " << i;
  const edges::SegmentSumsOnTheCpu in_segments;
  const auto first = derivatives(ours, table, lift), again = derivatives(ours, table, lift);
  EXPECT_TRUE(torch::equal(first[0], expected[0]));
  EXPECT_LE(largest_difference(first, expected), 1e-13);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(torch::equal(first[i], again[i]));
  EXPECT_TRUE(torch::equal(first[1][0], torch::zeros({4}, torch::kFloat64)));  // rows never picked
  EXPECT_TRUE(torch::equal(first[1][5], torch::zeros({4}, torch::kFloat64)));
  // float32: the float64 sum, rounded once
  auto t32 = leaf({6, 4}, 24, torch::kFloat32);
  const auto g = torch::randn({300, 4}, torch::kFloat32);
  const auto g32 = grad({(edges::table_rows(t32, index) * g).sum()}, {t32})[0];
  const auto g64 = torch::zeros({6, 4}, torch::kFloat64).index_add(0, index, g.to(torch::kFloat64));
  EXPECT_TRUE(torch::equal(g32, g64.to(torch::kFloat32)));
  // a table without gradient: a plain gather
  const auto frozen = table.detach();
  EXPECT_TRUE(torch::equal(edges::table_rows(frozen, index), frozen.index_select(0, index)));
}

// The node -> edge rotation, with edges where `valid` is false (a graph's
// padding slots) taking zero rows of x: the composition's values and
// derivatives (the backward is the forward's exact adjoint); x's gradient
// sums each node's rows as source, then as target, in edge order, the left-out
// edges joining no sum, bit for bit as ATen's index_add, on the CPU and in
// segments, to the second derivative.
TEST(SumOrder, GatherMatmulInSegmentsEqualsTheCpus) {
  auto A = leaf({8, 9, 9}, 6), x = leaf({5, 9, 3}, 7);
  const auto src = torch::tensor({0, 1, 4, 2, 2, 3, 0, 4}),
             tgt = torch::tensor({1, 1, 0, 3, 4, 4, 2, 2});
  const auto valid = torch::tensor({true, true, true, false, true, true, true, false});
  const auto live = valid.to(torch::kFloat64).view({8, 1, 1});
  auto ours = [&](auto a, auto b) { return edges::edge_gather_matmul(a, b, src, tgt, valid); };
  auto aten = [&](auto a, auto b) {
    return torch::bmm(a, torch::cat({b.index_select(0, src), b.index_select(0, tgt)}, 2) * live);
  };
  const auto cpu = derivatives(ours, A, x);
  EXPECT_LE(largest_difference(cpu, derivatives(aten, A, x)), 1e-15);
  // x's gradient for given output gradients
  torch::manual_seed(8);
  const auto G = torch::randn({8, 9, 6}, torch::kFloat64);
  const auto h = torch::bmm(A.detach().transpose(1, 2), G).chunk(2, 2);
  const auto kept = valid.nonzero().view(-1);
  const auto chain = torch::zeros({5, 9, 3}, torch::kFloat64)
                         .index_add(0, src.index_select(0, kept), h[0].index_select(0, kept))
                         .index_add(0, tgt.index_select(0, kept), h[1].index_select(0, kept));
  auto gx = [&] { return grad({edges::edge_gather_matmul(A, x, src, tgt, valid)}, {x}, {G})[0]; };
  EXPECT_TRUE(torch::equal(gx(), chain));
  const edges::SegmentSumsOnTheCpu in_segments;
  EXPECT_TRUE(torch::equal(gx(), chain));
  const auto segmented = derivatives(ours, A, x);
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_TRUE(torch::equal(segmented[i], cpu[i])) << "item " << i;
}

// The Wigner matrices' reordering into the M layout: index_select's values,
// and a gradient that is the inverse reordering, bit for bit as
// index_select's (whose gradient is an index_add), to the second derivative.
TEST(SumOrder, MLayoutReorderingEqualsIndexSelect) {
  auto D = leaf({5, 9, 9}, 31), lift = leaf({5, 9, 9}, 32);
  const auto order = torch::tensor({0, 2, 6, 3, 7, 1, 5, 8, 4});
  for (int64_t dim : {1, 2}) {
    const auto ours = derivatives([&](auto a, auto b) { return to_m_layout(a, dim) * b; }, D, lift);
    const auto aten =
        derivatives([&](auto a, auto b) { return a.index_select(dim, order) * b; }, D, lift);
    for (size_t i = 0; i < ours.size(); ++i)
      EXPECT_TRUE(torch::equal(ours[i], aten[i])) << "dim " << dim << ", item " << i;
  }
}

Engine engine(edges::EdgeOps ops, bool merge) {
  EngineOptions o;
  o.device = test_device();
  o.dtype = torch::kFloat64;
  o.edge_ops = ops;
  o.merge_mole = merge;
  return Engine(random_model(small_config(4, true, true)), o);
}

// Forces, stress and per-atom virials of a batch (three systems, the
// composition embedding, charge balancing) and of one system with merged
// experts, with either edge backend: in segments no float atomics and the
// CPU's results to 1e-13.  On the CPU the watch sees index_add first (the
// CPU's own sums): the watch can fail.
TEST(SumOrder, EvaluationsInSegmentsAddNoFloatAtomics) {
  std::vector<Atoms> batch{copper_cell(), molecule(), triclinic_cell()};
  batch[2].task = "oc20";
  for (auto ops : {edges::EdgeOps::kLean, edges::EdgeOps::kReference})
    for (bool merge : {false, true}) {
      const auto what = merge ? std::vector<Atoms>{batch[0]} : batch;
      const std::string name =
          std::string(edges::edge_ops_name(ops)) + (merge ? " merged" : " batch");
      auto e = engine(ops, merge);
      HostEvaluation cpu, segmented;
      {
        OpWatch watch;
        cpu = evaluate_on_host(e, what, Request::all());
        if (test_device().is_cpu())
          EXPECT_EQ(watch.calls().count("aten::index_add (floating)"), 1u) << name;
      }
      {
        const edges::SegmentSumsOnTheCpu in_segments;
        OpWatch watch;
        segmented = evaluate_on_host(e, what, Request::all());
        EXPECT_EQ(watch.calls().count("aten::linear (floating)"), 1u) << name << ": the watch sees";
        for (const auto& call : watch.float_atomics()) ADD_FAILURE() << name << ": " << call;
      }
      auto close = [&](const torch::Tensor& a, const torch::Tensor& b, const char* what) {
        EXPECT_TRUE(torch::equal(a.isnan(), b.isnan()))
            << name << ": " << what;  // a molecule's stress
        const auto x = torch::nan_to_num(a, 0.0), y = torch::nan_to_num(b, 0.0);
        EXPECT_LE((x - y).abs().max().item<double>(), 1e-13 * y.abs().max().item<double>())
            << name << ": " << what;
      };
      for (size_t b = 0; b < cpu.energy.size(); ++b)
        EXPECT_NEAR(segmented.energy[b], cpu.energy[b], 1e-13 * std::abs(cpu.energy[b])) << name;
      close(segmented.forces, cpu.forces, "forces");
      close(segmented.stress, cpu.stress, "stress");
      close(segmented.atom_virial, cpu.atom_virial, "atom virial");
    }
}

}  // namespace
}  // namespace uma::test
