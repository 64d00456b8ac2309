// How an op's CUDA body (cuda_run, launch/grid.h) spreads its work over the
// threads of its grid: rows of channels one warp per row (for_each_row), or
// an [R, H] index space one thread per element (for_each_element), channels
// fastest either way (coalesced rows); and a warp's sum.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "edges/launch/grid.h"

namespace uma::edges::launch {

// Calls body(e, c) for every e < E and c < H: for a body that runs long per
// element (a node's walk over its edges).  Grid: threads_for(E * H).
template <typename Body>
__device__ __forceinline__ void for_each_element(int64_t E, int64_t H, Body body) {
  const int64_t n = E * H, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    body(i / H, i % H);
}

// Calls body(r, lane) once per row r < rows and lane of the row's warp: one
// warp per row (a grid-stride loop over rows; grid: warps_for(rows)).  The
// body builds the row's view once and strides its lanes over the row's
// channels: a short per-element body then costs its own work, not an index
// division and a view per element.
template <typename Body>
__device__ __forceinline__ void for_each_row(int64_t rows, Body body) {
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / kWarp);
  const int lane = int(threadIdx.x) % kWarp;
  for (int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; r < rows; r += warps)
    body(r, lane);
}

// Sums over a warp's lanes by a fixed shuffle tree (every lane gets the sum):
// the same bits every run.
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace uma::edges::launch
