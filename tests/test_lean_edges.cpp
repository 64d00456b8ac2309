// The lean edge operators (edges/lean_edges.h) against the LibTorch composition
// they replace, in float64: values, first derivatives and second derivatives
// (the backward of the backward, as a training step runs it) with respect to
// every input (through edge_wigner for the rotations, and a free
// block-diagonal part), on a graph whose segments cover more edges than the
// operator is given (layer pruning), with nodes that have no edges.  Third
// derivatives are refused.  And the engine's two edge backends, which agree.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "edges/edge_rotation.h"
#include "edges/gate_activation.h"
#include "engine/engine.h"
#include "edges/kernels/layout.h"
#include "edges/lean_edges.h"
#include "edges/launch/launch.h"
#include "model/nn/block.h"
#include "model/nn/so3.h"
#include "test_util.h"

namespace uma::edges {
namespace {

using torch::autograd::grad;

constexpr int64_t kNodes = 7, kGraphEdges = 23, kEdges = 19, kChannels = 5;

// Every tensor on the test device ($UMA_TEST_DEVICE: the CPU's launchers, or
// CUDA's where the engine was built with them), drawn on the CPU.
torch::Tensor on_device(const torch::Tensor& t) { return t.to(test::test_device()); }

torch::Tensor device_leaf(std::vector<int64_t> shape, int seed) {
  torch::manual_seed(seed);
  return on_device(torch::randn(shape, torch::kFloat64)).requires_grad_(true);
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
  g.src = on_device(torch::randint(0, 5, {kGraphEdges}, torch::kLong));
  g.tgt = on_device(torch::randint(0, 5, {kGraphEdges}, torch::kLong));
  g.tgt.narrow(0, kEdges, kGraphEdges - kEdges).fill_(5);
  g.by_source = segments_by_node(g.src, kNodes);
  g.by_target = segments_by_node(g.tgt, kNodes);
  g.src = g.src.narrow(0, 0, kEdges);
  g.tgt = g.tgt.narrow(0, 0, kEdges);
  return g;
}

// Rotations: the Wigner matrices of the edge vectors plus a free part in the
// l-blocks (1 + 3x3 + 5x5 in the L layout), so that the derivatives with
// respect to D are tested in every direction the operators read.
torch::Tensor rotation_of(const torch::Tensor& vec, const torch::Tensor& free) {
  auto mask = torch::zeros({9, 9}, vec.options().requires_grad(false));
  mask.narrow(0, 0, 1).narrow(1, 0, 1).fill_(1);
  mask.narrow(0, 1, 3).narrow(1, 1, 3).fill_(1);
  mask.narrow(0, 4, 5).narrow(1, 4, 5).fill_(1);
  return edge_wigner(vec) + 0.3 * free * mask;
}

// The message pieces as block.cpp's LibTorch path makes them.
MPieces rotate_in_reference(const torch::Tensor& D, const torch::Tensor& x, const Graph& g,
                            const torch::Tensor& w) {
  const int64_t E = D.size(0), C2 = 2 * x.size(2);
  auto wigner = to_m_layout(D, 1);
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
      to_m_layout(D.transpose(1, 2), 2) * env.view({-1, 1, 1});
  auto messages = y[1].defined() ? torch::bmm(inv, torch::cat({y[0], y[1], y[2]}, 1))
                                 : torch::bmm(inv.narrow(2, 0, 3), y[0]);
  return torch::zeros({kNodes, 9, y[0].size(2)}, y[0].options()).index_add(0, g.tgt, messages);
}

torch::Tensor fixed_weights(const torch::Tensor& like, double frequency) {
  return torch::sin(torch::arange(like.numel(), like.options().requires_grad(false)) * frequency)
      .view(like.sizes());
}

// Values, first and second derivatives of the outputs with respect to the
// inputs.  L1 = sum_i <w_i, out_i> + <u_i, out_i^2> / 2 (its gradient
// depends on the inputs, so the double backward's gradient with respect to
// the incoming gradient counts); g_j = dL1/dinput_j with create_graph;
// L2 = sum_j <v_j, g_j> + <g_j, g_j> / 20; returns the outputs, the g_j and dL2/dinput_j.
std::vector<torch::Tensor> derivatives(const std::vector<torch::Tensor>& outputs,
                                       const std::vector<torch::Tensor>& inputs) {
  auto first_loss = torch::zeros({}, outputs[0].options().requires_grad(false));
  std::vector<torch::Tensor> all;
  for (size_t i = 0; i < outputs.size(); ++i) {
    first_loss = first_loss + (outputs[i] * fixed_weights(outputs[i], 0.37 + 0.1 * i)).sum() +
                 (outputs[i].pow(2) * fixed_weights(outputs[i], 0.23 + 0.1 * i)).sum() / 2;
    all.push_back(outputs[i].detach());
  }
  auto first = grad({first_loss}, inputs, {}, /*retain_graph=*/true, /*create_graph=*/true);
  auto second_loss = torch::zeros({}, outputs[0].options().requires_grad(false));
  for (size_t j = 0; j < first.size(); ++j) {
    second_loss = second_loss + (first[j] * fixed_weights(first[j], 0.61 + 0.1 * j)).sum() +
                  first[j].pow(2).sum() / 20;
    all.push_back(first[j].detach());
  }
  for (auto& d : grad({second_loss}, inputs)) all.push_back(d);
  return all;
}

void expect_lean_matches(const std::vector<torch::Tensor>& lean,
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
  auto vec = device_leaf({kEdges, 3}, 1), free = device_leaf({kEdges, 9, 9}, 15),
       x = device_leaf({kNodes, 9, kChannels}, 2), w = device_leaf({kEdges, 12 * kChannels}, 3);
  auto lean = [&] {
    auto p =
        rotate_to_edge_frame(rotation_of(vec, free), x, g.src, g.tgt, w, g.by_source, g.by_target);
    return derivatives({p[0], p[1], p[2]}, {vec, free, x, w});
  };
  auto reference = [&] {
    auto p = rotate_in_reference(rotation_of(vec, free), x, g, w);
    return derivatives({p[0], p[1], p[2]}, {vec, free, x, w});
  };
  expect_lean_matches(lean(), reference());
}

// With two threads over many edges, the node gradient is summed by each
// thread over its own edges (few nodes) or per node (the threads' sums would
// be too large: 60,000 nodes), with nodes that are their own neighbours.
TEST(LeanEdges, RotateToEdgeFrameGradientOverThreads) {
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  for (int64_t nodes : {int64_t{9}, int64_t{60000}}) {
    SCOPED_TRACE(std::to_string(nodes) + " nodes");
    const int64_t E = 700, C = 4;
    torch::manual_seed(31);
    // edges among the first 9 nodes (a third of them loops), the rest without edges
    auto src = torch::randint(0, 9, {E}, torch::kLong);
    auto tgt = on_device(
        torch::where(torch::arange(E) % 3 == 0, src, torch::randint(0, 9, {E}, torch::kLong)));
    src = on_device(src);
    const Graph g{src, tgt, segments_by_node(src, nodes), segments_by_node(tgt, nodes)};
    auto vec = device_leaf({E, 3}, 32), x = device_leaf({nodes, 9, C}, 33),
         w = device_leaf({E, 12 * C}, 34);
    auto first = [&](const MPieces& p) {
      auto loss = torch::zeros({}, p[0].options().requires_grad(false));
      for (int i = 0; i < 3; ++i) loss = loss + (p[i] * fixed_weights(p[i], 0.41 + 0.1 * i)).sum();
      return grad({loss}, {vec, x, w});
    };
    const auto lean =
        first(rotate_to_edge_frame(edge_wigner(vec), x, src, tgt, w, g.by_source, g.by_target));
    const auto reference = first(rotate_in_reference(edge_wigner(vec), x, g, w));
    expect_lean_matches(lean, reference);
  }
  at::set_num_threads(threads);
}

TEST(LeanEdges, GateMatchesGateActivation) {
  const int64_t H = kChannels;
  // y0 as the first convolution leaves it: a view whose rows are longer than 5H
  auto wide = device_leaf({kEdges, 7 * H}, 4), y1 = device_leaf({kEdges, 4, H}, 5),
       y2 = device_leaf({kEdges, 2, H}, 6);
  auto y0 = [&] { return wide.narrow(1, H, 5 * H); };
  auto reference = gate_reference(y0(), y1, y2);
  const auto expected = derivatives({reference[0], reference[1], reference[2]}, {wide, y1, y2});
  for (const auto sigmoids : {GateSigmoids::kKept, GateSigmoids::kRecomputed}) {
    SCOPED_TRACE(sigmoids == GateSigmoids::kKept ? "sigmoids kept" : "sigmoids recomputed");
    auto lean = gate_m_pieces(y0(), y1, y2, sigmoids);
    expect_lean_matches(derivatives({lean[0], lean[1], lean[2]}, {wide, y1, y2}), expected);
  }
}

TEST(LeanEdges, RotateToNodesSummedMatchesBmmAndIndexAdd) {
  const auto g = graph();
  auto vec = device_leaf({kEdges, 3}, 7), free = device_leaf({kEdges, 9, 9}, 16),
       env = device_leaf({kEdges}, 8);
  auto y0 = device_leaf({kEdges, 3, kChannels}, 9), y1 = device_leaf({kEdges, 4, kChannels}, 10),
       y2 = device_leaf({kEdges, 2, kChannels}, 11);
  for (bool all_rows : {true, false}) {
    SCOPED_TRACE(all_rows ? "9 rows" : "m = 0 rows only (edge degree)");
    MPieces y{y0, all_rows ? y1 : torch::Tensor(), all_rows ? y2 : torch::Tensor()};
    std::vector<torch::Tensor> inputs{vec, free, env, y0};
    if (all_rows) inputs.insert(inputs.end(), {y1, y2});
    auto lean = derivatives(
        {rotate_to_nodes_summed(rotation_of(vec, free), env, y, g.tgt, g.by_target, kNodes)},
        inputs);
    auto reference = derivatives({rotate_out_reference(rotation_of(vec, free), env, y, g)}, inputs);
    expect_lean_matches(lean, reference);
    // node 6 has no edges, node 5 only beyond the operator's edges
    EXPECT_EQ(lean[0].narrow(0, 5, 2).abs().max().item<double>(), 0.0);
  }
}

// The three operators in a row, as a block runs them (with the radial
// weights and the envelope from the edge vectors), to the second order.
TEST(LeanEdges, ChainedOperatorsMatchTheComposition) {
  const auto g = graph();
  const int64_t C = kChannels, H = kChannels;
  auto vec = device_leaf({kEdges, 3}, 17), x = device_leaf({kNodes, 9, C}, 18);
  auto mix1 = device_leaf({2 * C, 5 * H}, 19), mix2 = device_leaf({H, C}, 20),
       radial = device_leaf({3, 12 * C}, 21);
  auto run = [&](bool lean, GateSigmoids sigmoids) {
    auto D = edge_wigner(vec);
    auto dist = vec.norm(2, 1, /*keepdim=*/true);
    auto w = torch::tanh(torch::cat({dist, dist.pow(2), torch::ones_like(dist)}, 1).mm(radial));
    auto env = torch::exp(-dist.squeeze(1));
    MPieces p = lean ? rotate_to_edge_frame(D, x, g.src, g.tgt, w, g.by_source, g.by_target)
                     : rotate_in_reference(D, x, g, w);
    // a stand-in for the first convolution: y0 from the m = 0 rows, y1 and y2 mixed per row
    auto y0 = p[0].sum(1).mm(mix1);
    auto y1 = p[1].matmul(mix1.narrow(1, 0, H));
    auto y2 = p[2].matmul(mix1.narrow(1, H, H));
    MPieces q = lean ? gate_m_pieces(y0, y1, y2, sigmoids) : gate_reference(y0, y1, y2);
    MPieces z{q[0].matmul(mix2), q[1].matmul(mix2), q[2].matmul(mix2)};
    auto out = lean ? rotate_to_nodes_summed(D, env, z, g.tgt, g.by_target, kNodes)
                    : rotate_out_reference(D, env, z, g);
    return derivatives({out}, {vec, x, mix1, mix2, radial});
  };
  const auto reference = run(false, GateSigmoids::kKept);
  expect_lean_matches(run(true, GateSigmoids::kKept), reference);
  expect_lean_matches(run(true, GateSigmoids::kRecomputed), reference);
}

// Each operator, alone: a second derivative is computed, one that could be
// differentiated again is refused.
TEST(LeanEdges, RefuseThirdDerivatives) {
  const auto g = graph();
  auto vec = device_leaf({kEdges, 3}, 12), x = device_leaf({kNodes, 9, kChannels}, 13),
       w = device_leaf({kEdges, 12 * kChannels}, 14);
  auto y0 = device_leaf({kEdges, 5 * kChannels}, 22), y1 = device_leaf({kEdges, 4, kChannels}, 23),
       y2 = device_leaf({kEdges, 2, kChannels}, 24);
  auto cubed = [](const std::vector<torch::Tensor>& out) {
    auto sum = torch::zeros({}, out[0].options().requires_grad(false));
    for (const auto& t : out) sum = sum + t.pow(3).sum();
    return sum;
  };
  const std::vector<std::pair<const char*, std::function<torch::Tensor()>>> ops = {
      {"rotate_to_edge_frame",
       [&] {
         auto p =
             rotate_to_edge_frame(edge_wigner(vec), x, g.src, g.tgt, w, g.by_source, g.by_target);
         return cubed({p[0], p[1], p[2]});
       }},
      {"gate_m_pieces",
       [&] {
         auto q = gate_m_pieces(y0, y1, y2, GateSigmoids::kRecomputed);
         return cubed({q[0], q[1], q[2]});
       }},
      {"rotate_to_nodes_summed", [&] {
         MPieces y{y1.narrow(1, 0, 3), y1, y2};
         return cubed({rotate_to_nodes_summed(edge_wigner(vec), w.narrow(1, 0, 1).squeeze(1), y,
                                              g.tgt, g.by_target, kNodes)});
       }}};
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    const std::vector<torch::Tensor> inputs{vec, x, w, y0, y1, y2};
    auto first = grad({op()}, inputs, {}, /*retain_graph=*/true, /*create_graph=*/true,
                      /*allow_unused=*/true);
    auto twice = torch::zeros({}, x.options().requires_grad(false));
    for (const auto& d : first)
      if (d.defined()) twice = twice + d.pow(3).sum();
    EXPECT_NO_THROW(grad({twice}, inputs, {}, /*retain_graph=*/true, false, true));
    test::expect_error([&] { grad({twice}, inputs, {}, /*retain_graph=*/true, true, true); },
                       std::string(name) + " has no third derivative");
  }
}

}  // namespace
}  // namespace uma::edges

