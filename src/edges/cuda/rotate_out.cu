// The lean edge kernels' rotate-out family on CUDA, through the bodies of
// edges/kernels/rotate_out.h that the CPU's vector loops run
// (edges/cpu/rotate_out.cpp).  The forward and its tangent: one thread per
// (node, degree, channel), summing the node's edges in their segment's order
// in registers, then adding its K sums into out (accumulated, as on the
// CPU).  The backward and its tangent: one block per edge, one warp per M
// row; a row's sums over the channels in the warp (a fixed shuffle tree),
// the edge's over its rows by one thread in row order.  Deterministic, no
// atomics.
#include "edges/cuda/lean_kernels.h"

#include "edges/cuda/launch.cuh"
#include "edges/kernels/rotate_out.h"

namespace uma::edges::kernels::cuda {
namespace {

// The forward's (dD null) or its tangent's sums of degree l at (n, c).
template <int l, bool AllRows, typename T>
__device__ __forceinline__ void node_sums(const T* D, const T* dD, const T* envelope,
                                          const T* denvelope, const Rows<const T>& y,
                                          const Rows<const T>& dy, const int64_t* order,
                                          const int64_t* offsets, int64_t edges, int64_t C, T* out,
                                          int64_t n, int64_t c) {
  constexpr int K = 2 * l + 1;
  T acc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) acc[k] = 0;
  for (int64_t p = offsets[n], last = offsets[n + 1]; p < last; ++p) {
    const int64_t e = order[p];
    if (e >= edges) continue;
    if (dD) {
      const auto v = rotate_out_tangent_edge<l, AllRows>(D, dD, envelope, denvelope, y, dy, e);
#pragma unroll
      for (int i = 0; i < v.J; ++i) rotate_out_tangent_add(v, i, c, acc, 1);
    } else {
      const auto v = rotate_out_edge<l, AllRows>(D, envelope, y, e);
#pragma unroll
      for (int i = 0; i < v.J; ++i) rotate_out_add(v, i, c, acc, 1);
    }
  }
  T* o = out + (n * 9 + l * l) * C + c;
#pragma unroll
  for (int k = 0; k < K; ++k) o[k * C] += acc[k];
}

template <typename T>
__global__ void rotate_out_kernel(const T* D, const T* dD, const T* envelope, const T* denvelope,
                                  Rows<const T> y, Rows<const T> dy, int rows, const int64_t* order,
                                  const int64_t* offsets, int64_t edges, int64_t C, T* out,
                                  int64_t N) {
  for_each_element(N * 3, C, [&](int64_t nl, int64_t c) {
    const int64_t n = nl / 3;
    with_degree(int(nl - n * 3), [&](auto L) {
      constexpr int l = decltype(L)::value;
      if (rows == 9)
        node_sums<l, true>(D, dD, envelope, denvelope, y, dy, order, offsets, edges, C, out, n, c);
      else
        node_sums<l, false>(D, dD, envelope, denvelope, y, dy, order, offsets, edges, C, out, n, c);
    });
  });
}

// The edge's genvelope: each warp's part (lane 0's) summed in row order.
template <typename T>
__device__ __forceinline__ void sum_rows_in_order(T* row_part, T part, int j, int lane, int rows,
                                                  T* out) {
  if (lane == 0) row_part[j] = part;
  __syncthreads();
  if (threadIdx.x == 0) {
    T sum = 0;
    for (int i = 0; i < rows; ++i) sum += row_part[i];
    *out = sum;
  }
  __syncthreads();
}

// The backward. Block: 9 warps, warp j for M row j; grid: one block per edge.
template <bool WantGy, bool WantGeometry, typename T>
__global__ void rotate_out_grad_kernel(const T* D, const T* envelope, Rows<const T> y, int rows,
                                       const int64_t* tgt, const T* gout, int64_t C, Rows<T> gy,
                                       T* gD, T* genvelope, int64_t E) {
  __shared__ T row_part[9];
  const int j = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  for (int64_t e = blockIdx.x; e < E; e += gridDim.x) {
    T part = 0;
    if (j < rows) {
      const auto v = rotate_out_grad_row(D, envelope, y, tgt, gout, gy, C, e, j);
      const int r = l_row(j), k0 = block_start(r);
      with_block_size(block_size(r), [&](auto Kc) {
        constexpr int K = decltype(Kc)::value;
        [[maybe_unused]] T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0;
        for (int64_t c = lane; c < C; c += kWarp) {
          if constexpr (WantGy) rotate_out_grad_gy_at<K>(v, C, c);
          if constexpr (WantGeometry) rotate_out_grad_terms_at<K>(v, C, c, a0, a1, a2, a3, a4);
        }
        if constexpr (WantGeometry) {
          const T a[5] = {warp_sum(a0), warp_sum(a1), warp_sum(a2), warp_sum(a3), warp_sum(a4)};
#pragma unroll
          for (int k = 0; k < K; ++k) {
            if (lane == 0) gD[e * 81 + r * 9 + k0 + k] = v.s * a[k];
            part += v.d[k] * a[k];
          }
        }
      });
    }
    if constexpr (WantGeometry) sum_rows_in_order(row_part, part, j, lane, rows, genvelope + e);
  }
}

// The backward's tangent. Block and grid as the backward's.
template <bool WantGeometry, typename T>
__global__ void rotate_out_grad_tangent_kernel(const T* D, const T* dD, const T* envelope,
                                               const T* denvelope, Rows<const T> y,
                                               Rows<const T> dy, int rows, const int64_t* tgt,
                                               const T* gout, int64_t C, Rows<T> gy2, T* gD2,
                                               T* genvelope2, int64_t E) {
  __shared__ T row_part[9];
  const int j = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  for (int64_t e = blockIdx.x; e < E; e += gridDim.x) {
    T part = 0;
    if (j < rows) {
      const auto v =
          rotate_out_grad_tangent_row(D, dD, envelope, denvelope, y, dy, tgt, gout, gy2, C, e, j);
      const int r = l_row(j), k0 = block_start(r);
      with_block_size(block_size(r), [&](auto Kc) {
        constexpr int K = decltype(Kc)::value;
        [[maybe_unused]] T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0;
        [[maybe_unused]] T b0 = 0, b1 = 0, b2 = 0, b3 = 0, b4 = 0;
        for (int64_t c = lane; c < C; c += kWarp) {
          rotate_out_grad_tangent_gy_at<K>(v, C, c);
          if constexpr (WantGeometry)
            rotate_out_grad_tangent_terms_at<K>(v, C, c, a0, a1, a2, a3, a4, b0, b1, b2, b3, b4);
        }
        if constexpr (WantGeometry) {
          const T a[5] = {warp_sum(a0), warp_sum(a1), warp_sum(a2), warp_sum(a3), warp_sum(a4)};
          const T b[5] = {warp_sum(b0), warp_sum(b1), warp_sum(b2), warp_sum(b3), warp_sum(b4)};
#pragma unroll
          for (int k = 0; k < K; ++k) {
            if (lane == 0) gD2[e * 81 + r * 9 + k0 + k] = v.ds * a[k] + v.s * b[k];
            part += v.dd[k] * a[k] + v.d[k] * b[k];
          }
        }
      });
    }
    if constexpr (WantGeometry) sum_rows_in_order(row_part, part, j, lane, rows, genvelope2 + e);
  }
}

unsigned int edge_blocks(int64_t E) {
  return static_cast<unsigned int>(E < (1 << 30) ? E : (1 << 30));
}

}  // namespace

