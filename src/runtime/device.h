// Which device a process evaluates on, and making it the current one.
#pragma once

#include <string>

#include <torch/torch.h>

namespace uma {

// Resolves "cpu", "cuda", "cuda:N" or "auto" (CUDA when LibTorch sees a GPU,
// else CPU).  "cuda" takes GPU local_rank modulo the GPUs visible, so that
// ranks on one node spread over its GPUs.  Throws uma::Error when CUDA is
// asked for and LibTorch sees no GPU (or, for cuda:N, not that many).
// `required_gpu` >= 0: the caller's data lives on that GPU (pair_style
// uma/kk under a CUDA Kokkos takes the GPU Kokkos chose, whatever the
// launcher, -k on g N or -partition did), so "auto" and "cuda" take it and
// "cuda:N" with another N is refused; "cpu" stays allowed.
torch::Device resolve_device(const std::string& request, int local_rank = 0, int required_gpu = -1);

// The decision of resolve_device for `gpus` visible GPUs (> 0), without
// asking LibTorch: the GPU index for a CUDA request.  Throws uma::Error.
int choose_gpu(const std::string& request, int local_rank, int gpus, int required_gpu = -1);

// Makes `device` the current CUDA device of this process (a no-op for the
// CPU), so that streams, pinned buffers and allocations without an explicit
// device land on it.  Call it before anything is allocated on the GPU.
void make_current(const torch::Device& device);

// Fixes cuBLAS's workspace configuration (CUBLAS_WORKSPACE_CONFIG, unless
// the user set one) so that GEMMs can be deterministic.  LibTorch reads it at
// the process's first cuBLAS call and a training step with deterministic
// algorithms refuses to run without it, so every CUDA engine and trainer
// calls this when it is made, before any GEMM.  A no-op for the CPU.
void configure_cublas_workspace(const torch::Device& device);

// LibTorch's deterministic algorithms (a process-wide setting) on for the
// guard's lifetime when `on`, then back to what they were: training steps run
// under them while the MD evaluations around them keep LibTorch's default
// algorithms.  Uninitialised memory is not filled meanwhile (that is a
// debugging aid, not needed for determinism).
class DeterministicScope {
 public:
  explicit DeterministicScope(bool on);
  ~DeterministicScope();
  DeterministicScope(const DeterministicScope&) = delete;
  DeterministicScope& operator=(const DeterministicScope&) = delete;

 private:
  bool on_, was_on_, was_warn_only_, was_filling_;
};

}  // namespace uma
