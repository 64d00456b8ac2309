// This process's peak resident memory in MB: VmHWM, which starts afresh at
// exec (ru_maxrss keeps the forking parent's high-water mark: a benchmark
// started from a Python process that had loaded a model would report it).
#pragma once

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace uma::tool {

inline double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

}  // namespace uma::tool
