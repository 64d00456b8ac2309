// Physics checks in float64: conservative forces and stress by finite
// differences, invariances, extensivity, and agreement of the merged-MoLE,
// unmerged and batched paths.
#include <gtest/gtest.h>

#include "test_util.h"

namespace uma::test {
namespace {

Engine fp64_engine(bool merge = true, const nlohmann::json& cfg = small_config()) {
  EngineOptions o;
  o.device = test_device();
  o.dtype = torch::kFloat64;
  o.merge_mole = merge;
  return Engine(random_model(cfg), o);
}

double energy(Engine& e, const Atoms& a) { return evaluate_on_host(e, {a}).energy[0]; }

Atoms displaced(const Atoms& a, int atom, int dim, double h) {
  Atoms b = a;
  b.positions = a.positions.clone();
  b.positions[atom][dim] += h;
  return b;
}

torch::Tensor cell_tensor(const Atoms& a) {
  return torch::tensor({a.cell[0][0], a.cell[0][1], a.cell[0][2], a.cell[1][0], a.cell[1][1],
                        a.cell[1][2], a.cell[2][0], a.cell[2][1], a.cell[2][2]},
                       torch::kFloat64)
      .view({3, 3});
}

// Applies r' = r (I + eps), h' = h (I + eps).
Atoms strained(const Atoms& a, const torch::Tensor& eps) {
  Atoms b = a;
  auto F = torch::eye(3, torch::kFloat64) + eps;
  b.positions = a.positions.matmul(F);
  auto cell = cell_tensor(a).matmul(F);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) b.cell[i][j] = cell[i][j].item<double>();
  return b;
}

void expect_fd_forces(Engine& e, const Atoms& a) {
  auto r = evaluate_on_host(e, {a});
  const double h = 1e-5;
  for (int i = 0; i < a.positions.size(0); ++i)
    for (int d = 0; d < 3; ++d) {
      const double fd =
          -(energy(e, displaced(a, i, d, h)) - energy(e, displaced(a, i, d, -h))) / (2 * h);
      EXPECT_NEAR(r.forces[i][d].item<double>(), fd, 1e-6) << "atom " << i << " dim " << d;
    }
}

TEST(Physics, ForcesAreMinusEnergyGradientPeriodic) {
  auto e = fp64_engine();
  expect_fd_forces(e, copper_cell());
  expect_fd_forces(e, triclinic_cell());
}

TEST(Physics, ForcesAreMinusEnergyGradientMolecule) {
  auto e = fp64_engine();
  expect_fd_forces(e, molecule());
}

TEST(Physics, StressIsStrainDerivative) {
  auto e = fp64_engine();
  for (const Atoms& a : {copper_cell(), triclinic_cell()}) {
    auto r = evaluate_on_host(e, {a});
    const double V = std::abs(torch::det(cell_tensor(a)).item<double>());
    const double h = 1e-5;
    for (int i = 0; i < 3; ++i)
      for (int j = i; j < 3; ++j) {
        auto eps = torch::zeros({3, 3}, torch::kFloat64);
        eps[i][j] += 0.5 * h;
        eps[j][i] += 0.5 * h;
        const double fd = (energy(e, strained(a, eps)) - energy(e, strained(a, -eps))) / (2 * h);
        EXPECT_NEAR(r.stress[0][i][j].item<double>() * V, fd, 1e-6) << i << j;
        if (i == j) continue;
        // The engine symmetrises dE/d(strain).  Rotation invariance makes the
        // true derivative symmetric already: a one-sided shear e_ij alone and
        // e_ji alone must each give the same stress component.
        for (auto [p, q] : {std::pair{i, j}, std::pair{j, i}}) {
          auto one_sided = torch::zeros({3, 3}, torch::kFloat64);
          one_sided[p][q] = h;
          const double fd_pq =
              (energy(e, strained(a, one_sided)) - energy(e, strained(a, -one_sided))) / (2 * h);
          EXPECT_NEAR(r.stress[0][i][j].item<double>() * V, fd_pq, 1e-6) << "one-sided " << p << q;
        }
      }
  }
}

TEST(Physics, RotationInvariance) {
  auto e = fp64_engine();
  torch::manual_seed(11);
  auto q = std::get<0>(torch::linalg_qr(torch::randn({3, 3}, torch::kFloat64)));
  if (torch::det(q).item<double>() < 0) q = -q;
  for (const Atoms& a : {triclinic_cell(), molecule()}) {
    Atoms b = a;
    b.positions = a.positions.matmul(q.t());
    for (int i = 0; i < 3; ++i) {
      auto row =
          torch::tensor({a.cell[i][0], a.cell[i][1], a.cell[i][2]}, torch::kFloat64).matmul(q.t());
      for (int j = 0; j < 3; ++j) b.cell[i][j] = row[j].item<double>();
    }
    auto ra = evaluate_on_host(e, {a}), rb = evaluate_on_host(e, {b});
    EXPECT_NEAR(ra.energy[0], rb.energy[0], 1e-9 * std::max(1.0, std::abs(ra.energy[0])));
    EXPECT_TRUE(torch::allclose(ra.forces.matmul(q.t()), rb.forces, 1e-8, 1e-9));
    if (a.pbc[0])
      EXPECT_TRUE(torch::allclose(q.matmul(ra.stress[0]).matmul(q.t()), rb.stress[0], 1e-8, 1e-10));
  }
}

TEST(Physics, TranslationPermutationAndImageInvariance) {
  auto e = fp64_engine();
  Atoms a = triclinic_cell();
  auto ref = evaluate_on_host(e, {a});

  Atoms moved = a;
  moved.positions = a.positions + torch::tensor({0.37, -1.2, 2.9}, torch::kFloat64);
  auto rm = evaluate_on_host(e, {moved});
  EXPECT_NEAR(ref.energy[0], rm.energy[0], 1e-9);
  EXPECT_TRUE(torch::allclose(ref.forces, rm.forces, 1e-8, 1e-9));

  Atoms image = a;
  image.positions = a.positions.clone();
  for (int k = 0; k < 3; ++k) image.positions[1][k] += a.cell[0][k] - 2 * a.cell[2][k];
  auto ri = evaluate_on_host(e, {image});
  EXPECT_NEAR(ref.energy[0], ri.energy[0], 1e-9);
  EXPECT_TRUE(torch::allclose(ref.forces, ri.forces, 1e-8, 1e-9));
  EXPECT_TRUE(torch::allclose(ref.stress, ri.stress, 1e-8, 1e-10));

  Atoms perm = a;
  const std::vector<int64_t> order{2, 0, 1};
  perm.numbers = {a.numbers[2], a.numbers[0], a.numbers[1]};
  perm.positions = a.positions.index_select(0, torch::tensor(order));
  auto rp = evaluate_on_host(e, {perm});
  EXPECT_NEAR(ref.energy[0], rp.energy[0], 1e-9);
  EXPECT_TRUE(
      torch::allclose(ref.forces.index_select(0, torch::tensor(order)), rp.forces, 1e-8, 1e-9));
}

TEST(Physics, SupercellIsExtensive) {
  auto e = fp64_engine();
  Atoms a = copper_cell();
  std::vector<int64_t> z;
  std::vector<torch::Tensor> pos;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) {
        auto shift = torch::tensor({i * a.cell[0][0] + j * a.cell[1][0] + k * a.cell[2][0],
                                    i * a.cell[0][1] + j * a.cell[1][1] + k * a.cell[2][1],
                                    i * a.cell[0][2] + j * a.cell[1][2] + k * a.cell[2][2]},
                                   torch::kFloat64);
        pos.push_back(a.positions + shift);
        z.insert(z.end(), a.numbers.begin(), a.numbers.end());
      }
  Atoms big = a;
  big.numbers = z;
  big.positions = torch::cat(pos, 0);
  for (auto& row : big.cell)
    for (double& v : row) v *= 2;
  // Composition (reduced) is unchanged, so the expert mixture is the same.
  auto r1 = evaluate_on_host(e, {a}), r8 = evaluate_on_host(e, {big});
  EXPECT_NEAR(r8.energy[0], 8 * r1.energy[0], 1e-8 * std::abs(r8.energy[0]) + 1e-9);
  EXPECT_TRUE(torch::allclose(r8.forces.narrow(0, 0, 4), r1.forces, 1e-7, 1e-9));
  EXPECT_TRUE(torch::allclose(r8.stress, r1.stress, 1e-7, 1e-10));
}

