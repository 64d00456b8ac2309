#include "engine/memory_plan.h"

#include <c10/core/CachingDeviceAllocator.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/uma_error.h"

namespace uma {

MemoryModel memory_model(const BackboneConfig& c, torch::ScalarType dtype,
                         const edges::EdgeBackend& edges, bool weights_trained) {
  const double s = static_cast<double>(c10::elementSize(dtype));
  const double C = c.sphere_channels, H = c.hidden_channels, Ec = c.edge_channels,
               K = c.num_distance_basis;
  const double L = c.num_layers;
  MemoryModel m;
  // Per block and node: input, normed input, summed messages and residual
  // (4 x 9C), the spectral feed-forward's hidden rows (9H); trained weights
  // also keep the inputs of the feed-forward's two linear maps (9C + 9H).
  // The final norm and head.
  m.per_node = s * (L * (4 * 9 * C + 9 * H) + 4 * 9 * C);
  if (weights_trained) m.per_node += s * L * (9 * C + 9 * H);
  // Indices (3 x int64 + a flag), the edge vector, dE/dr and r (x) dE/dr in float64.
  m.per_edge_graph = 3 * 8 + 1 + 6 * s + 2 * 9 * 8;
  const edges::EdgeWidths widths{C, H, Ec, K};
  const double frame = edges.frame_bytes(widths, s);
  double block = edges.block_bytes(widths, s, weights_trained);
  // The degree embedding's radial MLP (its two fused layer norms' and
  // activations' inputs) and output.
  double degree = s * (2 * Ec + 3 * C);
  if (weights_trained) {
    // The inputs of the layers whose weights get gradients: each block's two
    // SO(2) convolutions (the rotated message, 9 x 2C, and the gated rows, 9H)
    // and its radial MLP's inner layers (2Ec), the degree MLP's too; and the
    // radial MLPs' layer norms unfused (their outputs kept for SiLU, 2Ec):
    // a radial MLP fuses them where its weights are frozen, and the engine
    // freezes all weights or none (the trainer's).
    block += s * (18 * C + 9 * H + 4 * Ec);
    degree += s * 4 * Ec;
  }
  // At the peak, the last block's rotated message (9 x 2C) is alive besides
  // what every block keeps, until its first convolution has run.
  m.per_edge_stored = frame + degree + L * block + s * 18 * C;
  // Recomputing a chunk: one block's work, its frame, and the gradients that
  // flow back through the largest activations (about 2 x 18C).
  m.per_edge_chunk = frame + block + s * 36 * C;
  return m;
}

std::string MemoryPlan::describe() const {
  char buf[384];
  const double gb = 1e-9;
  if (recompute)
    std::snprintf(buf, sizeof buf,
                  "recomputed edge work in chunks of %lld edges (%lld atoms, %lld edge slots): "
                  "predicted peak %.2f GB, budget %.2f GB",
                  static_cast<long long>(chunk_edges), static_cast<long long>(nodes),
                  static_cast<long long>(edges), predicted_bytes * gb, budget_bytes * gb);
  else
    std::snprintf(
        buf, sizeof buf,
        "stored activations (%lld atoms, %lld edge slots): predicted peak %.2f GB, budget %.2f GB",
        static_cast<long long>(nodes), static_cast<long long>(edges), predicted_bytes * gb,
        budget_bytes * gb);
  std::string line = buf;
  if (asked_bytes > budget_bytes) {
    std::snprintf(buf, sizeof buf, " (%.2f GB asked for: more than available to this process)",
                  asked_bytes * gb);
    line += buf;
  }
  return line;
}

MemoryPlan plan_memory(const MemoryModel& m, int64_t nodes, int64_t edges, double budget_bytes,
                       int64_t forced_chunk) {
  MemoryPlan plan;
  plan.nodes = nodes;
  plan.edges = edges;
  plan.budget_bytes = budget_bytes;
  const double fixed = m.per_node * nodes + m.per_edge_graph * edges;
  const double stored = fixed + m.per_edge_stored * edges;
  auto recompute_with = [&](int64_t chunk) {
    plan.recompute = true;
    plan.chunk_edges = std::max<int64_t>(1, std::min(chunk, edges));
    plan.predicted_bytes = fixed + m.per_edge_chunk * plan.chunk_edges;
    return plan;
  };
  if (forced_chunk == 0 || (forced_chunk < 0 && stored <= budget_bytes)) {
    plan.predicted_bytes = stored;
    return plan;
  }
  if (forced_chunk > 0) return recompute_with(forced_chunk);
  const double room = budget_bytes - fixed;
  const double chunk = std::floor(room / m.per_edge_chunk);
  if (!(chunk >= static_cast<double>(std::min<int64_t>(kMinChunkEdges, edges)))) {
    std::ostringstream msg;
    msg.precision(3);
    msg << "the evaluation of " << nodes << " atoms (" << edges << " edge slots) needs at least "
        << (fixed + m.per_edge_chunk * std::min<int64_t>(kMinChunkEdges, edges)) * 1e-9
        << " GB even when recomputed in chunks, but the memory budget is " << budget_bytes * 1e-9
        << " GB; raise the budget (pair_style uma ... memory GB, uma eval --memory GB) or use more "
           "processes";
    throw Error(msg.str());
  }
  return recompute_with(
      static_cast<int64_t>(std::min<double>(chunk, static_cast<double>(kMaxChunkEdges))));
}

namespace {

double host_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024.0;
  throw Error("cannot read MemAvailable from /proc/meminfo; set the memory budget explicitly");
}

// cudaMemGetInfo from the CUDA runtime LibTorch has loaded (no CUDA headers needed).
double cuda_available() {
  using MemGetInfo = int (*)(size_t*, size_t*);
  for (const char* lib : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}) {
    void* handle = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) continue;
    auto get = reinterpret_cast<MemGetInfo>(dlsym(handle, "cudaMemGetInfo"));
    size_t free = 0, total = 0;
    const int status = get ? get(&free, &total) : -1;
    dlclose(handle);
    if (status == 0) return static_cast<double>(free);
  }
  throw Error(
      "cannot query the GPU's free memory (no CUDA runtime loaded); set the memory budget "
      "explicitly");
}

}  // namespace

double available_memory(const torch::Device& device) {
  return device.is_cuda() ? cuda_available() : host_available();
}

double evaluation_budget(double asked, const std::function<double()>& available, int sharers) {
  const int share = std::max(1, sharers);
  if (asked <= 0) return 0.8 * available() / share;
  try {
    return std::min(asked, available() / share);
  } catch (const Error&) {
    return asked;
  }
}

// Through c10's device-generic allocator interface: no CUDA header needed.
double device_peak_bytes(const torch::Device& device) {
  if (device.is_cpu()) return -1;
  const auto stats = c10::getDeviceAllocator(device.type())
                         ->getDeviceStats(device.has_index() ? device.index() : 0);
  return static_cast<double>(stats.allocated_bytes[0].peak);  // [0]: all pools together
}

double device_allocated_bytes(const torch::Device& device) {
  if (device.is_cpu()) return -1;
  const auto stats = c10::getDeviceAllocator(device.type())
                         ->getDeviceStats(device.has_index() ? device.index() : 0);
  return static_cast<double>(stats.allocated_bytes[0].current);
}

void reset_device_peak(const torch::Device& device) {
  if (device.is_cpu()) return;
  c10::getDeviceAllocator(device.type())->resetPeakStats(device.has_index() ? device.index() : 0);
}

}  // namespace uma
