// One evaluation recorded as a CUDA graph and replayed (CUDA builds only).
//
// capture() runs `step` once eagerly on a side stream (the warm-up CUDA
// graphs need: lazy initialisations and the allocator's first blocks happen
// outside the capture), then records it into a graph whose memory comes
// from the graph's private pool; the tensors `step` wrote stay valid, and
// replay() recomputes them in place from whatever its input tensors hold
// then.  Everything runs ordered with the current stream, so the caller's
// uploads before and reads after need no synchronisation of their own.
#pragma once

#include <functional>
#include <memory>

#include <torch/torch.h>

namespace uma {

// Whether this build of the engine can capture (it was compiled with the
// CUDA headers; the LAMMPS root's toolchain, for one, has none).
bool cuda_graphs_built();

class CudaGraph {
 public:
  // Throws uma::Error if the build cannot capture or `step` cannot be
  // captured (an operator that synchronises with the host, say).
  static std::unique_ptr<CudaGraph> capture(const torch::Device& device,
                                            const std::function<void()>& step);
  ~CudaGraph();
  void replay();
  // Device memory the capture holds (its private pool), in bytes.
  double pool_bytes() const { return pool_bytes_; }
  // The captured graph's nodes by kind: the kernels and the memory operations
  // (copies, sets) that the step launches one by one when it runs eagerly,
  // and that one replay launches as one graph; `other`: events, host calls.
  struct Nodes {
    int64_t kernels = 0, memory = 0, other = 0;
  };
  const Nodes& nodes() const { return nodes_; }

 private:
  struct Impl;
  CudaGraph(std::unique_ptr<Impl> impl, double pool_bytes, Nodes nodes);
  std::unique_ptr<Impl> impl_;
  double pool_bytes_ = 0;
  Nodes nodes_;
};

}  // namespace uma
