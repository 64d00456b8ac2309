// Which device a process evaluates on, and making it the current one.
#pragma once

#include <string>

#include <torch/torch.h>

namespace uma {

// Resolves "cpu", "cuda", "cuda:N" or "auto" (CUDA when LibTorch sees a GPU,
// else CPU).  "cuda" takes GPU local_rank modulo the GPUs visible, so that
// ranks on one node spread over its GPUs.  Throws uma::Error when CUDA is
// asked for and LibTorch sees no GPU (or, for cuda:N, not that many).
torch::Device resolve_device(const std::string& request, int local_rank = 0);

// Makes `device` the current CUDA device of this process (a no-op for the
// CPU), so that streams, pinned buffers and allocations without an explicit
// device land on it.  Call it before anything is allocated on the GPU.
void make_current(const torch::Device& device);

}  // namespace uma
