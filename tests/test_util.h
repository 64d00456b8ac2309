// Helpers shared by the test programs.
#pragma once

#include <cstdlib>
#include <stdexcept>

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "runtime/device.h"
#include "engine/engine.h"
#include "core/uma_error.h"
#include "model/model.h"

#if __has_include(<cuda_runtime_api.h>)
#include <c10/cuda/CUDAFunctions.h>
#define UMA_TEST_HAS_CUDA_HEADERS 1
#endif

namespace uma::test {

// The device the parity, physics, transfer-budget and training tests run
// on: $UMA_TEST_DEVICE (cpu, cuda or cuda:N), CPU by default.
inline torch::Device test_device() {
  const char* env = std::getenv("UMA_TEST_DEVICE");
  return resolve_device(env && *env ? env : "cpu");
}

// While alive on a CUDA test device, any synchronisation between the host
// and the GPU (a blocking copy, an .item(), a data-dependent shape) throws:
// LibTorch's synchronisation debug mode, set to error.  On the CPU it does
// nothing; the transfer counters carry the check there.
class NoSyncGuard {
 public:
  NoSyncGuard() {
#ifdef UMA_TEST_HAS_CUDA_HEADERS
    if (test_device().is_cuda()) {
      c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
      active_ = true;
    }
#else
    // Built without the CUDA headers, the guard cannot arm: a CUDA test run
    // would then prove nothing about synchronisations, so it fails here.
    if (test_device().is_cuda())
      throw std::runtime_error(
          "UMA_TEST_DEVICE is a CUDA device, but the tests were built without "
          "cuda_runtime_api.h, so the synchronisation guard cannot be armed");
#endif
  }
  bool active() const { return active_; }
  ~NoSyncGuard() {
#ifdef UMA_TEST_HAS_CUDA_HEADERS
    if (active_)
      c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
#endif
  }
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;

 private:
  bool active_ = false;
};

// Parity fixtures: $UMA_FIXTURES_DIR (the test command regenerates them
// through fairchem) or, without it, the committed $UMA_SOURCE_DIR/tests/fixtures
// (ctest sets UMA_SOURCE_DIR: no source path is compiled in).
inline std::string fixtures_dir() {
  const char* fixtures = std::getenv("UMA_FIXTURES_DIR");
  if (fixtures && *fixtures) return fixtures;
  const char* source = std::getenv("UMA_SOURCE_DIR");
  if (!source || !*source)
    throw std::runtime_error(
        "set UMA_FIXTURES_DIR or UMA_SOURCE_DIR (ctest sets it) to find the parity fixtures");
  return std::string(source) + "/tests/fixtures";
}

// A small UMA-S-shaped configuration (same structure, tiny widths).
inline nlohmann::json small_config(int experts = 4, bool dataset_head = false,
                                   bool charge_balance = false, int max_neighbors = 300) {
  nlohmann::json b = {{"max_num_elements", 100},
                      {"sphere_channels", 8},
                      {"hidden_channels", 12},
                      {"lmax", 2},
                      {"mmax", 2},
                      {"num_layers", 2},
                      {"edge_channels", 6},
                      {"num_distance_basis", 10},
                      {"cutoff", 5.0},
                      {"num_experts", experts},
                      {"max_neighbors", max_neighbors},
                      {"use_composition_embedding", true},
                      {"act_type", "gate"},
                      {"ff_type", "spectral"},
                      {"norm_type", "rms_norm_sh"},
                      {"chg_spin_emb_type", "rand_emb"},
                      {"dataset_mapping", {{"omat", "omat"}, {"omol", "omol"}, {"oc20", "oc20"}}}};
  if (charge_balance) b["charge_balanced_channels"] = {0, 1, 2};
  nlohmann::json j = {{"model_id", "test"}, {"backbone", b}};
  if (dataset_head)
    j["head"] = {{"kind", "dataset_moe"}, {"datasets", {"oc20", "omat", "omol"}}};
  else
    j["head"] = {{"kind", "single"}};
  j["tasks"] = nlohmann::json::array();
  for (const char* ds : {"omat", "omol", "oc20"})
    for (const char* prop : {"energy", "forces", "stress"})
      j["tasks"].push_back({{"name", std::string(ds) + "_" + prop},
                            {"property", prop},
                            {"datasets", {ds}},
                            {"normalizer", {{"mean", 0.0}, {"rmsd", 1.5}}}});
  return j;
}

// Random weights, large enough that every path matters.
inline UmaModel random_model(const nlohmann::json& config, uint64_t seed = 7) {
  torch::manual_seed(seed);
  UmaModel model(parse_model_config(config.dump()));
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters()) {
    const auto& t = p.value();
    const double a = t.dim() >= 2 ? 1.0 / std::sqrt(double(t.size(-1))) : 0.5;
    t.uniform_(-a, a);
    if (p.key().find("embedding") != std::string::npos && t.dim() == 2 && t.size(0) >= 100)
      t.uniform_(-0.5, 0.5);
  }
  return model;
}