template <typename T>
void rotate_out(const T* D, const T* envelope, Rows<const T> y, int rows, const int64_t* order,
                const int64_t* offsets, int64_t edges, int64_t C, T* out, int64_t N, void* stream) {
  if (N * C == 0) return;
  rotate_out_kernel<T><<<blocks_for(N * 3 * C), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      D, nullptr, envelope, nullptr, y, Rows<const T>(), rows, order, offsets, edges, C, out, N);
  check_launch("rotate_out");
}

template <typename T>
void rotate_out_tangent(const T* D, const T* dD, const T* envelope, const T* denvelope,
                        Rows<const T> y, Rows<const T> dy, int rows, const int64_t* order,
                        const int64_t* offsets, int64_t edges, int64_t C, T* out, int64_t N,
                        void* stream) {
  if (N * C == 0) return;
  rotate_out_kernel<T><<<blocks_for(N * 3 * C), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      D, dD, envelope, denvelope, y, dy, rows, order, offsets, edges, C, out, N);
  check_launch("rotate_out_tangent");
}

template <typename T>
void rotate_out_grad(const T* D, const T* envelope, Rows<const T> y, int rows, const int64_t* tgt,
                     const T* gout, int64_t C, Rows<T> gy, T* gD, T* genvelope, int64_t E,
                     void* stream) {
  const bool want_gy = gy.base[0] != nullptr, geometry = gD != nullptr;
  if (E == 0 || !(want_gy || geometry)) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const unsigned int blocks = edge_blocks(E);
  if (want_gy && geometry)
    rotate_out_grad_kernel<true, true>
        <<<blocks, 9 * kWarp, 0, s>>>(D, envelope, y, rows, tgt, gout, C, gy, gD, genvelope, E);
  else if (want_gy)
    rotate_out_grad_kernel<true, false>
        <<<blocks, 9 * kWarp, 0, s>>>(D, envelope, y, rows, tgt, gout, C, gy, gD, genvelope, E);
  else
    rotate_out_grad_kernel<false, true>
        <<<blocks, 9 * kWarp, 0, s>>>(D, envelope, y, rows, tgt, gout, C, gy, gD, genvelope, E);
  check_launch("rotate_out_grad");
}

