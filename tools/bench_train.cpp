// `uma bench-train`: steady-state time, counted host reads and ATen operator
// calls of one training step (prints JSON).
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <string_view>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "device.h"
#include "model.h"
#include "train/trainer.h"
#include "training_data.h"
#include "transfers.h"

namespace uma::tool {
namespace {

std::atomic<int64_t> aten_calls{0};
std::map<std::string, int64_t> aten_names;  // with --ops: calls per operator
bool by_name = false;

std::unique_ptr<at::ObserverContext> count_aten(const at::RecordFunction& fn) {
  if (std::string_view(fn.name()).rfind("aten::", 0) == 0) {
    ++aten_calls;
    if (by_name) ++aten_names[fn.name()];
  }
  return nullptr;
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
  train::Trainer trainer(load_model(a.model), o);
  std::vector<int64_t> batch;
  for (const auto& s : read_training_data(a.data, "omat")) batch.push_back(trainer.add_sample(s));

  for (int i = 0; i < a.warmup; ++i) trainer.step(batch);
  trainer.read_stats();

  aten_calls = 0;
  by_name = a.ops;
  auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(count_aten).scopes({at::RecordScope::FUNCTION}));
  reset_transfer_counts();
  trainer.step(batch);
  const int64_t reads = host_read_count();
  at::removeCallback(handle);
  const int64_t op_count = aten_calls.load();

  std::vector<double> times;
  // On a GPU, step() only enqueues its work: each timing waits for the device.
  const bool cuda = o.device.is_cuda();
  for (int i = 0; i < a.steps; ++i) {
    if (cuda) torch::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    trainer.step(batch);
    if (cuda) torch::cuda::synchronize();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const auto stats = trainer.read_stats();
  std::sort(times.begin(), times.end());
  nlohmann::json out = {{"engine", "lammps-uma"},
                        {"seconds_per_step", times},
                        {"median_seconds", times[times.size() / 2]},
                        {"host_reads_per_step", reads},
                        {"aten_ops_per_step", op_count},
                        {"atoms",
                         [&] {
                           int64_t n = 0;
                           for (auto i : batch) n += trainer.sample(i).atoms.numbers.size();
                           return n;
                         }()},
                        {"loss", stats.loss},
                        {"threads", at::get_num_threads()}};
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
