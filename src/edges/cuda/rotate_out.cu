// The lean edge kernels' rotate-out family on CUDA: one thread per (node,
// degree, channel), summing the node's edges in their segment's order in
// registers through the body of edges/kernels/rotate_out.h that the CPU's
// vector loops run (edges/cpu/rotate_out.cpp), then writing its K outputs:
// deterministic, no atomics, and out needs no zeroing.
#include "edges/cuda/lean_kernels.h"

#include "edges/cuda/launch.cuh"
#include "edges/kernels/rotate_out.h"

namespace uma::nn::kernels::cuda {
namespace {

template <int l, bool AllRows, typename T>
__device__ __forceinline__ void node_sums(const T* D, const T* envelope, const Rows<const T>& y,
                                          const int64_t* order, const int64_t* offsets,
                                          int64_t edges, int64_t C, T* out, int64_t n, int64_t c) {
  constexpr int K = 2 * l + 1;
  T acc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) acc[k] = 0;
  for (int64_t p = offsets[n], last = offsets[n + 1]; p < last; ++p) {
    const int64_t e = order[p];
    if (e >= edges) continue;
    const auto v = rotate_out_edge<l, AllRows>(D, envelope, y, e);
#pragma unroll
    for (int i = 0; i < v.J; ++i) rotate_out_add(v, i, c, acc, 1);
  }
  T* o = out + (n * 9 + l * l) * C + c;
#pragma unroll
  for (int k = 0; k < K; ++k) o[k * C] = acc[k];
}

template <typename T>
__global__ void rotate_out_kernel(const T* D, const T* envelope, Rows<const T> y, int rows,
                                  const int64_t* order, const int64_t* offsets, int64_t edges,
                                  int64_t C, T* out, int64_t N) {
  for_each_element(N * 3, C, [&](int64_t nl, int64_t c) {
    const int64_t n = nl / 3;
    with_degree(int(nl - n * 3), [&](auto L) {
      constexpr int l = decltype(L)::value;
      if (rows == 9)
        node_sums<l, true>(D, envelope, y, order, offsets, edges, C, out, n, c);
      else
        node_sums<l, false>(D, envelope, y, order, offsets, edges, C, out, n, c);
    });
  });
}

}  // namespace

template <typename T>
void rotate_out(const T* D, const T* envelope, Rows<const T> y, int rows, const int64_t* order,
                const int64_t* offsets, int64_t edges, int64_t C, T* out, int64_t N, void* stream) {
  if (N * C == 0) return;
  rotate_out_kernel<T><<<blocks_for(N * 3 * C), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      D, envelope, y, rows, order, offsets, edges, C, out, N);
  check_launch("rotate_out");
}

#define UMA_ROTATE_OUT_LAUNCHERS(T)                                                   \
  template void rotate_out<T>(const T*, const T*, Rows<const T>, int, const int64_t*, \
                              const int64_t*, int64_t, int64_t, T*, int64_t, void*);
UMA_ROTATE_OUT_LAUNCHERS(float)
UMA_ROTATE_OUT_LAUNCHERS(double)
#undef UMA_ROTATE_OUT_LAUNCHERS

}  // namespace uma::nn::kernels::cuda
