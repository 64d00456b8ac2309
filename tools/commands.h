// Subcommands of the uma tool that live in their own files.
#pragma once

#include <string>

namespace uma::tool {

struct BenchArgs {
  std::string model, structure, task = "omat", precision = "fp32";
  int repeats = 5;
  bool merge = true;
};

// Times repeated evaluations of one structure and prints one JSON object.
int bench(const BenchArgs& args);

}  // namespace uma::tool
