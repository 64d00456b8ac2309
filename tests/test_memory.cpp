// Recomputed, chunked edge work (memory_plan.h, nn/edge_chunks.h) against the
// stored path, and the memory plan that picks between them.
#include <gtest/gtest.h>

#include <algorithm>

#include "memory_plan.h"
#include "nn/edge_chunks.h"
#include "measure/storage_meter.h"
#include "test_util.h"

namespace uma::test {
namespace {

double rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1e-300, b.abs().max().item<double>());
}

// n x n x n conventional fcc Cu cells (4 n^3 atoms), rattled.
Atoms copper_supercell(int64_t n) {
  const Atoms unit = copper_cell();
  const double a = unit.cell[0][0];
  std::vector<double> pos;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < n; ++k)
        for (int64_t atom = 0; atom < 4; ++atom)
          for (int c = 0; c < 3; ++c)
            pos.push_back(unit.positions[atom][c].item<double>() +
                          a * (c == 0 ? i : (c == 1 ? j : k)));
  const double L = a * static_cast<double>(n);
  return atoms_from(std::vector<int64_t>(pos.size() / 3, 29), pos,
                    {{{L, 0, 0}, {0, L, 0}, {0, 0, L}}}, {true, true, true}, "omat");
}

Engine fp64_engine_with(int64_t chunk, bool merge, const nlohmann::json& config) {
  EngineOptions opts;
  opts.device = test_device();
  opts.dtype = torch::kFloat64;
  opts.merge_mole = merge;
  opts.recompute_chunk = chunk;
  return Engine(random_model(config), opts);
}

// Every output of the recomputed path equals the stored path's to fp64
// rounding: one chunk holding every edge, chunks that cut through systems,
// a batch of different systems with the full expert mixture (per-system
// weights inside a chunk), fully and partially periodic cells and a molecule.
TEST(Recompute, EqualsTheStoredPath) {
  const auto config = small_config(4, /*dataset_head=*/true, /*charge_balance=*/true);
  Atoms slab = copper_cell();
  slab.pbc = {true, true, false};
  const std::vector<std::vector<Atoms>> cases{{copper_cell()},
                                              {triclinic_cell()},
                                              {molecule()},
                                              {slab},
                                              {copper_cell(), molecule(), triclinic_cell(), slab}};
  for (bool merge : {true, false}) {
    auto stored = fp64_engine_with(0, merge, config);
    for (int64_t chunk : {int64_t{1} << 40, int64_t{37}, int64_t{5}}) {
      auto recomputed = fp64_engine_with(chunk, merge, config);
      for (const auto& systems : cases) {
        if (systems.size() > 1 && merge) continue;  // a mixed batch is never merged
        const std::string where = "chunk " + std::to_string(chunk) + ", systems " +
                                  std::to_string(systems.size()) + ", merged " +
                                  std::to_string(merge);
        auto s = evaluate_on_host(stored, systems, Request::all());
        auto r = evaluate_on_host(recomputed, systems, Request::all());
        ASSERT_TRUE(recomputed.stats().memory_plan.recompute) << where;
        ASSERT_FALSE(stored.stats().memory_plan.recompute) << where;
        for (size_t b = 0; b < systems.size(); ++b)
          EXPECT_NEAR(r.energy[b], s.energy[b], 1e-12 * std::abs(s.energy[b])) << where;
        EXPECT_LT(rel_diff(r.forces, s.forces), 1e-11) << where;
        EXPECT_LT(rel_diff(r.atom_energy, s.atom_energy), 1e-11) << where;
        EXPECT_LT(rel_diff(r.virial, s.virial), 1e-11) << where;
        EXPECT_LT(rel_diff(r.atom_virial, s.atom_virial), 1e-11) << where;
        // The molecule's stress is NaN in both (no cell).
        EXPECT_TRUE(torch::allclose(r.stress, s.stress, 1e-11, 1e-14, /*equal_nan=*/true)) << where;
      }
    }
  }
}

// The budget decides: a generous one keeps the stored path, a small one
// recomputes with the chunk that fits, an impossible one is refused.
TEST(MemoryPlan, PicksStoredRecomputedOrRefuses) {
  const auto model = memory_model(parse_model_config(small_config().dump()).backbone,
                                  torch::kFloat32, nn::lean_cpu_edges());
  const int64_t nodes = 1000, edges = 80000;
  const double fixed = model.per_node * nodes + model.per_edge_graph * edges;
  const double stored = fixed + model.per_edge_stored * edges;
  auto plan = plan_memory(model, nodes, edges, stored * 1.01);
  EXPECT_FALSE(plan.recompute);
  EXPECT_DOUBLE_EQ(plan.predicted_bytes, stored);
  const double budget = fixed + 1000.5 * model.per_edge_chunk;  // room for 1000 edges
  plan = plan_memory(model, nodes, edges, budget);
  EXPECT_TRUE(plan.recompute);
  EXPECT_EQ(plan.chunk_edges, 1000);  // the largest chunk that fits
  EXPECT_LE(plan.predicted_bytes, budget);
  // Room to spare: the chunk stops at the cap.
  plan = plan_memory(model, nodes, edges, stored * 0.999);
  EXPECT_TRUE(plan.recompute);
  EXPECT_EQ(plan.chunk_edges, kMaxChunkEdges);
  EXPECT_NE(plan.describe().find("chunks of"), std::string::npos);
  expect_error([&] { plan_memory(model, nodes, edges, fixed); }, "raise the budget");
  EXPECT_FALSE(plan_memory(model, nodes, edges, 1.0, /*forced_chunk=*/0).recompute);
  EXPECT_EQ(plan_memory(model, nodes, edges, 1e30, /*forced_chunk=*/100).chunk_edges, 100);
  // UMA-S in fp32 keeps tens of kilobytes per edge on the stored path.
  const auto full = memory_model(BackboneConfig{}, torch::kFloat32, nn::lean_cpu_edges());
  EXPECT_GT(full.per_edge_stored, 10 * full.per_edge_chunk / 4);
}