namespace uma {
namespace {

// The engine's two edge backends (edges/edge_backend.h) through the interface
// the pair style calls: EngineOptions::edge_ops picks one when the engine is
// made, and in float64 both give the same energies, forces and stress on
// periodic and molecular systems (stored and recomputed in chunks).
TEST(EdgeBackends, ChosenOnceAndAgreeInFloat64) {
  for (int64_t chunk : {int64_t{0}, int64_t{64}}) {
    EngineOptions lean_options, reference_options;
    lean_options.dtype = reference_options.dtype = torch::kFloat64;
    lean_options.device = reference_options.device = test::test_device();
    lean_options.recompute_chunk = reference_options.recompute_chunk = chunk;
    reference_options.edge_ops = EngineOptions::EdgeOps::kReference;
    Engine lean(test::random_model(test::small_config()), lean_options);
    Engine reference(test::random_model(test::small_config()), reference_options);
    EXPECT_EQ(lean.stats().edge_backend,
              &edges::edge_backend_for(edges::EdgeOps::kLean, test::test_device()));
    EXPECT_STREQ(reference.stats().edge_backend->name(), "reference");
    EXPECT_TRUE(lean.stats().edge_backend->second_derivatives());
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
    // Several systems in one call: each block of edge slots keeps its
    // padding, on the CPU too (the lean segments leave it out).
    const std::vector<Atoms> batch{test::copper_cell(0.1), test::molecule(),
                                   test::triclinic_cell()};
    const auto x = evaluate_on_host(lean, batch), y = evaluate_on_host(reference, batch);
    SCOPED_TRACE("chunk " + std::to_string(chunk) + ", three systems in one call");
    for (size_t b = 0; b < batch.size(); ++b)
      EXPECT_NEAR(x.energy[b], y.energy[b], 1e-12 * std::max(1.0, std::abs(y.energy[b])));
    EXPECT_LT((x.forces - y.forces).abs().max().item<double>(), 1e-12);
  }
}

// The lean frame's segments by source and by target hold every edge found
// and no padding slot: a block's padding all points at its last atom, and on
// CUDA one thread walks a node's segment serially.
TEST(EdgeBackends, LeanSegmentsLeaveThePaddingOut) {
  constexpr int64_t N = 6, E = 40;
  torch::manual_seed(3);
  edges::EdgeFrame frame;
  frame.src = torch::randint(0, N, {E}, torch::kLong);
  frame.tgt = torch::randint(0, N, {E}, torch::kLong);
  frame.valid = torch::rand({E}) < 0.7;
  frame.src.masked_fill_(frame.valid.logical_not(), N - 1);  // padding, as the graph lays it out
  frame.tgt.masked_fill_(frame.valid.logical_not(), N - 1);
  const auto D = torch::randn({E, 9, 9}, torch::kFloat64), envelope = torch::rand({E});
  for (const edges::EdgeBackend* lean : {&edges::lean_cpu_edges(), &edges::lean_cuda_edges()}) {
    edges::EdgeFrame f = frame;
    lean->prepare(f, D, envelope, N);
    for (const auto& [segments, node] : {std::pair{f.by_source, f.src}, {f.by_target, f.tgt}}) {
      const auto found = segments.order.narrow(0, 0, segments.offsets[N].item<int64_t>());
      EXPECT_TRUE(f.valid.index_select(0, found).all().item<bool>());
      const auto counts =
          torch::zeros({N}, torch::kLong)
              .index_add(0, node.masked_select(f.valid),
                         torch::ones({f.valid.sum().item<int64_t>()}, torch::kLong));
      EXPECT_TRUE(segments.offsets.diff().equal(counts))
          << segments.offsets << counts << " (the segments' lengths, the edges found per node)";
    }
  }
}

// `edge_ops lean` picks the fused operators on the CPU, and on CUDA only where
// the engine has their CUDA launchers (there over the graph's padding too:
// the count of edges found stays on the device); the composition otherwise.
TEST(EdgeBackends, LeanOnCudaOnlyWithItsLaunchers) {
  using edges::EdgeOps;
  const torch::Device cpu(torch::kCPU), cuda(torch::kCUDA, 0);
  EXPECT_EQ(&edges::edge_backend_for(EdgeOps::kLean, cpu), &edges::lean_cpu_edges());
  EXPECT_TRUE(edges::lean_cpu_edges().skips_padding());
  EXPECT_EQ(&edges::edge_backend_for(EdgeOps::kReference, cpu), &edges::reference_edges());
  EXPECT_EQ(&edges::edge_backend_for(EdgeOps::kReference, cuda), &edges::reference_edges());
  if (edges::launch::cuda_launches_built()) {
    EXPECT_EQ(&edges::edge_backend_for(EdgeOps::kLean, cuda), &edges::lean_cuda_edges());
    EXPECT_STREQ(edges::lean_cuda_edges().name(), "lean");
    EXPECT_FALSE(edges::lean_cuda_edges().skips_padding());
  } else {
    EXPECT_EQ(&edges::edge_backend_for(EdgeOps::kLean, cuda), &edges::reference_edges());
    // and the operators themselves refuse CUDA tensors, naming the way out
    test::expect_error([&] { edges::launch::require_lean_kernels(cuda); },
                       "need an engine built with nvcc");
  }
}

}  // namespace
}  // namespace uma

