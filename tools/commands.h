// Subcommands of the uma tool that live in their own files.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace uma::tool {

struct BenchArgs {
  std::string model, structure, task = "omat", precision = "fp32", device = "cpu";
  int repeats = 5;
  bool merge = true;
  double memory_gb = 0;  // 0: automatic
  int64_t chunk = 0;     // > 0: recompute in chunks of this many edges (overrides the plan)
  std::string edge_ops = "lean";  // lean or reference (EngineOptions::edge_ops)
  bool cuda_graph = false;        // replay a CUDA graph of the step (EngineOptions::cuda_graph)
  bool profile = false;           // also time the outermost ATen operators (op_profile.h)
};

struct TrainArgs {
  std::string model, data, out, validate, task, device = "cpu";
  std::string raw_out;  // also the raw weights (--out holds the averaged ones when ema > 0)
  int64_t steps = 100, max_atoms = 200, print_every = 10;
  bool shuffle = true;
  // (name, value) of the training options given, in order: uma::train's
  // option table (train/option_table.h), shared with fix uma/train.
  std::vector<std::pair<std::string, std::string>> options;
};

// Trains on labelled extxyz and writes the model file.
int train(const TrainArgs& args);

struct TestArgs {
  std::string model, data, task;
};

// MAEs of a model against labelled extxyz.
int test(const TestArgs& args);

struct BenchTrainArgs {
  std::string model, data, device = "cpu";
  int steps = 5, warmup = 2;
  bool ops = false;               // also list the most frequent ATen operators
  bool phases = false;            // also time the step's phases (train/step_phase.h)
  bool profile = false;           // also time the outermost ATen operators (op_profile.h)
  std::string edge_ops = "lean";  // lean or reference (TrainOptions::edge_ops)
  int64_t recompute = 0;          // TrainOptions::recompute_chunk
};

// Times training steps on one fixed batch and counts host reads and ATen ops.
int bench_train(const BenchTrainArgs& args);

// Times repeated evaluations of one structure and prints one JSON object.
int bench(const BenchArgs& args);

struct BenchGraphArgs {
  std::vector<int64_t> sizes{6, 13, 25};  // fcc supercells n x n x n (4 n^3 atoms)
  int repeats = 5, brute_repeats = 3;
  int64_t max_brute = 2000;  // atoms: larger sizes skip the brute force
  int64_t max_neighbors = 30;
  double cutoff = 6.0, rattle = 0.05;
  std::string device = "cpu", precision = "fp32";
  bool json = false;
};

// Times the cell-list radius graph against the brute-force reference on fcc Cu.
int bench_graph(const BenchGraphArgs& args);

struct InitArgs {
  std::string config, out;
  uint64_t seed = 2026;
};

// Writes a model file with seeded random weights for a model configuration.
int init(const InitArgs& args);

}  // namespace uma::tool