template <typename T>
void rotate_out_grad_tangent(const T* D, const T* dD, const T* envelope, const T* denvelope,
                             Rows<const T> y, Rows<const T> dy, int rows, const int64_t* tgt,
                             const T* gout, int64_t C, Rows<T> gy2, T* gD2, T* genvelope2,
                             int64_t E, void* stream) {
  if (E == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  if (gD2)
    rotate_out_grad_tangent_kernel<true><<<edge_blocks(E), 9 * kWarp, 0, s>>>(
        D, dD, envelope, denvelope, y, dy, rows, tgt, gout, C, gy2, gD2, genvelope2, E);
  else
    rotate_out_grad_tangent_kernel<false><<<edge_blocks(E), 9 * kWarp, 0, s>>>(
        D, dD, envelope, denvelope, y, dy, rows, tgt, gout, C, gy2, gD2, genvelope2, E);
  check_launch("rotate_out_grad_tangent");
}

#define UMA_ROTATE_OUT_LAUNCHERS(T)                                                                \
  template void rotate_out<T>(const T*, const T*, Rows<const T>, int, const int64_t*,              \
                              const int64_t*, int64_t, int64_t, T*, int64_t, void*);               \
  template void rotate_out_tangent<T>(const T*, const T*, const T*, const T*, Rows<const T>,       \
                                      Rows<const T>, int, const int64_t*, const int64_t*, int64_t, \
                                      int64_t, T*, int64_t, void*);                                \
  template void rotate_out_grad<T>(const T*, const T*, Rows<const T>, int, const int64_t*,         \
                                   const T*, int64_t, Rows<T>, T*, T*, int64_t, void*);            \
  template void rotate_out_grad_tangent<T>(const T*, const T*, const T*, const T*, Rows<const T>,  \
                                           Rows<const T>, int, const int64_t*, const T*, int64_t,  \
                                           Rows<T>, T*, T*, int64_t, void*);
UMA_ROTATE_OUT_LAUNCHERS(float)
UMA_ROTATE_OUT_LAUNCHERS(double)
#undef UMA_ROTATE_OUT_LAUNCHERS

}  // namespace uma::edges::kernels::cuda
