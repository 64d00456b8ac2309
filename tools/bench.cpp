// `uma bench`: steady-state timing of one structure, model FLOP rate, a plain
// GEMM rate measured in the same process, and peak memory.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "api/uma.h"
#include "peak_rss.h"
#include "measure/storage_meter.h"
#include "op_profile.h"

namespace uma::tool {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Multiply-adds x 2 of the per-edge GEMMs of one forward pass (lmax = mmax = 2),
// counted from the layer shapes: radial MLP, SO(2) convolutions, and the
// block-diagonal Wigner rotations (35 non-zeros of 9x9).
double forward_flops_per_edge(const BackboneConfig& b) {
  const double C = b.sphere_channels, H = b.hidden_channels, E = b.edge_channels,
               K = b.num_distance_basis;
  const double radial = (K + 2 * E) * E + E * E;
  const double conv1_radial = radial + E * (6 * 2 * C);
  const double conv1 =
      3 * 2 * C * (3 * H + 2 * H) + 2 * (2 * 2 * C) * (2 * 2 * H) + 2 * (2 * C) * (2 * H);
  const double conv2 = 3 * H * 3 * C + 2 * (2 * H) * (2 * 2 * C) + 2 * H * 2 * C;
  const double rotations = 35 * 2 * C + 35 * C;
  const double per_block = conv1_radial + conv1 + conv2 + rotations;
  const double degree = radial + E * 3 * C + 35 * C;
  return 2 * (b.num_layers * per_block + degree);
}

double forward_flops_per_atom(const BackboneConfig& b) {
  const double C = b.sphere_channels, H = b.hidden_channels;
  const double atomwise = C * 2 * H + 9 * C * H + 9 * H * C;
  const double head = C * H + H * H + H;
  return 2 * (b.num_layers * atomwise + head);
}

template <typename F>
std::vector<double> time_repeats(int repeats, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(seconds_since(t0));
  }
  return t;
}

nlohmann::json stats(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return {{"min", t.front()}, {"median", t[t.size() / 2]}, {"max", t.back()}, {"all", t}};
}

}  // namespace

int bench(const BenchArgs& a) {
  EngineOptions opt;
  opt.device = resolve_device(a.device);
  opt.set_precision(parse_precision(a.precision));
  opt.merge_mole = a.merge;
  opt.memory_budget = a.memory_gb * 1e9;
  if (a.chunk > 0) opt.recompute_chunk = a.chunk;
  opt.edge_ops = edges::parse_edge_ops(a.edge_ops);
  opt.cuda_graph = a.cuda_graph;
  const auto t_load = Clock::now();
  Engine engine(load_model(a.model), opt);
  const double load_s = seconds_since(t_load);
  const double loaded_rss_mb =
      peak_rss_mb();  // the process baseline: libraries, model, file reading
  // What the loaded model holds on the GPU: the measured peak less this is the
  // evaluation's own, what the memory plan predicts.
  const double resident_device_mb = device_allocated_mb(opt.device);
  const auto frame = read_extxyz(a.structure).at(0);
  Atoms atoms = frame_atoms(frame);
  atoms.task = a.task;
  atoms.spin = default_spin(a.task);

  const auto t_first = Clock::now();
  auto first = evaluate_on_host(engine, {atoms});
  const double first_s = seconds_since(t_first);
  // Bytes of CPU storage allocated by one evaluation, in all and in blocks of
  // at least 32 float32 values per edge slot (the edge-sized tensors).
  const int64_t slots = engine.stats().edge_capacities.at(0);
  double alloc_mb = -1, edge_alloc_mb = -1;
  if (opt.device.is_cpu()) {
    CpuStorageMeter meter(32 * 4 * slots);
    evaluate_on_host(engine, {atoms});
    alloc_mb = meter.allocated() / (1024.0 * 1024.0);
    edge_alloc_mb = meter.allocated_large() / (1024.0 * 1024.0);
  }
  const auto times = time_repeats(a.repeats, [&] { evaluate_on_host(engine, {atoms}); });
  nlohmann::json profile;
  if (a.profile) {
    OpProfile ops(/*synchronize_cuda=*/opt.device.is_cuda());
    const auto t0 = Clock::now();
    for (int i = 0; i < a.repeats; ++i) evaluate_on_host(engine, {atoms});
    profile = {{"ms_per_step", 1e3 * seconds_since(t0) / a.repeats},
               {"top_ops", ops.top(25, a.repeats)}};
  }

  const auto& cfg = engine.model()->config().backbone;
  const int64_t edges = first.edges[0];
  const int64_t natoms = static_cast<int64_t>(atoms.numbers.size());
  // forward + input-gradient backward: each GEMM runs once more for dX
  const double flops =
      2.0 * (forward_flops_per_edge(cfg) * edges + forward_flops_per_atom(cfg) * natoms);
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];

  // Peak memory of loading and evaluating, before the GEMM below allocates.
  const double evaluation_peak_mb = peak_rss_mb();
  // A plain float32 GEMM of similar size: [edges, 512] x [512, 512].
  // (On a GPU each timed product ends with a read of one element, so that the
  // time covers the kernel.)
  auto A =
      torch::randn({std::max<int64_t>(edges, 512), 512}, torch::TensorOptions().device(opt.device));
  auto B = torch::randn({512, 512}, torch::TensorOptions().device(opt.device));
  auto gemm = [&] { torch::mm(A, B)[0][0].item<float>(); };
  gemm();
  const auto gemm_t = time_repeats(5, gemm);
  const double gemm_flops = 2.0 * A.size(0) * 512.0 * 512.0;
  const double gemm_best = *std::min_element(gemm_t.begin(), gemm_t.end());

  const EngineStats es = engine.stats();
  nlohmann::json out = {
      {"engine", "lammps-uma"},
      {"atoms", natoms},
      {"edges", edges},
      {"edge_slots", slots},
      {"threads", torch::get_num_threads()},
      {"device", opt.device.str()},
      {"precision", a.precision},
      {"ms_per_step", 1e3 * median},
      {"edge_ops", es.edge_backend->name()},
      {"cuda_graph", opt.cuda_graph},
      {"graph_captures", es.graph_captures},
      {"graph_replays", es.graph_replays},
      {"graph_refusal", es.graph_refusal},
      {"graph_pool_mb", es.graph_held_bytes / 1e6},  // device memory the held captures keep
      // a captured step's nodes: its launches when run eagerly, one graph launch replayed
      {"step_kernels", es.graph_nodes.kernels},
      {"step_memory_ops", es.graph_nodes.memory},
      {"alloc_mb_per_eval", alloc_mb},
      {"edge_alloc_mb_per_eval", edge_alloc_mb},
      {"steps_per_s", 1.0 / median},
      {"peak_device_mb", peak_device_mb(opt.device)},
      {"resident_device_mb", resident_device_mb},
      {"load_s", load_s},
      {"first_call_s", first_s},
      {"time_s", stats(times)},
      {"model_gflop", flops / 1e9},
      {"model_gflops_per_s", flops / median / 1e9},
      {"gemm_gflops_per_s", gemm_flops / gemm_best / 1e9},
      {"peak_rss_mb", evaluation_peak_mb},
      {"baseline_rss_mb", loaded_rss_mb},
      {"memory_plan", es.memory_plan.describe()},
      {"recomputed", es.memory_plan.recompute},
      {"chunk_edges", es.memory_plan.chunk_edges},
      {"predicted_peak_mb", es.memory_plan.predicted_bytes / (1024.0 * 1024.0)},
      {"energy", first.energy[0]},
  };
  if (a.profile) out["profile"] = profile;
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace uma::tool