TEST(Physics, MergedUnmergedAndBatchedAgree) {
  auto merged = fp64_engine(true, small_config(4, true, true));
  auto plain = fp64_engine(false, small_config(4, true, true));
  std::vector<Atoms> systems{copper_cell(), molecule(), triclinic_cell()};
  systems[2].task = "oc20";
  auto batch = evaluate_on_host(plain, systems);
  int64_t offset = 0;
  for (size_t b = 0; b < systems.size(); ++b) {
    auto m = evaluate_on_host(merged, {systems[b]});
    auto u = evaluate_on_host(plain, {systems[b]});
    const int64_t n = static_cast<int64_t>(systems[b].numbers.size());
    EXPECT_NEAR(m.energy[0], u.energy[0], 1e-10 * std::max(1.0, std::abs(u.energy[0])));
    EXPECT_NEAR(batch.energy[b], u.energy[0], 1e-10 * std::max(1.0, std::abs(u.energy[0])));
    EXPECT_TRUE(torch::allclose(m.forces, u.forces, 1e-9, 1e-10));
    EXPECT_TRUE(torch::allclose(batch.forces.narrow(0, offset, n), u.forces, 1e-9, 1e-10));
    offset += n;
  }
}

TEST(Physics, AtomEnergiesSumToEnergy) {
  auto e = fp64_engine();
  auto r = evaluate_on_host(e, {copper_cell(), molecule()});
  EXPECT_NEAR(r.atom_energy.narrow(0, 0, 4).sum().item<double>(), r.energy[0], 1e-10);
  EXPECT_NEAR(r.atom_energy.narrow(0, 4, 5).sum().item<double>(), r.energy[1], 1e-10);
}

}  // namespace
}  // namespace uma::test
