// Counted transfers between the host and the model's device.
//
// Every copy of data from the host to the model's device (an upload) and from
// the device to the host (a read) goes through these functions, so that
// "uploads per step" and "host reads per step" are numbers tests can assert
// on any device.  A CPU-to-CPU copy still counts: the rule is about the code
// path, not about where the memory happens to live.
// tests/static/check_transfers.py fails the build's tests on any direct
// transfer elsewhere in src/, plugin/, pair_style/ and fix_train/.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace uma {

// Counts since process start (or since reset).
int64_t host_read_count();
int64_t upload_count();
// Bytes those transfers moved (what they copied, in its own dtype).
int64_t host_read_bytes();
int64_t upload_bytes();
void reset_transfer_counts();

// ---- device -> host (reads) ------------------------------------------------

// Copies `t` to a contiguous CPU tensor (always a copy); counts one read.
torch::Tensor to_host(const torch::Tensor& t);

// ---- host -> device (uploads) ----------------------------------------------

// Copies a CPU tensor to `options`' device and dtype (always a copy, never
// aliasing the source); counts one upload.  On CUDA the source goes through
// pinned memory and the copy is non-blocking on the current stream.
torch::Tensor upload(const torch::Tensor& host, const torch::TensorOptions& options);
torch::Tensor upload(const std::vector<double>& values, const torch::TensorOptions& options);
torch::Tensor upload(const std::vector<int64_t>& values, const torch::TensorOptions& options);

// A host staging area for one upload per step (positions and cells).  Fill
// `host(n)` (n doubles), then `send()`: on CUDA the data go up from pinned
// memory, non-blocking; the pinned block is not reused before its copy ends
// (LibTorch's caching host allocator tracks that).  Counts one upload.
class StagingBuffer {
 public:
  double* host(int64_t n, const torch::Device& device);
  // Copies a CPU tensor's values (any dtype) to host(n)[offset...]; returns
  // how many of them are NaN or infinite.
  int64_t put(int64_t offset, const torch::Tensor& values);
  torch::Tensor send(const torch::TensorOptions& options);

 private:
  torch::Tensor staged_;
};

// A persistent host copy of one device tensor that goes down and back up
// every step (fix uma/train's gradient, reduced over MPI ranks on the host):
// pinned memory on CUDA, allocated once per shape and dtype, never per step.
class HostMirror {
 public:
  // Copies `t` into the mirror (one counted read; the host waits for it) and
  // returns the mirror (CPU, contiguous, t's shape and dtype).
  torch::Tensor& read(const torch::Tensor& t);
  // Copies the mirror into `t` (one counted upload; non-blocking from pinned
  // memory: a later read() on the same stream is ordered after it).
  void write(torch::Tensor& t);
  int64_t allocations() const { return allocations_; }

 private:
  torch::Tensor host_;
  int64_t allocations_ = 0;
};

// Model parameters and states moved between devices (loading a model,
// checkpoints): a one-off bulk copy, counted as one transfer in the
// direction it goes.
torch::Tensor move_bulk(const torch::Tensor& t, const torch::TensorOptions& options);

}  // namespace uma
