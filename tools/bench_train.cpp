// `uma bench-train`: steady-state time, counted host reads and ATen operator
// calls of one training step (prints JSON).
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string_view>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "api/uma.h"
#include "op_profile.h"
#include "peak_rss.h"

namespace uma::tool {
namespace {

std::atomic<int64_t> aten_calls{0};
std::map<std::string, int64_t> aten_names;  // with --ops: calls per operator
bool by_name = false;

std::string current_phase = "other";              // of the step being counted
std::map<std::string, int64_t> phase_aten_calls;  // with --phases: ATen calls per phase

std::unique_ptr<at::ObserverContext> count_aten(const at::RecordFunction& fn) {
  if (std::string_view(fn.name()).rfind("aten::", 0) == 0) {
    ++aten_calls;
    if (by_name) ++aten_names[fn.name()];
    ++phase_aten_calls[current_phase];
  }
  return nullptr;
}

// With --phases: seconds per phase of Trainer::step (train/step_phase.h).
using Clock = std::chrono::steady_clock;
std::map<std::string, double> phase_seconds;

struct PhaseStart : at::ObserverContext {
  Clock::time_point t0 = Clock::now();
};

std::unique_ptr<at::ObserverContext> phase_begins(const at::RecordFunction& fn) {
  if (std::string_view(fn.name()).rfind("uma::train::", 0) != 0) return nullptr;
  current_phase = std::string(fn.name()).substr(12);
  return std::make_unique<PhaseStart>();
}

void phase_ends(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (!ctx) return;
  const auto t0 = static_cast<PhaseStart*>(ctx)->t0;
  phase_seconds[std::string(fn.name()).substr(12)] +=
      std::chrono::duration<double>(Clock::now() - t0).count();
  current_phase = "other";
}

std::optional<at::CallbackHandle> time_phases(bool on) {
  if (!on) return std::nullopt;
  return at::addGlobalCallback(
      at::RecordFunctionCallback(phase_begins, phase_ends).scopes({at::RecordScope::USER_SCOPE}));
}

}  // namespace

int bench_train(const BenchTrainArgs& a) {
  train::TrainOptions o;
  o.device = resolve_device(a.device);
  // fairchem's perf_check task settings.
  o.loss.energy_coefficient = 10;
  o.loss.forces_coefficient = 50;
  o.loss.stress_coefficient = 5;
  o.loss.forces_reduction = train::Reduction::kPerStructure;
  o.optimizer.lr = 0.1;
  o.optimizer.weight_decay = 0;
  o.optimizer.ema_decay = 0.999;
  o.optimizer.clip_norm = 100;
  o.edge_ops = edges::parse_edge_ops(a.edge_ops);
  o.recompute_chunk = a.recompute;
  train::Trainer trainer(load_model(a.model), o);
  const auto data = read_training_data(a.data, "omat");
  int64_t atoms = 0;
  for (const auto& s : data) atoms += static_cast<int64_t>(s.atoms.numbers.size());
  // Every step trains on every frame: the sampler's one batch holds them all,
  // in the file's order.
  train::TrainingLoop loop(
      trainer, train::MaxAtomsSampler(std::max<int64_t>(atoms, 1), o.seed, 1, 0, /*shuffle=*/false),
      "--max-atoms");
  for (const auto& s : data) loop.add(s, /*held_out=*/false);

  for (int i = 0; i < a.warmup; ++i) loop.steps(1);
  trainer.read_stats();

  aten_calls = 0;
  by_name = a.ops;
  auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(count_aten).scopes({at::RecordScope::FUNCTION}));
  auto phases = time_phases(a.phases);
  reset_transfer_counts();
  loop.steps(1);
  const int64_t reads = host_read_count();
  at::removeCallback(handle);
  if (phases) at::removeCallback(*phases);
  phase_seconds.clear();  // the counted step is not timed
  const int64_t op_count = aten_calls.load();

  std::vector<double> times;
  // On a GPU, step() only enqueues its work: each timing waits for the device
  // (the phases then time what the host spends enqueueing).
  const bool cuda = o.device.is_cuda();
  nlohmann::json profile;
  if (a.profile) {
    OpProfile ops(/*synchronize_cuda=*/cuda);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < a.steps; ++i) loop.steps(1);
    profile = {{"ms_per_step",
                1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                    a.steps},
               {"top_ops", ops.top(25, a.steps)}};
  }
  phases = time_phases(a.phases);
  for (int i = 0; i < a.steps; ++i) {
    if (cuda) torch::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    loop.steps(1);
    if (cuda) torch::cuda::synchronize();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (phases) at::removeCallback(*phases);
  const auto stats = trainer.read_stats();
  std::sort(times.begin(), times.end());
  nlohmann::json out = {{"engine", "lammps-uma"},
                        {"seconds_per_step", times},
                        {"median_seconds", times[times.size() / 2]},
                        {"host_reads_per_step", reads},
                        {"aten_ops_per_step", op_count},
                        {"atoms", atoms},
                        {"loss", stats.loss},
                        {"edge_ops", trainer.edge_backend().name()},
                        {"recompute", a.recompute},
                        {"peak_rss_mb", peak_rss_mb()},
                        {"peak_device_mb", peak_device_mb(o.device)},
                        {"threads", at::get_num_threads()}};
  if (a.phases) {
    nlohmann::json per_step = nlohmann::json::object();
    for (const auto& [name, seconds] : phase_seconds) per_step[name] = seconds / a.steps;
    out["phase_seconds_per_step"] = per_step;
    out["phase_aten_ops"] = phase_aten_calls;
  }
  if (a.profile) out["profile"] = profile;
  if (a.ops) {
    std::vector<std::pair<int64_t, std::string>> top;
    for (const auto& [name, n] : aten_names) top.emplace_back(n, name);
    std::sort(top.rbegin(), top.rend());
    nlohmann::json ops = nlohmann::json::object();
    for (size_t i = 0; i < std::min<size_t>(top.size(), 40); ++i) ops[top[i].second] = top[i].first;
    out["top_ops"] = ops;
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace uma::tool
