// How the CUDA launchers spread an [E, H] element grid over threads: one
// thread per (edge, channel), channels fastest (coalesced rows), and a launch
// error raised as uma::Error with the kernel's name.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "runtime/uma_error.h"

namespace uma::nn::kernels::cuda {

constexpr int kThreads = 256;

// Blocks for n elements (a grid-stride loop covers what one grid cannot).
inline unsigned int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(b < 65535 * 64 ? b : 65535 * 64);
}

inline void check_launch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(std::string("CUDA launch of ") + kernel + " failed: " + cudaGetErrorString(err));
}

// Calls body(e, c) for every edge e < E and channel c < H.
template <typename Body>
__device__ __forceinline__ void for_each_element(int64_t E, int64_t H, Body body) {
  const int64_t n = E * H, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    body(i / H, i % H);
}

// Sums over a warp's lanes by a fixed shuffle tree (every lane gets the sum):
// the same bits every run.
constexpr int kWarp = 32;

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace uma::nn::kernels::cuda