// The layout's tables (edges/kernels/layout.h) and their inverses, which only
// the CUDA launchers use, agree: every M row once, in ascending order, with
// its degree and its radial row.
TEST(LeanLayout, InversesAgreeWithTheTables) {
  using namespace uma::edges::kernels;
  std::vector<int> by_degree, by_radial;
  for (int l = 0; l < 3; ++l)
    for (int i = 0; i < rows_of_degree(l); ++i) {
      const int j = row_of_degree(l, i);
      EXPECT_EQ(degree(j), l) << "row " << j;
      EXPECT_EQ(block_start(l_row(j)), l * l) << "row " << j;
      if (i > 0) EXPECT_GT(j, row_of_degree(l, i - 1));
      by_degree.push_back(j);
    }
  for (int rr = 0; rr < 6; ++rr)
    for (int i = 0; i < rows_of_radial(rr); ++i) {
      const int j = row_of_radial(rr, i);
      EXPECT_EQ(radial_row(j), rr) << "row " << j;
      EXPECT_EQ(radial_first(j), i == 0) << "row " << j;
      by_radial.push_back(j);
    }
  std::sort(by_degree.begin(), by_degree.end());
  std::sort(by_radial.begin(), by_radial.end());
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(by_degree, all);
  EXPECT_EQ(by_radial, all);
}
