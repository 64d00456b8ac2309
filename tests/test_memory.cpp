// Recomputed, chunked edge work (memory_plan.h, edges/edge_chunks.h) against the
// stored path, and the memory plan that picks between them.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/memory_plan.h"
#include "edges/edge_chunks.h"
#include "measure/storage_meter.h"
#include "test_util.h"

namespace uma::test {
namespace {

double rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1e-300, b.abs().max().item<double>());
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
  const auto model =
      memory_model(parse_model_config(small_config().dump()).backbone, torch::kFloat32,
                   edges::lean_cpu_edges(), /*weights_trained=*/false);
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
  // UMA-S in fp32 keeps tens of kilobytes per edge on the stored path, over
  // twice a recomputed chunk's; trained weights also keep their layers' inputs
  // and the radial MLPs' layer norm outputs (unfused there).
  const BackboneConfig uma_s;
  const auto full = memory_model(uma_s, torch::kFloat32, edges::lean_cpu_edges(), false);
  EXPECT_GT(full.per_edge_stored, 50e3);
  EXPECT_GT(full.per_edge_stored, 2 * full.per_edge_chunk);
  const auto trained = memory_model(uma_s, torch::kFloat32, edges::lean_cpu_edges(), true);
  const double C = uma_s.sphere_channels, H = uma_s.hidden_channels, Ec = uma_s.edge_channels;
  EXPECT_DOUBLE_EQ(trained.per_edge_stored - full.per_edge_stored,
                   4 * (uma_s.num_layers * (18 * C + 9 * H + 4 * Ec) + 4 * Ec));
  EXPECT_DOUBLE_EQ(trained.per_edge_chunk - full.per_edge_chunk, 4 * (18 * C + 9 * H + 4 * Ec));
  // On a GPU the gate's sigmoids (3H per edge and block) are recomputed at
  // inference, but a training step's first backward keeps them.
  const auto gpu = memory_model(uma_s, torch::kFloat32, edges::lean_cuda_edges(), false);
  const auto gpu_trained = memory_model(uma_s, torch::kFloat32, edges::lean_cuda_edges(), true);
  EXPECT_DOUBLE_EQ(full.per_edge_stored - gpu.per_edge_stored, 4 * uma_s.num_layers * 3 * H);
  EXPECT_DOUBLE_EQ(full.per_edge_chunk - gpu.per_edge_chunk, 4 * 3 * H);
  EXPECT_DOUBLE_EQ(gpu_trained.per_edge_stored, trained.per_edge_stored);
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

// A budget above what the device has available (`memory 120` on an 80 GB
// card) is cut to it, and the plan's line says so: a plan trusting it would
// choose paths and chunks for memory that is not there.
TEST(MemoryPlan, BudgetNeverExceedsWhatTheDeviceHas) {
  const auto card = [] { return 80e9; };
  EXPECT_DOUBLE_EQ(evaluation_budget(120e9, card, 1), 80e9);
  EXPECT_DOUBLE_EQ(evaluation_budget(120e9, card, 4), 20e9);
  EXPECT_DOUBLE_EQ(evaluation_budget(10e9, card, 4), 10e9);
  EXPECT_DOUBLE_EQ(evaluation_budget(0, card, 2), 32e9);
  // a device that cannot be asked: a budget asked for stands, none is an error
  const auto mute = []() -> double { throw Error("cannot query"); };
  EXPECT_DOUBLE_EQ(evaluation_budget(10e9, mute, 1), 10e9);
  expect_error([&] { evaluation_budget(0, mute, 1); }, "cannot query");
  EngineOptions opts;
  opts.device = test_device();
  opts.memory_budget = 1e18;
  const double before = available_memory(opts.device);  // it moves with other processes
  Engine engine(random_model(small_config()), opts);
  EXPECT_LE(engine.stats().memory_budget, 1.5 * before);
  EXPECT_GT(engine.stats().memory_budget, 0);
  evaluate_on_host(engine, {copper_cell()}, Request::all());
  const std::string line = engine.stats().memory_plan.describe();
  EXPECT_NE(line.find("(1000000000.00 GB asked for: more than available to this process)"),
            std::string::npos)
      << line;
  opts.memory_budget = 1e6;
  Engine modest(random_model(small_config()), opts);
  EXPECT_DOUBLE_EQ(modest.stats().memory_budget, 1e6);
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
  EXPECT_GT(stored_peak, stored_predicted / 1.25);
}

// At UMA-S's widths (4 blocks, C = H = edge channels = 128, 64 basis
// functions; no experts), fp32, inference: the predicted peak is within 10%
// of the tensor storage the evaluation allocates at its peak on the CPU, on
// the stored path for both edge backends (32 Cu atoms, 2,636 edges) and on the
// recomputed path (256 atoms, 20,982 edges in chunks of 256: mostly the
// per-atom term).  The GPU check compares it with LibTorch's CUDA peak
// (doc/benchmarks.md).
TEST(MemoryPlan, PredictedPeakWithinTenPercentAtUmaSWidths) {
  auto config = small_config(/*experts=*/0);
  for (const char* width : {"sphere_channels", "hidden_channels", "edge_channels"})
    config["backbone"][width] = 128;
  config["backbone"]["num_distance_basis"] = 64;
  config["backbone"]["num_layers"] = 4;
  config["backbone"]["cutoff"] = 6.0;
  struct Case {
    edges::EdgeOps ops;
    int64_t chunk, cells;
  };
  for (const Case c : {Case{edges::EdgeOps::kLean, 0, 2}, Case{edges::EdgeOps::kReference, 0, 2},
                       Case{edges::EdgeOps::kLean, 256, 4}}) {
    EngineOptions opts;
    opts.device = torch::kCPU;  // the meter sees CPU storage
    opts.dtype = torch::kFloat32;
    opts.memory_budget = 1e12;
    opts.edge_ops = c.ops;
    opts.recompute_chunk = c.chunk;
    Engine engine(random_model(config), opts);
    CpuStorageMeter meter;
    double peak = 0;
    for (int call = 0; call < 2; ++call) {  // the first call sizes the graph
      meter.reset();
      const int64_t before = meter.live();
      evaluate_on_host(engine, {copper_supercell(c.cells)}, Request::all());
      peak = std::max(peak, static_cast<double>(meter.peak() - before));
    }
    const auto& plan = engine.stats().memory_plan;
    ASSERT_EQ(plan.recompute, c.chunk > 0);
    const double ratio = plan.predicted_bytes / peak;
    const std::string what = std::string(engine.stats().edge_backend->name()) +
                             (plan.recompute ? ", recomputed" : ", stored");
    std::printf("%s: measured %.1f MB, predicted %.1f MB (%.3fx)\n", what.c_str(), peak * 1e-6,
                plan.predicted_bytes * 1e-6, ratio);
    EXPECT_GT(ratio, 0.9) << what;
    EXPECT_LT(ratio, 1.1) << what;
  }
}

// The chunked sum's first and second derivatives equal those of the same
// work done in one piece, for every input a training step differentiates:
// the node features (themselves a function of a parameter), the edge vectors,
// the parameters it reads, a mixing coefficient that is no leaf (and depends
// on a parameter the work reads too), and the
// incoming gradient (through a head parameter).  Chunks of 3 over 7 edges,
// the last row outside `edges`.  A third derivative is refused.
TEST(Recompute, SecondDerivativesEqualTheWholeSums) {
  torch::manual_seed(7);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(test_device());
  auto q = torch::rand({4, 2}, f64).requires_grad_(true);        // -> node features
  auto w = torch::rand({2}, f64).requires_grad_(true);           // read by the work
  auto p = torch::rand({1}, f64).requires_grad_(true);           // -> coefficient c
  auto head = torch::rand({4, 1, 2}, f64).requires_grad_(true);  // -> incoming gradient
  auto pos = torch::rand({8, 3}, f64).requires_grad_(true);
  auto src = torch::tensor({0, 1, 1, 2, 3, 3, 0}, torch::kLong).to(test_device());
  auto tgt = torch::tensor({1, 0, 2, 3, 2, 0, 3}, torch::kLong).to(test_device());
  auto work = [&](const torch::Tensor& h, const torch::Tensor& v, const torch::Tensor& c,
                  int64_t begin, int64_t end) {
    auto s = src.narrow(0, begin, end - begin), t = tgt.narrow(0, begin, end - begin);
    auto rad = (v.pow(2).sum(1, true) * c).sin();            // [n, 1]
    auto msg = torch::tanh(h.index_select(0, t) * w) * rad;  // [n, 2]
    return torch::zeros({4, 1, 2}, h.options()).index_add(0, s, msg.unsqueeze(1));
  };
  // loss(out) as a force-training step builds it: forces from a create_graph
  // backward, then every parameter's gradient of energy and force terms.
  auto step = [&](bool chunked) {
    auto x = torch::tanh(q);
    auto c = p * w.sum();  // no leaf, and a function of another read
    auto vec = pos.narrow(0, 1, 7) - pos.narrow(0, 0, 7);
    auto out = chunked ? edges::chunked_edge_sum(x, vec, 6, 3, {4, 1, 2}, {w, c},
                                                 [&](const torch::Tensor& h, const torch::Tensor& v,
                                                     const std::vector<torch::Tensor>& r, int64_t b,
                                                     int64_t e) { return work(h, v, r[1], b, e); })
                       : work(x, vec.narrow(0, 0, 6), c, 0, 6);
    auto energy = (out * head).sum() + x.pow(2).sum();
    auto forces = torch::autograd::grad({energy}, {pos}, {}, /*retain_graph=*/true,
                                        /*create_graph=*/true)[0];
    auto loss = forces.pow(2).sum() + 0.3 * energy;
    return std::make_pair(forces.detach(),
                          torch::autograd::grad({loss}, {q, w, p, head}, {}, /*retain_graph=*/true,
                                                /*create_graph=*/false, /*allow_unused=*/true));
  };
  const auto [forces, grads] = step(true);
  const auto [whole_forces, whole_grads] = step(false);
  EXPECT_LE(rel_diff(forces, whole_forces), 1e-14);
  const char* names[] = {"q", "w", "p", "head"};
  for (size_t k = 0; k < grads.size(); ++k) {
    ASSERT_TRUE(grads[k].defined()) << names[k];
    EXPECT_GT(whole_grads[k].abs().max().item<double>(), 0.0) << names[k];
    EXPECT_LE(rel_diff(grads[k], whole_grads[k]), 1e-13) << names[k];
  }

  auto x = torch::tanh(q);
  auto vec = pos.narrow(0, 1, 7) - pos.narrow(0, 0, 7);
  auto out = edges::chunked_edge_sum(
      x, vec, 6, 3, {4, 1, 2}, {w},
      [&](const torch::Tensor& h, const torch::Tensor& v, const std::vector<torch::Tensor>&,
          int64_t b, int64_t e) { return work(h, v, p, b, e); });
  auto forces_again = torch::autograd::grad({(out * head).sum()}, {pos}, {}, true, true)[0];
  expect_error(
      [&] {
        torch::autograd::grad({forces_again.pow(2).sum()}, {w}, {}, true, /*create_graph=*/true);
      },
      "no third derivative");
}

}  // namespace
}  // namespace uma::test
