#include "op_profile.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include <torch/cuda.h>

namespace uma::tool {
namespace {

using Clock = std::chrono::steady_clock;

struct Totals {
  double seconds = 0;
  int64_t calls = 0;
};
std::map<std::string, Totals> totals;
std::mutex totals_mutex;
// The thread that made the OpProfile: on the CPU the only one counted (the
// backward runs on it); on CUDA the autograd engine's device thread runs the
// backward, so every thread's operators are counted there.
std::thread::id profiled;
bool synchronized = false;   // each outermost operator waits for the CUDA device
thread_local int depth = 0;  // of counted calls on this thread

struct Started : at::ObserverContext {
  Clock::time_point t0 = Clock::now();
};

// ATen's operators and the lean edge operators (edges/lean_*.cpp).
bool counted(std::string_view name) {
  if (!synchronized && std::this_thread::get_id() != profiled) return false;
  return name.rfind("aten::", 0) == 0 || name.rfind("uma::lean::", 0) == 0;
}

std::unique_ptr<at::ObserverContext> begins(const at::RecordFunction& fn) {
  if (!counted(fn.name())) return nullptr;
  if (depth++ > 0) return nullptr;
  if (synchronized) torch::cuda::synchronize();  // what was queued before is not this operator's
  return std::make_unique<Started>();
}

void ends(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (!counted(fn.name())) return;
  --depth;
  if (!ctx) return;
  if (synchronized) torch::cuda::synchronize();  // its kernels have run
  const std::lock_guard<std::mutex> lock(totals_mutex);
  auto& t = totals[fn.name()];
  t.seconds += std::chrono::duration<double>(Clock::now() - static_cast<Started*>(ctx)->t0).count();
  ++t.calls;
}

}  // namespace

OpProfile::OpProfile(bool synchronize_cuda) {
  totals.clear();
  profiled = std::this_thread::get_id();
  synchronized = synchronize_cuda;
  handle_ = at::addGlobalCallback(
      at::RecordFunctionCallback(begins, ends).scopes({at::RecordScope::FUNCTION}));
}

OpProfile::~OpProfile() { at::removeCallback(handle_); }

nlohmann::json OpProfile::top(int top, int runs) const {
  std::vector<std::pair<double, std::string>> by_time;
  for (const auto& [name, t] : totals) by_time.emplace_back(t.seconds, name);
  std::sort(by_time.rbegin(), by_time.rend());
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < std::min<size_t>(by_time.size(), top); ++i) {
    const auto& t = totals.at(by_time[i].second);
    out.push_back({{"op", by_time[i].second},
                   {"ms", 1e3 * t.seconds / runs},
                   {"calls", static_cast<double>(t.calls) / runs}});
  }
  return out;
}

}  // namespace uma::tool
