// The lean edge operators (nn/lean_edges.h) against the LibTorch composition
// they replace, in float64: values and first derivatives with respect to
// every input (through edge_wigner for the rotations), on a graph whose
// segments cover more edges than the operator is given (layer pruning), with
// nodes that have no edges.  Second derivatives are refused.  And the
// engine's two edge backends, which agree.
#include <gtest/gtest.h>

#include "edge_rotation.h"
#include "engine.h"
#include "nn/lean_edges.h"
#include "nn/so3.h"
#include "test_util.h"

namespace uma::nn {
namespace {

using torch::autograd::grad;

constexpr int64_t kNodes = 7, kGraphEdges = 23, kEdges = 19, kChannels = 5;

torch::Tensor leaf(std::vector<int64_t> shape, int seed) {
  torch::manual_seed(seed);
  return torch::randn(shape, torch::kFloat64).requires_grad_(true);
}

// A random graph over kNodes nodes; node 6 has no edges at all, node 5 only
// past the first kEdges.
struct Graph {
  torch::Tensor src, tgt;
  EdgeSegments by_source, by_target;
};

Graph graph() {
  torch::manual_seed(11);
  Graph g;
  g.src = torch::randint(0, 5, {kGraphEdges}, torch::kLong);
  g.tgt = torch::randint(0, 5, {kGraphEdges}, torch::kLong);
  g.tgt.narrow(0, kEdges, kGraphEdges - kEdges).fill_(5);
  g.by_source = segments_by_node(g.src, kNodes);
  g.by_target = segments_by_node(g.tgt, kNodes);
  g.src = g.src.narrow(0, 0, kEdges);
  g.tgt = g.tgt.narrow(0, 0, kEdges);
  return g;
}

torch::Tensor wigner_of(const torch::Tensor& vec) { return edge_wigner(vec); }

// The message pieces as block.cpp's LibTorch path makes them.
MPieces rotate_in_reference(const torch::Tensor& D, const torch::Tensor& x, const Graph& g,
                            const torch::Tensor& w) {
  const int64_t E = D.size(0), C2 = 2 * x.size(2);
  auto wigner = D.index_select(1, m_layout_permutation(D.device()));
  auto msg =
      torch::bmm(wigner, torch::cat({x.index_select(0, g.src), x.index_select(0, g.tgt)}, 2));
  auto by_m = msg.split_with_sizes({3, 4, 2}, 1);
  auto wm = w.split_with_sizes({3 * C2, 2 * C2, C2}, 1);
  return {(by_m[0].reshape({E, 3 * C2}) * wm[0]).view({E, 3, C2}),
          (by_m[1].reshape({E, 2, 2 * C2}) * wm[1].unsqueeze(1)).view({E, 4, C2}),
          by_m[2] * wm[2].unsqueeze(1)};
}

MPieces gate_reference(const torch::Tensor& y0, const torch::Tensor& y1, const torch::Tensor& y2) {
  const int64_t E = y0.size(0), H = y1.size(2);
  auto parts = y0.split_with_sizes({2 * H, 3 * H}, 1);
  auto gated =
      gate_activation(parts[0], torch::cat({parts[1].view({E, 3, H}), y1, y2}, 1), Layout::kM);
  auto by_m = gated.split_with_sizes({3, 4, 2}, 1);
  return {by_m[0], by_m[1], by_m[2]};
}

torch::Tensor rotate_out_reference(const torch::Tensor& D, const torch::Tensor& env,
                                   const MPieces& y, const Graph& g) {
  auto inv =
      D.transpose(1, 2).index_select(2, m_layout_permutation(D.device())) * env.view({-1, 1, 1});
  auto messages = y[1].defined() ? torch::bmm(inv, torch::cat({y[0], y[1], y[2]}, 1))
                                 : torch::bmm(inv.narrow(2, 0, 3), y[0]);
  return torch::zeros({kNodes, 9, y[0].size(2)}, y[0].options()).index_add(0, g.tgt, messages);
}

// sum_i <out_i, weight_i> with fixed pseudo-random weights, and its gradients.
std::vector<torch::Tensor> value_and_grads(const std::vector<torch::Tensor>& outputs,
                                           const std::vector<torch::Tensor>& inputs) {
  auto loss = torch::zeros({}, torch::kFloat64);
  std::vector<torch::Tensor> all;
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto w = torch::sin(torch::arange(outputs[i].numel(), torch::kFloat64) * (0.37 + 0.1 * i))
                 .view(outputs[i].sizes());
    loss = loss + (outputs[i] * w).sum();
    all.push_back(outputs[i].detach());
  }
  for (auto& d : grad({loss}, inputs)) all.push_back(d);
  return all;
}

void expect_same(const std::vector<torch::Tensor>& lean,
                 const std::vector<torch::Tensor>& reference) {
  ASSERT_EQ(lean.size(), reference.size());
  for (size_t i = 0; i < lean.size(); ++i) {
    const double scale = reference[i].abs().max().item<double>();
    ASSERT_GT(scale, 0.0) << "item " << i << " is zero: the comparison would prove nothing";
    EXPECT_LE((lean[i] - reference[i]).abs().max().item<double>(), 1e-13 * scale) << "item " << i;
  }
}

TEST(LeanEdges, RotateToEdgeFrameMatchesTheComposition) {
  const auto g = graph();
  auto vec = leaf({kEdges, 3}, 1), x = leaf({kNodes, 9, kChannels}, 2),
       w = leaf({kEdges, 12 * kChannels}, 3);
  auto lean = [&] {
    auto p = rotate_to_edge_frame(wigner_of(vec), x, g.src, g.tgt, w, g.by_source, g.by_target);
    return value_and_grads({p[0], p[1], p[2]}, {vec, x, w});
  };
  auto reference = [&] {
    auto p = rotate_in_reference(wigner_of(vec), x, g, w);
    return value_and_grads({p[0], p[1], p[2]}, {vec, x, w});
  };
  expect_same(lean(), reference());
}

TEST(LeanEdges, GateMatchesGateActivation) {
  const int64_t H = kChannels;
  auto y0 = leaf({kEdges, 5 * H}, 4), y1 = leaf({kEdges, 4, H}, 5), y2 = leaf({kEdges, 2, H}, 6);
  auto lean = gate_m_pieces(y0, y1, y2);
  auto reference = gate_reference(y0, y1, y2);
  expect_same(value_and_grads({lean[0], lean[1], lean[2]}, {y0, y1, y2}),
              value_and_grads({reference[0], reference[1], reference[2]}, {y0, y1, y2}));
}

TEST(LeanEdges, RotateToNodesSummedMatchesBmmAndIndexAdd) {
  const auto g = graph();
  auto vec = leaf({kEdges, 3}, 7), env = leaf({kEdges}, 8);
  auto y0 = leaf({kEdges, 3, kChannels}, 9), y1 = leaf({kEdges, 4, kChannels}, 10),
       y2 = leaf({kEdges, 2, kChannels}, 11);
  for (bool all_rows : {true, false}) {
    SCOPED_TRACE(all_rows ? "9 rows" : "m = 0 rows only (edge degree)");
    MPieces y{y0, all_rows ? y1 : torch::Tensor(), all_rows ? y2 : torch::Tensor()};
    std::vector<torch::Tensor> inputs{vec, env, y0};
    if (all_rows) inputs.insert(inputs.end(), {y1, y2});
    auto lean = value_and_grads(
        {rotate_to_nodes_summed(wigner_of(vec), env, y, g.tgt, g.by_target, kNodes)}, inputs);
    auto reference = value_and_grads({rotate_out_reference(wigner_of(vec), env, y, g)}, inputs);
    expect_same(lean, reference);
    // node 6 has no edges, node 5 only beyond the operator's edges
    EXPECT_EQ(lean[0].narrow(0, 5, 2).abs().max().item<double>(), 0.0);
  }
}

TEST(LeanEdges, RefuseSecondDerivatives) {
  const auto g = graph();
  auto vec = leaf({kEdges, 3}, 12), x = leaf({kNodes, 9, kChannels}, 13),
       w = leaf({kEdges, 12 * kChannels}, 14);
  auto p = rotate_to_edge_frame(wigner_of(vec), x, g.src, g.tgt, w, g.by_source, g.by_target);
  auto out =
      rotate_to_nodes_summed(wigner_of(vec), w.narrow(1, 0, 1).squeeze(1),
                             {p[0].narrow(2, 0, kChannels), {}, {}}, g.tgt, g.by_target, kNodes);
  test::expect_error([&] { grad({out.pow(2).sum()}, {vec}, {}, true, /*create_graph=*/true); },
                     "no second derivative");
}

}  // namespace
}  // namespace uma::nn

