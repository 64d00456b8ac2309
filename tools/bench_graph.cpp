// `uma bench-graph`: the radius graph of rattled fcc Cu supercells, built by
// the cell list (RadiusGraphBuilder) and by the brute-force reference, side by
// side in one process.  Not a test: it prints times (min/median/max over
// repeats) and how the cell list's time grows with the number of atoms.
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "commands.h"
#include "api/uma.h"
#include "measure/brute_force_graph.h"

namespace uma::tool {
namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  std::vector<double> all;
  double min() const { return *std::min_element(all.begin(), all.end()); }
  double median() const {
    auto s = all;
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  }
  double max() const { return *std::max_element(all.begin(), all.end()); }
  nlohmann::json json() const {
    return {{"min", min()}, {"median", median()}, {"max", max()}, {"all", all}};
  }
};

// n x n x n conventional fcc cells (4 atoms each), every atom moved by up to
// `rattle` A along each axis, wrapped into the cell.
std::vector<double> fcc_copper(int64_t n, double a, double rattle, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> shake(-rattle, rattle);
  const double basis[4][3] = {{0, 0, 0}, {0, 0.5, 0.5}, {0.5, 0, 0.5}, {0.5, 0.5, 0}};
  const double L = n * a;
  std::vector<double> pos;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < n; ++k)
        for (const auto& q : basis) {
          const double r[3] = {(i + q[0]) * a, (j + q[1]) * a, (k + q[2]) * a};
          for (double x : r) {
            x += shake(rng);
            pos.push_back(x - L * std::floor(x / L));
          }
        }
  return pos;
}

