// What the launch templates (launch/cpu_range.h, launch/cuda.cuh) need to
// know of an op beyond its body, decided on the host and free of CUDA and
// torch headers: its CUDA grid, and its compile-time variants (an output
// wanted or not), picked once per launch on every device.
//
// An op (edges/kernels/*_ops.h) is a struct of its arguments (raw pointers,
// Rows views, sizes) with
//   static constexpr const char* kName;   // the kernel's name, in errors
//   static constexpr int kVariants;       // its compile-time variants
//   int variant() const;                  // this call's, in [0, kVariants)
//   int64_t cpu_items() const;            // the CPU's index space [0, items)
//   static constexpr int64_t kCpuGrain;   // the least items a CPU thread takes
//   Grid cuda_grid() const;               // the CUDA grid
// and two free functions beside it, found by the templates:
//   template <int V> void cpu_run(const Op&, int64_t begin, int64_t end);
//   template <int V> __device__ void cuda_run(const Op&);  // one thread's work
#pragma once

#include <cstdint>
#include <type_traits>

namespace uma::edges::launch {

constexpr int kThreads = 256;  // a block's threads over a flat index space
constexpr int kWarp = 32;

struct Grid {
  unsigned int blocks = 0, threads = kThreads;
};

// One thread per element of n (a grid-stride loop covers what one grid cannot).
inline Grid threads_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return {static_cast<unsigned int>(b < 65535 * 64 ? b : 65535 * 64), kThreads};
}

// One warp per row.
inline Grid warps_for(int64_t rows) { return threads_for(rows * kWarp); }

// One block of `warps` warps per item (a grid-stride loop over items).
inline Grid blocks_of_warps(int64_t items, int warps) {
  return {static_cast<unsigned int>(items < (1 << 30) ? items : (1 << 30)),
          static_cast<unsigned int>(warps * kWarp)};
}

// f(std::integral_constant<int, v>()) for v in [0, N): the variant's code
// sees v as a constant.
template <int N, int V = 0, typename F>
void with_variant(int v, F&& f) {
  if constexpr (V < N) {
    if (v == V)
      f(std::integral_constant<int, V>());
    else
      with_variant<N, V + 1>(v, static_cast<F&&>(f));
  }
}

}  // namespace uma::edges::launch