namespace uma {
namespace {

// The engine's two edge backends (nn/edge_backend.h) through the interface
// the pair style calls: EngineOptions::edge_ops picks one when the engine is
// made, and in float64 both give the same energies, forces and stress on
// periodic and molecular systems (stored and recomputed in chunks).
TEST(EdgeBackends, ChosenOnceAndAgreeInFloat64) {
  for (int64_t chunk : {int64_t{0}, int64_t{64}}) {
    EngineOptions lean_options, reference_options;
    lean_options.dtype = reference_options.dtype = torch::kFloat64;
    lean_options.recompute_chunk = reference_options.recompute_chunk = chunk;
    reference_options.edge_ops = EngineOptions::EdgeOps::kReference;
    Engine lean(test::random_model(test::small_config()), lean_options);
    Engine reference(test::random_model(test::small_config()), reference_options);
    EXPECT_STREQ(lean.stats().edge_backend->name(), "lean");
    EXPECT_STREQ(reference.stats().edge_backend->name(), "reference");
    EXPECT_FALSE(lean.stats().edge_backend->second_derivatives());
    EXPECT_TRUE(reference.stats().edge_backend->second_derivatives());
    for (const Atoms& a : {test::copper_cell(0.1), test::triclinic_cell(), test::molecule()}) {
      const auto x = evaluate_on_host(lean, {a}), y = evaluate_on_host(reference, {a});
      SCOPED_TRACE("chunk " + std::to_string(chunk) + ", " + std::to_string(a.numbers.size()) +
                   " atoms");
      EXPECT_NEAR(x.energy[0], y.energy[0], 1e-12 * std::max(1.0, std::abs(y.energy[0])));
      EXPECT_LT((x.forces - y.forces).abs().max().item<double>(), 1e-12);
      if (y.stress.defined())  // NaN for the molecule (no volume) in both
        EXPECT_TRUE(torch::allclose(x.stress, y.stress, 0, 1e-12, /*equal_nan=*/true))
            << x.stress << y.stress;
    }
  }
}

}  // namespace
}  // namespace uma