void wait_for(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

template <typename F>
Stats time_repeats(int repeats, const torch::Device& device, F&& f) {
  Stats s;
  for (int r = 0; r < repeats; ++r) {
    wait_for(device);
    const auto t0 = Clock::now();
    f();
    wait_for(device);
    s.all.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return s;
}

}  // namespace

int bench_graph(const BenchGraphArgs& a) {
  const torch::Device device = resolve_device(a.device);
  make_current(device);
  const auto dtype = parse_precision(a.precision).dtype;
  const double lattice = 3.615;
  torch::NoGradGuard no_grad;

  nlohmann::json sizes = nlohmann::json::array();
  if (!a.json)
    std::printf(
        "radius graph of rattled fcc Cu (a = %.3f A), cutoff %g A, max_neighbors %lld, %s %s, "
        "cell list: %d repeats after one warm-up build, brute force: %d repeats\n",
        lattice, a.cutoff, static_cast<long long>(a.max_neighbors), a.device.c_str(),
        a.precision.c_str(), a.repeats, a.brute_repeats);
  if (!a.json)
    std::printf("%8s %9s | %-28s | %-28s | %9s | %s\n", "atoms", "edges",
                "cell list s (min/med/max)", "brute force s (min/med/max)", "speed-up",
                "same graph");
  std::vector<std::pair<int64_t, double>> cell_medians;
  for (int64_t n : a.sizes) {
    const int64_t natoms = 4 * n * n * n;
    const double L = n * lattice;
    const auto host = fcc_copper(n, lattice, a.rattle, 1234 + static_cast<uint64_t>(n));
    auto pos = torch::tensor(host, torch::kFloat64).view({natoms, 3}).to(device, dtype);
    auto cells = torch::tensor(std::vector<double>{L, 0, 0, 0, L, 0, 0, 0, L}, torch::kFloat64)
                     .view({1, 3, 3})
                     .to(device);
    Matrix3 cell{};
    for (int k = 0; k < 3; ++k) cell[k][k] = L;
    const std::vector<GraphSystem> systems{{0, natoms, cell, {true, true, true}, -1}};

    RadiusGraphBuilder builder(a.cutoff, a.max_neighbors);
    wait_for(device);
    const auto t_first = Clock::now();
    RadiusGraph graph = builder.build(pos, cells, systems);  // warm-up: sizes the buffers (probe)
    wait_for(device);
    const double first_build = std::chrono::duration<double>(Clock::now() - t_first).count();
    const Stats cell_list =
        time_repeats(a.repeats, device, [&] { graph = builder.build(pos, cells, systems); });
    const int64_t edges = graph.counts.cpu()[0].item<int64_t>();
    const auto& cap = builder.graph_capacities()[0];

    nlohmann::json row = {
        {"n", n},
        {"atoms", natoms},
        {"edges", edges},
        {"capacity",
         {{"edges", cap.edges}, {"candidates", cap.candidates}, {"neighbors", cap.neighbors}}},
        {"cell_list_first_build", first_build},
        {"cell_list", cell_list.json()}};
    cell_medians.emplace_back(natoms, cell_list.median());
    char brute_text[64] = "skipped (--max-brute)", speedup[32] = "-", same[16] = "-";
    if (natoms <= a.max_brute) {
      // No warm-up: nothing is sized or cached, and at 10k atoms one build takes minutes.
      RadiusGraph ref;
      const Stats brute = time_repeats(a.brute_repeats, device, [&] {
        ref = brute_force_radius_graph(pos, cells, systems, builder.capacities(), a.cutoff,
                                       a.max_neighbors);
      });
      const bool identical = ref.src.equal(graph.src) && ref.tgt.equal(graph.tgt) &&
                             ref.offsets.equal(graph.offsets) && ref.valid.equal(graph.valid) &&
                             ref.counts.equal(graph.counts);
      row["brute_force"] = brute.json();
      row["speedup_median"] = brute.median() / cell_list.median();
      row["identical"] = identical;
      std::snprintf(brute_text, sizeof brute_text, "%.4f / %.4f / %.4f", brute.min(),
                    brute.median(), brute.max());
      std::snprintf(speedup, sizeof speedup, "%.1fx", brute.median() / cell_list.median());
      std::snprintf(same, sizeof same, "%s", identical ? "yes" : "NO");
    } else {
      row["brute_force"] = nullptr;
      row["note"] =
          "brute force skipped: more atoms than --max-brute " + std::to_string(a.max_brute);
    }
    if (!a.json) {
      char cell_text[64];
      std::snprintf(cell_text, sizeof cell_text, "%.4f / %.4f / %.4f", cell_list.min(),
                    cell_list.median(), cell_list.max());
      std::printf("%8lld %9lld | %-28s | %-28s | %9s | %s\n", static_cast<long long>(natoms),
                  static_cast<long long>(edges), cell_text, brute_text, speedup, same);
      std::fflush(stdout);
    }
    sizes.push_back(row);
  }

  nlohmann::json out = {{"lattice", lattice},
                        {"cutoff", a.cutoff},
                        {"max_neighbors", a.max_neighbors},
                        {"device", a.device},
                        {"precision", a.precision},
                        {"repeats", a.repeats},
                        {"brute_repeats", a.brute_repeats},
                        {"rattle", a.rattle},
                        {"max_brute", a.max_brute},
                        {"sizes", sizes}};
  if (cell_medians.size() >= 2) {
    const auto& first = cell_medians.front();
    const auto& last = cell_medians.back();
    out["cell_list_growth"] = last.second / first.second;
    out["atoms_growth"] = double(last.first) / double(first.first);
    if (!a.json)
      std::printf("cell list, %lld -> %lld atoms (%.1fx): median time grows %.1fx\n",
                  static_cast<long long>(first.first), static_cast<long long>(last.first),
                  double(last.first) / double(first.first), last.second / first.second);
  }
  const bool skipped = std::any_of(a.sizes.begin(), a.sizes.end(),
                                   [&](int64_t n) { return 4 * n * n * n > a.max_brute; });
  if (!a.json && skipped)
    std::printf("note: brute force skipped above %lld atoms (--max-brute)\n",
                static_cast<long long>(a.max_brute));
  if (a.json) std::cout << out.dump(1) << "\n";
  return 0;
}

}  // namespace uma::tool
