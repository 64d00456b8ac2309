// How one evaluation (energy, forces, stress) fits in memory.
//
// The stored path keeps every block's per-edge activations for the backward
// pass: fastest, but about L x 20-33 kB per edge in fp32 for UMA-S (lean
// operators, composition) at inference.  The
// recomputed path keeps only each block's input node features and the graph,
// and runs the edge work in chunks, recomputing each chunk in the backward
// pass (edges/edge_chunks.h).  The plan picks the stored path when its predicted
// peak fits the budget, else the largest chunk that fits.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <torch/torch.h>

#include "model/model_config.h"
#include "edges/edge_backend.h"

namespace uma {

// Predicted bytes, from the model's shapes (doc/benchmarks.md compares them
// with measured peaks).  Frozen weights (inference) keep only what the
// gradients with respect to the positions need; trained weights also keep the
// inputs of the layers they weight.
struct MemoryModel {
  double per_node = 0;         // node features of all blocks and the head
  double per_edge_graph = 0;   // graph, edge vectors and their gradients (both paths)
  double per_edge_stored = 0;  // all blocks' activations (stored path)
  double per_edge_chunk = 0;   // one block's work while a chunk is recomputed
};
// edges: the backend of the blocks' edge work (its per-edge bytes).
MemoryModel memory_model(const BackboneConfig& config, torch::ScalarType dtype,
                         const edges::EdgeBackend& edges, bool weights_trained);

struct MemoryPlan {
  bool recompute = false;
  int64_t chunk_edges = 0;       // recompute: edges per chunk
  int64_t nodes = 0, edges = 0;  // what it was planned for (edges: graph capacity)
  double predicted_bytes =
      0;  // predicted peak of the evaluation (not counting the process baseline)
  double budget_bytes = 0;
  double asked_bytes = 0;        // the budget asked for, where more than the device had (else 0)
  std::string describe() const;  // one line for logs
};

// Smallest chunk the planner uses; below it, the evaluation does not fit.
constexpr int64_t kMinChunkEdges = 256;
// Largest chunk the planner uses: on a CPU, 16 k-edge chunks ran faster than
// 64 k-edge chunks and than the stored path (doc/benchmarks.md), and a larger
// chunk only costs memory.
constexpr int64_t kMaxChunkEdges = 16384;

// forced_chunk: -1 lets the budget decide; 0 forces the stored path; > 0
// forces recomputation in chunks of that many edges.  Throws uma::Error when
// the budget cannot hold even the recomputed path with the smallest chunk.
MemoryPlan plan_memory(const MemoryModel& model, int64_t nodes, int64_t edges, double budget_bytes,
                       int64_t forced_chunk = -1);

// Bytes that can still be allocated on `device` now: MemAvailable on the
// host, the driver's free memory on a GPU.
double available_memory(const torch::Device& device);

// The budget of one evaluation from the bytes asked for (0: 80% of what is
// available) and `available()`, the bytes available on the device, shared by
// `sharers` processes: never more than their share of what is available (a
// plan for memory the device does not have would run out of it mid-run).
// Where the device cannot be asked (available() throws), a budget asked for
// is taken as it is.
double evaluation_budget(double asked, const std::function<double()>& available, int sharers);

// The most bytes LibTorch's allocator has held allocated on GPU `device` at
// once since the process started or the last reset_device_peak; -1 on the CPU
// (its allocator keeps no such count).
double device_peak_bytes(const torch::Device& device);
// The bytes LibTorch's allocator holds allocated on GPU `device` now; -1 on the CPU.
double device_allocated_bytes(const torch::Device& device);
void reset_device_peak(const torch::Device& device);

}  // namespace uma
