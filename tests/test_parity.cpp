// Parity with fairchem: the same weights and structures through fairchem-core
// (tests/reference/make_fixtures.py) and through this engine.
//
// Fixtures come from $UMA_FIXTURES_DIR (the test command regenerates them
// through fairchem) or, without it, from the committed tests/fixtures.
#include <gtest/gtest.h>

#include <cstdlib>
#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "model/model.h"
#include "test_util.h"

namespace uma {
namespace {

using test::fixtures_dir;

using nlohmann::json;

json load_fixtures() {
  std::ifstream in(fixtures_dir() + "/fixtures.json");
  if (!in) throw std::runtime_error("no fixtures.json in " + fixtures_dir());
  return json::parse(in);
}

Atoms atoms_of(const json& s) {
  Atoms a;
  a.numbers = s["numbers"].get<std::vector<int64_t>>();
  std::vector<double> pos;
  for (const auto& row : s["positions"])
    for (double v : row) pos.push_back(v);
  a.positions = torch::tensor(pos, torch::kFloat64).view({-1, 3});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) a.cell[i][j] = s["cell"][i][j].get<double>();
  for (int k = 0; k < 3; ++k) a.pbc[k] = s["pbc"][k].get<bool>();
  a.charge = s["charge"].get<int64_t>();
  a.spin = s["spin"].get<int64_t>();
  a.task = s["task"].get<std::string>();
  return a;
}

// fp64 backs the README's claim: within 1e-12 relative of fairchem (energy
// relative to max(1, |E|), forces and stress absolute in eV/A and eV/A^3, as
// their magnitudes are of order one); the measured worst is ~1e-14.
// fp32: the energy is compared without its element references (E minus the
// sum of the per-element reference energies, which are exact constants both
// sides add), so the bound cannot hide in a large reference sum; per atom,
// because the interaction energy is a sum of per-atom terms each carrying
// float32 rounding.
struct Tolerance {
  double energy_rel, interaction_per_atom, force, stress;
};

Tolerance tolerance(const std::string& dtype) {
  if (dtype == "float64") return {1e-12, 0.0, 1e-12, 1e-12};
  return {0.0, 2e-5, 5e-5, 2e-6};
}

// Whether an atom lies outside the cell along a periodic direction.
bool outside_cell(const Atoms& a) {
  if (!(a.pbc[0] || a.pbc[1] || a.pbc[2])) return false;
  auto cell = torch::tensor({a.cell[0][0], a.cell[0][1], a.cell[0][2], a.cell[1][0], a.cell[1][1],
                             a.cell[1][2], a.cell[2][0], a.cell[2][1], a.cell[2][2]},
                            torch::kFloat64)
                  .view({3, 3});
  auto frac = a.positions.matmul(torch::linalg_inv(cell));
  for (int k = 0; k < 3; ++k)
    if (a.pbc[k] &&
        ((frac.select(1, k) < 0).any().item<bool>() || (frac.select(1, k) >= 1).any().item<bool>()))
      return true;
  return false;
}

// Sum of the element reference energies of a system (0 without references).
double reference_sum(const Engine& engine, const Atoms& a) {
  const auto& refs = engine.model()->outputs(a.task).element_references;
  if (!refs.defined()) return 0.0;
  double sum = 0;
  for (int64_t z : a.numbers) sum += refs[z].item<double>();
  return sum;
}

class FairchemParity : public ::testing::TestWithParam<bool> {};

TEST_P(FairchemParity, EnergyForcesStress) {
  const bool merge = GetParam();
  const json fx = load_fixtures();
  ASSERT_FALSE(fx["cases"].empty());
  std::map<std::string, std::unique_ptr<Engine>> engines;
  std::map<std::string, std::array<double, 3>> worst;  // dtype -> max rel dE, |dF|, |dsigma|
  int compared = 0, partial_stress = 0, unwrapped = 0, random_roll_cases = 0;
  for (const auto& c : fx["cases"]) {
    const std::string dtype = c["dtype"], file = c["model"];
    const std::string key = file + "/" + dtype;
    if (!engines.count(key)) {
      EngineOptions o;
      o.device = uma::test::test_device();
      o.dtype = dtype == "float64" ? torch::kFloat64 : torch::kFloat32;
      o.merge_mole = merge;
      engines[key] = std::make_unique<Engine>(load_model(fixtures_dir() + "/" + file), o);
    }
    std::vector<Atoms> systems;
    std::string names;
    for (const auto& s : c["systems"]) {
      systems.push_back(atoms_of(s));
      if (outside_cell(systems.back())) ++unwrapped;
      names += s["name"].get<std::string>() + " ";
    }
    SCOPED_TRACE(key + " " + names + (merge ? "(merged)" : "(unmerged)"));
    auto r = evaluate_on_host(*engines[key], systems);
    // fairchem as shipped draws a random Wigner roll angle per edge; the
    // engine uses 0.  The results agree at float32 rounding (they differ only
    // by the rounding of different rotations), so these fp64 cases are held
    // to the fp32 bounds.
    const bool random_roll = c.value("gamma", "zero") == "random";
    random_roll_cases += random_roll;
    const Tolerance tol = tolerance(random_roll ? "float32" : dtype);
    auto& w = worst[random_roll ? "float64, random roll" : dtype];
    int64_t atom = 0;
    for (size_t b = 0; b < systems.size(); ++b) {
      const double e_ref = c["energy"][b];
      const double natoms = static_cast<double>(systems[b].numbers.size());
      if (dtype == "float64" && !random_roll) {
        w[0] = std::max(w[0], std::abs(r.energy[b] - e_ref) / std::max(1.0, std::abs(e_ref)));
        EXPECT_NEAR(r.energy[b], e_ref, tol.energy_rel * std::max(1.0, std::abs(e_ref)))
            << "system " << b;
      } else {
        const double refs = reference_sum(*engines[key], systems[b]);
        const double e_int = r.energy[b] - refs, e_int_ref = e_ref - refs;
        w[0] = std::max(w[0], std::abs(e_int - e_int_ref) / natoms);
        EXPECT_NEAR(e_int, e_int_ref, tol.interaction_per_atom * natoms)
            << "system " << b << " interaction energy (references " << refs << " eV)";
      }
      for (size_t i = 0; i < systems[b].numbers.size(); ++i, ++atom)
        for (int k = 0; k < 3; ++k) {
          const double f = r.forces[atom][k].item<double>(),
                       f_ref = c["forces"][b][i][k].get<double>();
          w[1] = std::max(w[1], std::abs(f - f_ref));
          EXPECT_NEAR(f, f_ref, tol.force) << "atom " << atom << " component " << k;
        }
      const bool periodic = systems[b].pbc[0] || systems[b].pbc[1] || systems[b].pbc[2];
      if (periodic && !(systems[b].pbc[0] && systems[b].pbc[1] && systems[b].pbc[2]))
        ++partial_stress;
      if (periodic)  // slabs too
        for (int k = 0; k < 9; ++k) {
          const double st = r.stress[b][k / 3][k % 3].item<double>(),
                       st_ref = c["stress"][b][k].get<double>();
          w[2] = std::max(w[2], std::abs(st - st_ref));
          EXPECT_NEAR(st, st_ref, tol.stress) << "stress component " << k;
        }
    }
    ++compared;
  }
  EXPECT_GT(compared, 20);
  EXPECT_GT(partial_stress, 2);  // the slab's stress, alone and in the batch
  EXPECT_GT(unwrapped, 2);       // inputs with atoms outside the cell: the engine wraps them itself
  EXPECT_EQ(random_roll_cases, 3);
  for (const auto& [dtype, m] : worst)
    std::printf("[parity %s %s] max %s %.3g, max |dF| %.3g eV/A, max |dsigma| %.3g eV/A^3\n",
                dtype.c_str(), merge ? "merged" : "unmerged",
                dtype == "float64" ? "|dE|/max(1,|E|)" : "|dE_interaction|/atoms (eV)", m[0], m[1],
                m[2]);
}

INSTANTIATE_TEST_SUITE_P(MergedAndUnmerged, FairchemParity, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "merged" : "unmerged"; });

}  // namespace
}  // namespace uma
