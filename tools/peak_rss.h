// Peak memory for the tools' reports: this process's peak resident memory (VmHWM,
// which starts afresh at exec; ru_maxrss keeps the forking parent's high-water
// mark: a benchmark started from a Python process that had loaded a model
// would report it) and LibTorch's peak on a GPU.
#pragma once

#include <sys/resource.h>

#include <fstream>
#include <string>

#include "api/uma.h"

namespace uma::tool {

inline double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

// The most memory LibTorch's allocator has held on GPU `device` (MB); -1 on the CPU.
inline double peak_device_mb(const torch::Device& device) {
  const double bytes = device_peak_bytes(device);
  return bytes < 0 ? -1.0 : bytes / (1024.0 * 1024.0);
}

// What LibTorch's allocator holds on GPU `device` now (MB); -1 on the CPU.
inline double device_allocated_mb(const torch::Device& device) {
  const double bytes = device_allocated_bytes(device);
  return bytes < 0 ? -1.0 : bytes / (1024.0 * 1024.0);
}

}  // namespace uma::tool