// For a failed bitwise comparison of two models' weights: the largest
// absolute difference and the parameter that holds it.
inline std::string largest_weight_difference(const UmaModel& a, const UmaModel& b) {
  const auto theirs = b->named_parameters();
  double worst = 0;
  std::string where = "none";
  for (const auto& p : a->named_parameters()) {
    const double d = (p.value() - theirs[p.key()]).abs().max().item<double>();
    if (d > worst) worst = d, where = p.key();
  }
  return "largest weight difference " + std::to_string(worst) + " in " + where;
}

// As random_model, with an energy mean and element references in every
// dataset: per-atom energy shifts that a lost or misplaced shift would show.
inline UmaModel random_model_with_references(nlohmann::json config, uint64_t seed = 7) {
  for (auto& task : config["tasks"])
    if (task["property"] == "energy") task["normalizer"]["mean"] = 0.37;
  UmaModel model = random_model(config, seed);
  for (const char* ds : {"omat", "omol", "oc20"})
    model->set_element_references(ds, torch::linspace(-3.0, 1.0, 100, torch::kFloat64));
  return model;
}

inline Atoms atoms_from(const std::vector<int64_t>& z, const std::vector<double>& pos,
                        const Matrix3& cell, std::array<bool, 3> pbc, const std::string& task,
                        int64_t charge = 0, int64_t spin = 0) {
  Atoms a;
  a.numbers = z;
  a.positions = torch::tensor(pos, torch::kFloat64).view({-1, 3}).clone();
  a.cell = cell;
  a.pbc = pbc;
  a.task = task;
  a.charge = charge;
  a.spin = spin;
  return a;
}

// fcc Cu conventional cell (4 atoms), rattled.
inline Atoms copper_cell(double rattle = 0.07, uint64_t seed = 3) {
  const double a = 3.61;
  std::vector<double> pos = {0, 0, 0, 0, a / 2, a / 2, a / 2, 0, a / 2, a / 2, a / 2, 0};
  torch::manual_seed(seed);
  auto noise = torch::empty({12}, torch::kFloat64).uniform_(-rattle, rattle);
  for (int i = 0; i < 12; ++i) pos[i] += noise[i].item<double>();
  return atoms_from({29, 29, 29, 29}, pos, {{{a, 0, 0}, {0, a, 0}, {0, 0, a}}}, {true, true, true},
                    "omat");
}

// n x n x n conventional fcc Cu cells (4 n^3 atoms), rattled.
inline Atoms copper_supercell(int64_t n) {
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

// Skewed triclinic cell with two elements.
inline Atoms triclinic_cell() {
  return atoms_from({13, 8, 8}, {0.1, 0.2, 0.3, 1.9, 0.4, 0.7, 0.9, 1.8, 1.6},
                    {{{3.1, 0.0, 0.0}, {1.4, 2.9, 0.0}, {0.8, -1.1, 3.3}}}, {true, true, true},
                    "omat");
}

// A small molecule without periodicity.
inline Atoms molecule(int64_t charge = 1, int64_t spin = 2) {
  return atoms_from({6, 8, 1, 1, 7},
                    {0, 0, 0, 1.22, 0.05, 0, -0.55, 0.93, 0.1, -0.5, -0.95, -0.1, 0.3, 0.2, 1.4},
                    {}, {false, false, false}, "omol", charge, spin);
}

// Expects uma::Error whose message contains `needle`.
template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

}  // namespace uma::test