// The engine plans once per atom count and edge capacity, through the budget
// set in its options.
TEST(MemoryPlan, EngineFollowsItsBudget) {
  EngineOptions opts;
  opts.device = test_device();
  opts.memory_budget = 1e12;
  Engine roomy(random_model(small_config()), opts);
  auto a = evaluate_on_host(roomy, {copper_cell()}, Request::all());
  EXPECT_FALSE(roomy.stats().memory_plan.recompute);
  opts.memory_budget =
      0.9 * roomy.stats().memory_plan.predicted_bytes;  // the stored path no longer fits
  Engine tight(random_model(small_config()), opts);
  auto b = evaluate_on_host(tight, {copper_cell()}, Request::all());
  EXPECT_TRUE(tight.stats().memory_plan.recompute);
  EXPECT_LT(rel_diff(b.forces, a.forces), 1e-5);  // fp32
  const auto plans = tight.stats().memory_plans;
  evaluate_on_host(tight, {copper_cell(0.05, 9)},
                   Request::all());  // same atoms and capacity: no new plan
  EXPECT_EQ(tight.stats().memory_plans, plans);
  opts.memory_budget = 1e3;
  Engine hopeless(random_model(small_config()), opts);
  expect_error([&] { evaluate_on_host(hopeless, {copper_cell()}, Request::all()); },
               "memory budget");
}

// Measured, not predicted: on the CPU, the tensor storage an evaluation
// allocates (peak minus what was live before it, graph build included) stays
// within the budget when the plan recomputes, and is several times smaller
// than the stored path's; the stored path's prediction is an upper bound
// that is not loose by more than 1.7x.  256 atoms, 11,305 edge slots, fp64.
TEST(MemoryPlan, MeasuredPeaksFollowTheBudget) {
  const auto config = small_config();
  const std::vector<Atoms> system{copper_supercell(4)};
  EngineOptions opts;
  opts.device = torch::kCPU;  // the meter sees CPU storage
  opts.dtype = torch::kFloat64;
  opts.memory_budget = 1e12;
  CpuStorageMeter meter;
  // The larger of the first call (it sizes the graph with a probe build and
  // plans) and a settled one.
  auto measured_peak = [&](Engine& engine) {
    double peak = 0;
    for (int call = 0; call < 2; ++call) {
      meter.reset();
      const int64_t before = meter.live();
      evaluate_on_host(engine, system, Request::all());
      peak = std::max(peak, static_cast<double>(meter.peak() - before));
    }
    return peak;
  };
  Engine stored(random_model(config), opts);
  const double stored_peak = measured_peak(stored);
  ASSERT_FALSE(stored.stats().memory_plan.recompute);
  const double stored_predicted = stored.stats().memory_plan.predicted_bytes;

  opts.memory_budget = stored_predicted / 10;
  Engine tight(random_model(config), opts);
  const double tight_peak = measured_peak(tight);
  ASSERT_TRUE(tight.stats().memory_plan.recompute);
  const double tight_predicted = tight.stats().memory_plan.predicted_bytes;
  std::printf(
      "stored: measured %.1f MB, predicted %.1f MB; recomputed (chunks of %lld): measured %.1f MB, "
      "predicted %.1f MB, budget %.1f MB\n",
      stored_peak * 1e-6, stored_predicted * 1e-6,
      static_cast<long long>(tight.stats().memory_plan.chunk_edges), tight_peak * 1e-6,
      tight_predicted * 1e-6, opts.memory_budget * 1e-6);
  EXPECT_LE(tight_peak, opts.memory_budget);
  EXPECT_LT(tight_peak, stored_peak / 4);
  EXPECT_LE(stored_peak, stored_predicted);
  EXPECT_GT(stored_peak, stored_predicted / 1.7);
}

// Recomputed edge work has first derivatives only; a second backward (what
// force training would need) is refused, not silently wrong.
TEST(Recompute, RefusesSecondDerivatives) {
  auto x = torch::rand({3, 2}, torch::kFloat64).requires_grad_(true);
  auto vec = torch::rand({4, 3}, torch::kFloat64).requires_grad_(true);
  auto tgt = torch::tensor({0, 0, 1, 2}, torch::kLong);
  auto out = nn::chunked_edge_sum(
      x, vec, 4, 3, {3, 1, 2},
      [&](const torch::Tensor& h, const torch::Tensor& v, int64_t begin, int64_t end) {
        auto chunk_tgt = tgt.narrow(0, begin, end - begin);
        auto rows = h.index_select(0, chunk_tgt);
        return torch::zeros({3, 1, 2}, h.options())
            .index_add(0, chunk_tgt, (rows * v.pow(2).sum(1, true)).unsqueeze(1));
      });
  auto once = torch::autograd::grad({out.sum()}, {vec}, {}, /*retain_graph=*/true)[0];
  // d/dv_e sum(h[tgt_e] |v_e|^2) = 2 v_e sum(h[tgt_e])
  auto expected = 2 * vec.detach() * x.detach().index_select(0, tgt).sum(1, true);
  EXPECT_TRUE(torch::allclose(once, expected, 1e-14, 1e-14));
  expect_error([&] { torch::autograd::grad({out.sum()}, {vec}, {}, true, /*create_graph=*/true); },
               "no second derivative");
}

}  // namespace
}  // namespace uma::test
