// Spatial decomposition without LAMMPS: a cluster split into two pieces, each
// evaluated as owned atoms plus every other atom as a ghost, must add up to
// the whole cluster (energy, folded forces, virial, per-atom energies); and
// a periodic cell evaluated as its atoms plus their images within one cutoff,
// with the halo exchange refreshing the images' features, must equal the
// periodic evaluation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <torch/csrc/autograd/graph_task.h>

#include "engine/engine.h"
#include "test_util.h"

namespace uma {
namespace {

using test::expect_error;
using test::random_model;
using test::small_config;

struct Cluster {
  std::vector<int64_t> z;
  std::vector<std::array<double, 3>> x;
};

Cluster random_cluster(int n, uint64_t seed) {
  torch::manual_seed(seed);
  Cluster c;
  auto pos = torch::rand({4 * n, 3}, torch::kFloat64) * 9.0;
  for (int64_t i = 0; i < pos.size(0) && static_cast<int>(c.x.size()) < n; ++i) {
    std::array<double, 3> p{pos[i][0].item<double>(), pos[i][1].item<double>(),
                            pos[i][2].item<double>()};
    bool clear = true;
    for (const auto& q : c.x) clear &= std::hypot(p[0] - q[0], p[1] - q[1], p[2] - q[2]) > 1.6;
    if (!clear) continue;
    c.x.push_back(p);
    c.z.push_back(c.x.size() % 3 == 0 ? 8 : 29);
  }
  return c;
}

double distance(const std::array<double, 3>& a, const std::array<double, 3>& b) {
  return std::hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
}

// Owned = atoms of `piece`; ghosts = the others, ordered by hops (cutoffs)
// from the nearest owned atom when `prune` (as pair_style uma orders them).
Atoms make_piece(const Cluster& c, const std::vector<int>& owned, double cutoff, int layers,
                 bool prune, std::vector<int>* order) {
  std::vector<std::pair<int, int>> ghosts;  // (hops, atom)
  for (int i = 0; i < static_cast<int>(c.x.size()); ++i) {
    if (std::find(owned.begin(), owned.end(), i) != owned.end()) continue;
    double d = 1e9;
    for (int o : owned) d = std::min(d, distance(c.x[i], c.x[o]));
    ghosts.push_back({std::max(1, static_cast<int>(std::ceil(d / cutoff))), i});
  }
  std::stable_sort(ghosts.begin(), ghosts.end());
  *order = owned;
  for (const auto& g : ghosts) order->push_back(g.second);
  Atoms p;
  std::vector<double> pos;
  for (int i : *order) {
    p.numbers.push_back(c.z[i]);
    pos.insert(pos.end(), c.x[i].begin(), c.x[i].end());
  }
  p.positions = torch::tensor(pos, torch::kFloat64).view({-1, 3});
  p.piece.n_owned = static_cast<int64_t>(owned.size());
  p.piece.composition.assign(100, 0);
  for (int64_t zz : c.z) ++p.piece.composition[zz];
  p.task = "omat";
  if (prune) {
    auto within = [&](int hops) {
      int64_t n = p.piece.n_owned;
      for (const auto& g : ghosts) n += g.first <= hops;
      return n;
    };
    p.piece.n_targets = within(layers);
    for (int k = 0; k < layers; ++k) p.piece.layer_targets.push_back(within(layers - 1 - k));
  }
  return p;
}

// All edges; edges pruned per block; pruned and recomputed in chunks of 37 edges.
enum class Mode { kAllEdges, kPruned, kPrunedRecomputed };

class LocalEvaluation : public ::testing::TestWithParam<Mode> {};

TEST_P(LocalEvaluation, TwoPiecesAddUpToTheWhole) {
  const bool prune = GetParam() != Mode::kAllEdges;
  auto cfg = small_config(4, false);
  EngineOptions opts;
  opts.dtype = torch::kFloat64;
  Engine whole_engine(random_model(cfg), opts);
  if (GetParam() == Mode::kPrunedRecomputed) opts.recompute_chunk = 37;
  Engine local_engine(random_model(cfg), opts);
  const double cutoff = whole_engine.model()->config().backbone.cutoff;
  const int layers = whole_engine.model()->config().backbone.num_layers;

  const Cluster c = random_cluster(40, 3);
  const int n = static_cast<int>(c.x.size());
  Atoms a;
  a.numbers = c.z;
  std::vector<double> flat;
  for (const auto& p : c.x) flat.insert(flat.end(), p.begin(), p.end());
  a.positions = torch::tensor(flat, torch::kFloat64).view({-1, 3});
  a.task = "omat";
  const auto ref = evaluate_on_host(whole_engine, {a}, Request::all());

  std::vector<int> left, right;
  for (int i = 0; i < n; ++i) (c.x[i][0] < 4.5 ? left : right).push_back(i);
  ASSERT_FALSE(left.empty());
  ASSERT_FALSE(right.empty());

  double energy = 0.0;
  auto forces = torch::zeros({n, 3}, torch::kFloat64);
  auto atom_energy = torch::zeros({n}, torch::kFloat64);
  auto virial = torch::zeros({3, 3}, torch::kFloat64);
  auto atom_virial = torch::zeros({n, 3, 3}, torch::kFloat64);
  for (const auto* owned : {&left, &right}) {
    std::vector<int> order;
    const auto piece = make_piece(c, *owned, cutoff, layers, prune, &order);
    HostEvaluation r;
    while (!local_engine.read(local_engine.evaluate({piece}, Request::all()), r)) {
    }
    energy += r.energy[0];
    virial += r.virial[0];
    auto index = torch::tensor(std::vector<int64_t>(order.begin(), order.end()), torch::kLong);
    forces.index_add_(0, index, r.forces);
    atom_energy.index_add_(0, index, r.atom_energy);
    atom_virial.index_add_(0, index, r.atom_virial);
  }
  EXPECT_NEAR(energy, ref.energy[0], 1e-10 * std::max(1.0, std::abs(ref.energy[0])));
  EXPECT_LT((forces - ref.forces).abs().max().item<double>(), 1e-10);
  EXPECT_LT((atom_energy - ref.atom_energy).abs().max().item<double>(), 1e-10);
  EXPECT_LT((virial - ref.virial[0]).abs().max().item<double>(), 1e-9);
  EXPECT_LT((atom_virial - ref.atom_virial).abs().max().item<double>(), 1e-10);
}

INSTANTIATE_TEST_SUITE_P(Edges, LocalEvaluation,
                         ::testing::Values(Mode::kAllEdges, Mode::kPruned, Mode::kPrunedRecomputed),
                         [](const auto& info) {
                           return info.param == Mode::kAllEdges ? "all_edges"
                                  : info.param == Mode::kPruned ? "pruned"
                                                                : "pruned_recomputed";
                         });

// A piece given on the device (DeviceAtoms, as pair_style uma/kk gives it)
// equals the same piece with host numbers, also moved far from the origin.
TEST(LocalEvaluation, DeviceAtomsEqualHostNumbers) {
  EngineOptions opts;
  opts.device = test::test_device();
  opts.dtype = torch::kFloat64;
  Engine host_engine(test::random_model_with_references(small_config(4, false)), opts);
  Engine device_engine(test::random_model_with_references(small_config(4, false)), opts);
  const double cutoff = host_engine.model()->config().backbone.cutoff;
  const int layers = host_engine.model()->config().backbone.num_layers;
  const Cluster c = random_cluster(40, 3);
  std::vector<int> left;
  for (int i = 0; i < static_cast<int>(c.x.size()); ++i)
    if (c.x[i][0] < 4.5) left.push_back(i);
  const std::array<double, 3> shift{511.0, -72.5, 3.25};
  for (bool prune : {false, true}) {
    std::vector<int> order;
    Atoms host = make_piece(c, left, cutoff, layers, prune, &order);
    host.positions = host.positions.to(opts.device);
    Atoms dev = host;
    dev.numbers.clear();
    dev.on_device.numbers = torch::tensor(host.numbers, torch::kLong).to(opts.device);
    dev.on_device.layout_id = prune ? 2 : 1;
    dev.on_device.origin = shift;
    dev.positions =
        host.positions + torch::tensor({shift[0], shift[1], shift[2]}, host.positions.options());
    HostEvaluation ref, got;
    while (!host_engine.read(host_engine.evaluate({host}, Request::all()), ref)) {
    }
    while (!device_engine.read(device_engine.evaluate({dev}, Request::all()), got)) {
    }
    EXPECT_NEAR(got.energy[0], ref.energy[0], 1e-12 * std::max(1.0, std::abs(ref.energy[0])))
        << prune;
    EXPECT_LT((got.forces - ref.forces).abs().max().item<double>(), 1e-11) << prune;
    EXPECT_LT((got.atom_energy - ref.atom_energy).abs().max().item<double>(), 1e-12) << prune;
    EXPECT_LT((got.virial - ref.virial).abs().max().item<double>(), 1e-11) << prune;
    EXPECT_LT((got.atom_virial - ref.atom_virial).abs().max().item<double>(), 1e-11) << prune;
  }
}

TEST(LocalEvaluation, ProcessWithoutAtomsRunsAPlaceholder) {
  EngineOptions opts;
  opts.dtype = torch::kFloat64;
  Engine engine(random_model(small_config()), opts);
  Atoms empty;
  empty.piece.n_owned = 0;
  empty.positions = torch::zeros({0, 3}, torch::kFloat64);
  empty.piece.composition.assign(30, 0);
  empty.piece.composition[29] = 4;
  empty.task = "omat";
  empty.piece.layer_targets = {0, 0};
  HostEvaluation r;
  while (!engine.read(engine.evaluate({empty}, Request::all()), r)) {
  }
  EXPECT_EQ(r.energy[0], 0.0);
  EXPECT_EQ(r.forces.size(0), 0);
}

// Halo exchange on one process: the ghosts are periodic images (within one
// cutoff of the cell's atoms) of the owned atoms, and the exchange copies
// each owner's feature row into its images' rows.  index_select's gradient
// is exactly the exchange's: ghost-row gradients added into the owners.
struct HaloCase {
  bool recompute;
  bool balanced;
};

class HaloExchange : public ::testing::TestWithParam<HaloCase> {};

TEST_P(HaloExchange, PeriodicImagesEqualThePeriodicCell) {
  const auto cfg = small_config(4, false, GetParam().balanced);
  EngineOptions opts;
  opts.device = test::test_device();
  opts.dtype = torch::kFloat64;
  Engine whole_engine(random_model(cfg), opts);
  if (GetParam().recompute) opts.recompute_chunk = 37;
  Engine local_engine(random_model(cfg), opts);
  const double cutoff = whole_engine.model()->config().backbone.cutoff;

  // A skewed cell and the atoms of a random cluster that fall inside it.
  const double cell[3][3] = {{6.5, 0.0, 0.0}, {1.2, 6.2, 0.0}, {-0.8, 0.9, 6.8}};
  Cluster c;
  for (const auto& [z, x] : [&] {
         Cluster all = random_cluster(60, 11);
         std::vector<std::pair<int64_t, std::array<double, 3>>> inside;
         for (size_t i = 0; i < all.x.size(); ++i)
           if (all.x[i][0] < 6.4 && all.x[i][1] < 6.1 && all.x[i][2] < 6.7)
             inside.push_back({all.z[i], all.x[i]});
         return inside;
       }()) {
    c.z.push_back(z);
    c.x.push_back(x);
  }
  const int n = static_cast<int>(c.x.size());
  ASSERT_GE(n, 8);
  Atoms a;
  a.numbers = c.z;
  std::vector<double> flat;
  for (const auto& p : c.x) flat.insert(flat.end(), p.begin(), p.end());
  a.positions = torch::tensor(flat, torch::kFloat64).view({-1, 3});
  a.cell = {{{cell[0][0], cell[0][1], cell[0][2]},
             {cell[1][0], cell[1][1], cell[1][2]},
             {cell[2][0], cell[2][1], cell[2][2]}}};
  a.pbc = {true, true, true};
  a.task = "omat";
  const auto ref = evaluate_on_host(whole_engine, {a}, Request::all());

  // Images within one cutoff of some atom of the cell, and their owners.
  std::vector<int64_t> owner;
  for (int s0 = -2; s0 <= 2; ++s0)
    for (int s1 = -2; s1 <= 2; ++s1)
      for (int s2 = -2; s2 <= 2; ++s2) {
        if (s0 == 0 && s1 == 0 && s2 == 0) continue;
        for (int i = 0; i < n; ++i) {
          std::array<double, 3> p = c.x[i];
          for (int d = 0; d < 3; ++d) p[d] += s0 * cell[0][d] + s1 * cell[1][d] + s2 * cell[2][d];
          double nearest = 1e9;
          for (const auto& q : c.x) nearest = std::min(nearest, distance(p, q));
          if (nearest > cutoff) continue;
          owner.push_back(i);
          flat.insert(flat.end(), p.begin(), p.end());
        }
      }
  const int64_t ghosts = static_cast<int64_t>(owner.size());
  ASSERT_GT(ghosts, 2 * n);
  Atoms piece;
  piece.numbers = c.z;
  for (int64_t o : owner) piece.numbers.push_back(c.z[o]);
  piece.positions = torch::tensor(flat, torch::kFloat64).view({-1, 3});
  piece.piece.n_owned = n;
  piece.piece.composition.assign(100, 0);
  for (int64_t zz : c.z) ++piece.piece.composition[zz];
  piece.task = "omat";
  const auto owners = torch::tensor(owner, torch::kLong).to(opts.device);
  // The collectives, as one process holding every owner sees them; each
  // call records whether it came from inside an autograd pass (which on a
  // GPU runs on LibTorch's worker thread, where MPI may not be called).
  int forwards = 0, backwards = 0, sums = 0, inside_autograd = 0;
  auto outside_autograd = [&] {
    inside_autograd += torch::autograd::get_current_graph_task_id() != -1;
  };
  piece.piece.exchange_ghosts.owners_to_ghosts = [&](const torch::Tensor& x) {
    ++forwards;
    outside_autograd();
    return torch::cat({x.narrow(0, 0, n), x.index_select(0, owners)});
  };
  piece.piece.exchange_ghosts.ghosts_to_owners = [&](const torch::Tensor& g) {
    ++backwards;
    outside_autograd();
    auto ghost_rows = g.narrow(0, n, ghosts);
    return torch::cat(
        {g.narrow(0, 0, n).index_add(0, owners, ghost_rows), torch::zeros_like(ghost_rows)});
  };
  if (GetParam().balanced)  // the whole-system sums (this process holds every owned atom)
    piece.piece.sum_over_processes = [&](const torch::Tensor& x) {
      ++sums;
      outside_autograd();
      return x.clone();
    };

  HostEvaluation r;
  while (!local_engine.read(local_engine.evaluate({piece}, Request::all()), r))
    forwards = backwards = sums = inside_autograd = 0;
  EXPECT_EQ(forwards, 2);  // after the edge-degree embedding and the first of two blocks
  EXPECT_EQ(backwards, 2);
  EXPECT_EQ(sums, GetParam().balanced
                      ? 2 * 2
                      : 0);  // the charge channels: two blocks, forward and backward
  EXPECT_EQ(inside_autograd, 0);
  auto fold = torch::cat({torch::arange(n, torch::kLong), owners.cpu()});
  auto forces = torch::zeros({n, 3}, torch::kFloat64).index_add_(0, fold, r.forces);
  auto atom_virial = torch::zeros({n, 3, 3}, torch::kFloat64).index_add_(0, fold, r.atom_virial);
  const double scale = std::max(1.0, std::abs(ref.energy[0]));
  EXPECT_NEAR(r.energy[0], ref.energy[0], 1e-12 * scale);
  EXPECT_LT((forces - ref.forces).abs().max().item<double>(), 1e-12);
  EXPECT_LT((r.atom_energy.narrow(0, 0, n) - ref.atom_energy).abs().max().item<double>(), 1e-12);
  EXPECT_EQ(r.atom_energy.narrow(0, n, ghosts).abs().max().item<double>(), 0.0);
  EXPECT_LT((r.virial[0] - ref.virial[0]).abs().max().item<double>(), 1e-11);
  EXPECT_LT((atom_virial - ref.atom_virial).abs().max().item<double>(), 1e-12);

  // The exchange matters: ghosts that keep their own (edge-less) features
  // give another energy.
  auto identity = [](const torch::Tensor& x) { return x; };
  piece.piece.exchange_ghosts = {identity, identity};
  while (!local_engine.read(local_engine.evaluate({piece}, Request::all()), r)) {
  }
  EXPECT_GT(std::abs(r.energy[0] - ref.energy[0]), 1e-6 * scale);
}

INSTANTIATE_TEST_SUITE_P(Paths, HaloExchange,
                         ::testing::Values(HaloCase{false, false}, HaloCase{true, false},
                                           HaloCase{false, true}),
                         [](const auto& info) {
                           return std::string(info.param.recompute ? "recomputed" : "stored") +
                                  (info.param.balanced ? "_balanced" : "");
                         });

TEST(HaloExchange, OnlyOwnedAtomsReceiveMessages) {
  Engine engine(random_model(small_config()), EngineOptions{});
  Atoms piece;
  piece.numbers = {29, 29};
  piece.positions = torch::tensor({0.0, 0.0, 0.0, 2.0, 0.0, 0.0}, torch::kFloat64).view({2, 3});
  piece.piece.n_owned = 1;
  piece.piece.n_targets = 2;
  piece.piece.composition.assign(30, 0);
  piece.piece.composition[29] = 1;
  piece.task = "omat";
  auto identity = [](const torch::Tensor& x) { return x; };
  piece.piece.exchange_ghosts = {identity, identity};
  const std::string only_owned = "with the halo exchange only owned atoms receive messages";
  expect_error([&] { engine.evaluate({piece}); }, only_owned);  // a ghost as a target
  piece.piece.n_targets = 0;
  expect_error([&] { engine.evaluate({piece}); }, "n_targets must include every owned atom");
  piece.piece.n_targets = -1;
  piece.piece.layer_targets = {1, 1};
  expect_error([&] { engine.evaluate({piece}); }, only_owned);  // per-block targets
  piece.piece.layer_targets.clear();
  EXPECT_NO_THROW(engine.evaluate({piece}));  // the same piece, asked rightly
}

}  // namespace
}  // namespace uma
