// Engine behaviour: counted host reads, the radius graph against a brute-force
// search, capacity growth, MoLE re-merging, model-file round trips.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <tuple>

#include "io/extxyz.h"
#include "runtime/transfers.h"
#include "test_util.h"

namespace uma::test {
namespace {

// The steady-state budget: evaluate() makes no host read and one upload
// (positions and cells, packed); read() is one read, whatever it returns.
TEST(Transfers, SteadyStateEvaluationReadsNothingAndUploadsOnce) {
  EngineOptions opts;
  opts.device = test_device();
  Engine engine(random_model(small_config(4, /*dataset_head=*/true)), opts);
  const std::vector<Atoms> one{copper_cell()};
  const std::vector<Atoms> batch{copper_cell(), molecule(), triclinic_cell()};
  for (const auto* systems : {&one, &batch}) {
    HostEvaluation first;
    while (!engine.read(engine.evaluate(*systems, Request::all()), first)) {
    }  // sizes the graph
    for (int i = 0; i < 3; ++i) {
      std::vector<Atoms> step = *systems;
      step[0].positions = step[0].positions + 0.01 * (i + 1);  // moves, and
      step[0].cell[0][0] += 0.01 * (i + 1);                    // the cell changes (NPT)
      reset_transfer_counts();
      Evaluation ev;
      {
        NoSyncGuard no_sync;
        ev = engine.evaluate(step, Request());
      }
      EXPECT_EQ(host_read_count(), 0) << "systems: " << systems->size();
      EXPECT_EQ(upload_count(), 1) << "systems: " << systems->size();
      HostEvaluation r;
      ASSERT_TRUE(engine.read(ev, r));
      EXPECT_EQ(host_read_count(), 1);
      EXPECT_EQ(r.forces.size(0), ev.forces.size(0));
      EXPECT_EQ(r.energy.size(), systems->size());
      EXPECT_FALSE(r.virial.defined());  // not asked for
    }
  }
  // A new layout (another charge, and one system after the batch of three)
  // costs, on its first call, the one read of the graph's sizing probe and
  // six uploads: the layout (numbers, charge, spin, dataset), its constants,
  // the positions and cells, the graph's bin tables, the edge block lengths
  // and the head's dataset one-hot; then it settles.
  std::vector<Atoms> charged = one;
  charged[0].charge = 1;
  reset_transfer_counts();
  engine.evaluate(charged);
  EXPECT_EQ(upload_count(), 6);
  EXPECT_EQ(host_read_count(), 1);
  reset_transfer_counts();
  engine.evaluate(charged);
  EXPECT_EQ(upload_count(), 1);
  EXPECT_EQ(host_read_count(), 0);
}

// read() returns exactly what evaluate() left on the device, for each request.
TEST(Transfers, ReadReturnsWhatWasAsked) {
  EngineOptions opts;
  opts.dtype = torch::kFloat64;
  Engine engine(random_model(small_config()), opts);
  const std::vector<Atoms> systems{copper_cell(), molecule()};
  HostEvaluation all;
  while (!engine.read(engine.evaluate(systems, Request::all()), all)) {
  }
  Request some;
  some.energy = false;
  some.atom_virial = true;
  auto ev = engine.evaluate(systems, some);
  HostEvaluation r;
  ASSERT_TRUE(engine.read(ev, r));
  EXPECT_TRUE(r.energy.empty());
  EXPECT_FALSE(r.stress.defined());
  EXPECT_TRUE(torch::equal(r.forces, all.forces));
  EXPECT_TRUE(torch::equal(r.atom_virial, all.atom_virial));
  EXPECT_TRUE(torch::equal(to_host(ev.forces), all.forces));
  // (the molecule has no cell, hence a NaN stress)
  EXPECT_TRUE(torch::allclose(to_host(ev.stress), all.stress, 0.0, 0.0, /*equal_nan=*/true));
  EXPECT_TRUE(std::isnan(all.stress[1][0][0].item<double>()));
  EXPECT_EQ(all.energy.size(), 2u);
  EXPECT_EQ(all.edges, r.edges);
}

// All (target, source, image) triples within the cutoff, by brute force on the host.
std::set<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>> brute_force_edges(const Atoms& a,
                                                                                    double cutoff) {
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>> edges;
  const auto rep = image_repeats(graph_cell(a.cell, a.pbc), a.pbc, cutoff);
  const int64_t n = a.positions.size(0);
  auto P = a.positions.accessor<double, 2>();
  for (int64_t t = 0; t < n; ++t)
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = -rep[0] - 1; i <= rep[0] + 1; ++i)
        for (int64_t j = -rep[1] - 1; j <= rep[1] + 1; ++j)
          for (int64_t k = -rep[2] - 1; k <= rep[2] + 1; ++k) {
            if ((i && !a.pbc[0]) || (j && !a.pbc[1]) || (k && !a.pbc[2])) continue;
            double d2 = 0;
            for (int c = 0; c < 3; ++c) {
              const double v =
                  P[s][c] + i * a.cell[0][c] + j * a.cell[1][c] + k * a.cell[2][c] - P[t][c];
              d2 += v * v;
            }
            if (d2 > 0 && d2 <= cutoff * cutoff) edges.insert({t, s, i, j, k});
          }
  return edges;
}

// The systems' graph cells as RadiusGraphBuilder::build takes them: [B, 3, 3]
// float64 on `device` (one counted upload).
torch::Tensor graph_cells(const std::vector<GraphSystem>& systems, const torch::Device& device) {
  std::vector<double> flat;
  for (const auto& s : systems)
    for (const auto& row : s.cell) flat.insert(flat.end(), row.begin(), row.end());
  return upload(flat, torch::TensorOptions().dtype(torch::kFloat64).device(device))
      .view({static_cast<int64_t>(systems.size()), 3, 3});
}

TEST(RadiusGraph, MatchesBruteForce) {
  for (Atoms a : {copper_cell(), triclinic_cell(), molecule()}) {
    // positions inside the cell so that wrapping is the identity
    RadiusGraphBuilder builder(5.0, 0);
    std::vector<GraphSystem> sys{{0, a.positions.size(0), graph_cell(a.cell, a.pbc), a.pbc}};
    auto g = builder.build(a.positions, graph_cells(sys, a.positions.device()), sys);
    const auto expected = brute_force_edges(a, 5.0);
    std::set<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>> got;
    auto valid = g.valid.to(torch::kCPU);
    auto off = g.offsets.to(torch::kLong);
    for (int64_t e = 0; e < g.src.size(0); ++e) {
      if (!valid[e].item<bool>()) continue;
      got.insert({g.tgt[e].item<int64_t>(), g.src[e].item<int64_t>(), off[e][0].item<int64_t>(),
                  off[e][1].item<int64_t>(), off[e][2].item<int64_t>()});
    }
    EXPECT_EQ(got, expected);
    EXPECT_EQ(g.counts[0].item<int64_t>(), static_cast<int64_t>(expected.size()));
    // sorted by target
    auto tgt = g.tgt.masked_select(g.valid);
    EXPECT_TRUE(tgt.equal(std::get<0>(tgt.sort())));
  }
}

TEST(RadiusGraph, MaxNeighbourRuleKeepsNearTies) {
  // One centre atom with 12 neighbours at 2.0 A and 6 at 2.05 A, non-periodic.
  std::vector<double> pos{0, 0, 0};
  for (int k = 0; k < 12; ++k) {
    const double phi = 2 * M_PI * k / 12;
    pos.insert(pos.end(), {2.0 * std::cos(phi), 2.0 * std::sin(phi), 0.0});
  }
  for (int k = 0; k < 6; ++k) {
    const double phi = 2 * M_PI * k / 6;
    pos.insert(pos.end(), {0.0, 2.05 * std::cos(phi), 2.05 * std::sin(phi)});
  }
  Atoms a = atoms_from(std::vector<int64_t>(19, 6), pos, {}, {false, false, false}, "omol");
  std::vector<GraphSystem> sys{{0, 19, graph_cell(a.cell, a.pbc), a.pbc}};
  auto count_centre = [&](int64_t max_nb) {
    RadiusGraphBuilder b(6.0, max_nb);
    auto g = b.build(a.positions, graph_cells(sys, a.positions.device()), sys);
    return (g.valid & (g.tgt == 0)).sum().item<int64_t>();
  };
  EXPECT_EQ(count_centre(0), 18);
  // T = 10: the 11th smallest d^2 is 4.0; keep d^2 <= 4.01 -> all 12 at 2.0 A (ties kept)
  EXPECT_EQ(count_centre(10), 12);
  // T = 12: the 13th smallest is 2.05^2 = 4.2025; keep <= 4.2125 -> all 18
  EXPECT_EQ(count_centre(12), 18);
}

TEST(RadiusGraph, CapacityGrowsWhenTheGraphOverflows) {
  Engine engine(random_model(small_config()));
  Atoms loose = copper_cell();
  for (auto& row : loose.cell)
    for (double& v : row) v *= 1.3;
  loose.positions = loose.positions * 1.3;
  evaluate_on_host(engine, {loose});
  auto dense = evaluate_on_host(engine, {copper_cell()});  // same layout, many more edges
  Engine fresh(random_model(small_config()));
  auto reference = evaluate_on_host(fresh, {copper_cell()});
  EXPECT_EQ(dense.edges, reference.edges);
  EXPECT_NEAR(dense.energy[0], reference.energy[0], 1e-5 * std::abs(reference.energy[0]));
  EXPECT_TRUE(torch::allclose(dense.forces, reference.forces, 1e-4, 1e-5));
}

TEST(MergedMole, RemergesWhenCompositionChargeOrTaskChanges) {
  EngineOptions o;
  o.dtype = torch::kFloat64;
  Engine merged(random_model(small_config()), o);
  o.merge_mole = false;
  Engine plain(random_model(small_config()), o);
  Atoms a = copper_cell();
  Atoms b = copper_cell();
  b.numbers = {29, 28, 29, 28};
  Atoms c = b;
  c.task = "oc20";
  Atoms m1 = molecule(1, 2), m2 = molecule(0, 1);
  for (const Atoms* s : {&a, &a, &b, &c, &c, &m1, &m2, &a}) {
    auto rm = evaluate_on_host(merged, {*s});
    auto rp = evaluate_on_host(plain, {*s});
    EXPECT_NEAR(rm.energy[0], rp.energy[0], 1e-10 * std::max(1.0, std::abs(rp.energy[0])));
    EXPECT_TRUE(torch::allclose(rm.forces, rp.forces, 1e-9, 1e-10));
  }
  EXPECT_EQ(merged.stats().merges, 6);  // a, b, c, m1, m2, a again; not the repeats
}

TEST(ModelFile, SaveLoadRoundTripIsExact) {
  auto model = random_model(small_config(4, true, true));
  const auto path = (std::filesystem::temp_directory_path() / "uma_roundtrip.safetensors").string();
  save_model(model, path);
  auto loaded = load_model(path);
  auto p1 = model->named_parameters(), p2 = loaded->named_parameters();
  ASSERT_EQ(p1.size(), p2.size());
  for (const auto& p : p1) EXPECT_TRUE(p.value().equal(p2[p.key()])) << p.key();
  Engine e1(model), e2(loaded);
  EXPECT_EQ(evaluate_on_host(e1, {triclinic_cell()}).energy,
            evaluate_on_host(e2, {triclinic_cell()}).energy);
  std::filesystem::remove(path);
}

TEST(Extxyz, WriteReadRoundTrip) {
  Frame f;
  f.numbers = {29, 8};
  f.positions = {0.1, 0.2, 0.3, 1.5, 1.25, -0.125};
  f.cell = {{{3.0, 0, 0}, {0.5, 3.0, 0}, {0, 0, 4.0}}};
  f.has_cell = true;
  f.pbc = {true, true, false};
  f.info["energy"] = "-1.25";
  f.info["task"] = "oc20";
  f.arrays["forces"] = {1, 2, 3, 4, 5, 6};
  f.array_width["forces"] = 3;
  const auto path = (std::filesystem::temp_directory_path() / "uma_rt.xyz").string();
  write_extxyz(path, {f, f});
  auto frames = read_extxyz(path);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[1].numbers, f.numbers);
  EXPECT_EQ(frames[1].positions, f.positions);
  EXPECT_EQ(frames[1].pbc, f.pbc);
  EXPECT_EQ(frames[1].cell, f.cell);
  EXPECT_EQ(frames[1].info.at("task"), "oc20");
  EXPECT_EQ(frames[1].arrays.at("forces"), f.arrays.at("forces"));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace uma::test
