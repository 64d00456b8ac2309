// The rotation back from the edge frame, scaled by the envelope and summed
// into each edge's target, as ops (launch/grid.h) over the bodies of
// kernels/rotate_out.h.  The forward and its tangent, out ([N, 9, C])
// accumulated: on the CPU a range of nodes, each edge's rows added into the
// node's (edges/cpu/rotate_out_rows.h); on CUDA one thread per (node, degree,
// channel), its sums in registers in the segment's order, one kernel body
// for both (the tangent's terms where dD is given).  The backward and its
// tangent: on the CPU a range of edges; on CUDA one block per edge, one warp
// per M row, a row's sums over the channels in the warp (a fixed shuffle
// tree), the edge's over its rows by one thread in row order.
// Deterministic, no atomics.
#pragma once

#include <cstdint>

#include "edges/kernels/layout.h"
#include "edges/kernels/rotate_out.h"
#include "edges/launch/grid.h"
#if defined(__CUDACC__)
#include "edges/launch/threads.cuh"
#else
#include "edges/cpu/rotate_out_rows.h"
#endif

#define UMA_ROTATE_OUT_OPS(X) X(RotateOutNodesOp) X(RotateOutGradOp) X(RotateOutGradTangentOp)

namespace uma::edges::kernels {

// out += R(D, envelope, y) over `rows` (3 or 9) M rows, each node's edges by
// target (order, offsets; entries >= edges skipped); with dD given, out +=
// R's tangent along (dD, denvelope, dy) instead.
template <typename T>
struct RotateOutNodesOp {
  static constexpr const char* kName = "rotate_out";
  const T *D, *dD, *envelope, *denvelope;
  Rows<const T> y, dy;
  int rows;
  const int64_t *order, *offsets;
  int64_t edges, C, N;
  T* out;

  static constexpr int kVariants = 2;  // the forward, its tangent
  static constexpr int64_t kCpuGrain = 4;
  int variant() const { return dD ? 1 : 0; }
  int64_t cpu_items() const { return N; }
  launch::Grid cuda_grid() const { return launch::threads_for(N * 3 * C); }
};

// R's gradient along gout [N, 9, C]: gy (written, where it has a base), gD
// (zeroed outside the l-blocks by the caller) and genvelope (written) where
// gD is given.
template <typename T>
struct RotateOutGradOp {
  static constexpr const char* kName = "rotate_out_grad";
  const T *D, *envelope;
  Rows<const T> y;
  int rows;
  const int64_t* tgt;
  const T* gout;
  int64_t C, E;
  Rows<T> gy;
  T *gD, *genvelope;

  static constexpr int kVariants = 4;  // bit 0: gy wanted; bit 1: gD and genvelope
  static constexpr int64_t kCpuGrain = 32;
  int variant() const { return (gy.base[0] ? 1 : 0) | (gD ? 2 : 0); }
  int64_t cpu_items() const { return variant() ? E : 0; }
  launch::Grid cuda_grid() const {
    return variant() ? launch::blocks_of_warps(E, 9) : launch::Grid();
  }
};

// The tangent of R's gradient along (dD, denvelope, dy): gy2 (written), gD2
// (zeroed outside the l-blocks by the caller) and genvelope2 where gD2 is given.
template <typename T>
struct RotateOutGradTangentOp {
  static constexpr const char* kName = "rotate_out_grad_tangent";
  const T *D, *dD, *envelope, *denvelope;
  Rows<const T> y, dy;
  int rows;
  const int64_t* tgt;
  const T* gout;
  int64_t C, E;
  Rows<T> gy2;
  T *gD2, *genvelope2;

  static constexpr int kVariants = 2;  // gD2 and genvelope2 wanted or not
  static constexpr int64_t kCpuGrain = 32;
  int variant() const { return gD2 ? 1 : 0; }
  int64_t cpu_items() const { return E; }
  launch::Grid cuda_grid() const { return launch::blocks_of_warps(E, 9); }
};

#if !defined(__CUDACC__)
template <int V, typename T>
UMA_ALWAYS_INLINE void cpu_run(const RotateOutNodesOp<T>& op, int64_t begin, int64_t end) {
  if constexpr (V == 0)
    rotate_out_nodes(op.D, op.envelope, op.y, op.rows, op.order, op.offsets, op.edges, op.C, op.out,
                     begin, end);
  else
    rotate_out_tangent_nodes(op.D, op.dD, op.envelope, op.denvelope, op.y, op.dy, op.rows, op.order,
                             op.offsets, op.edges, op.C, op.out, begin, end);
}
template <int V, typename T>
UMA_ALWAYS_INLINE void cpu_run(const RotateOutGradOp<T>& op, int64_t begin, int64_t end) {
  if constexpr (V != 0)
    rotate_out_grad_edges<(V & 1) != 0, (V & 2) != 0>(op.D, op.envelope, op.y, op.rows, op.tgt,
                                                      op.gout, op.C, op.gy, op.gD, op.genvelope,
                                                      begin, end);
}
template <int V, typename T>
UMA_ALWAYS_INLINE void cpu_run(const RotateOutGradTangentOp<T>& op, int64_t begin, int64_t end) {
  rotate_out_grad_tangent_of<V == 1>(op.D, op.dD, op.envelope, op.denvelope, op.y, op.dy, op.rows,
                                     op.tgt, op.gout, op.C, op.gy2, op.gD2, op.genvelope2, begin,
                                     end);
}
#else
// The forward's (dD null) or its tangent's sums of degree l at (n, c).
template <int l, bool AllRows, typename T>
__device__ __forceinline__ void rotate_out_node_sums(const RotateOutNodesOp<T>& op, int64_t n,
                                                     int64_t c) {
  constexpr int K = 2 * l + 1;
  T acc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) acc[k] = 0;
  for (int64_t p = op.offsets[n], last = op.offsets[n + 1]; p < last; ++p) {
    const int64_t e = op.order[p];
    if (e >= op.edges) continue;
    if (op.dD) {
      const auto v = rotate_out_tangent_edge<l, AllRows>(op.D, op.dD, op.envelope, op.denvelope,
                                                         op.y, op.dy, e);
#pragma unroll
      for (int i = 0; i < v.J; ++i) rotate_out_tangent_add(v, i, c, acc, 1);
    } else {
      const auto v = rotate_out_edge<l, AllRows>(op.D, op.envelope, op.y, e);
#pragma unroll
      for (int i = 0; i < v.J; ++i) rotate_out_add(v, i, c, acc, 1);
    }
  }
  T* o = op.out + (n * 9 + l * l) * op.C + c;
#pragma unroll
  for (int k = 0; k < K; ++k) o[k * op.C] += acc[k];
}

// One thread per (node, degree, channel); the variant is read at run time
// (dD), the same body for both.
template <int V, typename T>
__device__ __forceinline__ void cuda_run(const RotateOutNodesOp<T>& op) {
  launch::for_each_element(op.N * 3, op.C, [&](int64_t nl, int64_t c) {
    const int64_t n = nl / 3;
    with_degree(int(nl - n * 3), [&](auto L) {
      constexpr int l = decltype(L)::value;
      if (op.rows == 9)
        rotate_out_node_sums<l, true>(op, n, c);
      else
        rotate_out_node_sums<l, false>(op, n, c);
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
__device__ __forceinline__ void rotate_out_grad_blocks(const RotateOutGradOp<T>& op) {
  __shared__ T row_part[9];
  const int j = int(threadIdx.x) / launch::kWarp, lane = int(threadIdx.x) % launch::kWarp;
  const int64_t C = op.C;
  for (int64_t e = blockIdx.x; e < op.E; e += gridDim.x) {
    T part = 0;
    if (j < op.rows) {
      const auto v = rotate_out_grad_row(op.D, op.envelope, op.y, op.tgt, op.gout, op.gy, C, e, j);
      const int r = l_row(j), k0 = block_start(r);
      with_block_size(block_size(r), [&](auto Kc) {
        constexpr int K = decltype(Kc)::value;
        [[maybe_unused]] T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0;
        for (int64_t c = lane; c < C; c += launch::kWarp) {
          if constexpr (WantGy) rotate_out_grad_gy_at<K>(v, C, c);
          if constexpr (WantGeometry) rotate_out_grad_terms_at<K>(v, C, c, a0, a1, a2, a3, a4);
        }
        if constexpr (WantGeometry) {
          using launch::warp_sum;
          const T a[5] = {warp_sum(a0), warp_sum(a1), warp_sum(a2), warp_sum(a3), warp_sum(a4)};
#pragma unroll
          for (int k = 0; k < K; ++k) {
            if (lane == 0) op.gD[e * 81 + r * 9 + k0 + k] = v.s * a[k];
            part += v.d[k] * a[k];
          }
        }
      });
    }
    if constexpr (WantGeometry)
      sum_rows_in_order(row_part, part, j, lane, op.rows, op.genvelope + e);
  }
}

// Variant 0 (nothing wanted) is never launched (cuda_grid is empty).
template <int V, typename T>
__device__ __forceinline__ void cuda_run(const RotateOutGradOp<T>& op) {
  if constexpr (V != 0) rotate_out_grad_blocks<(V & 1) != 0, (V & 2) != 0>(op);
}

// The backward's tangent. Block and grid as the backward's.
template <int V, typename T>
__device__ __forceinline__ void cuda_run(const RotateOutGradTangentOp<T>& op) {
  constexpr bool WantGeometry = V == 1;
  __shared__ T row_part[9];
  const int j = int(threadIdx.x) / launch::kWarp, lane = int(threadIdx.x) % launch::kWarp;
  const int64_t C = op.C;
  for (int64_t e = blockIdx.x; e < op.E; e += gridDim.x) {
    T part = 0;
    if (j < op.rows) {
      const auto v = rotate_out_grad_tangent_row(op.D, op.dD, op.envelope, op.denvelope, op.y,
                                                 op.dy, op.tgt, op.gout, op.gy2, C, e, j);
      const int r = l_row(j), k0 = block_start(r);
      with_block_size(block_size(r), [&](auto Kc) {
        constexpr int K = decltype(Kc)::value;
        [[maybe_unused]] T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0;
        [[maybe_unused]] T b0 = 0, b1 = 0, b2 = 0, b3 = 0, b4 = 0;
        for (int64_t c = lane; c < C; c += launch::kWarp) {
          rotate_out_grad_tangent_gy_at<K>(v, C, c);
          if constexpr (WantGeometry)
            rotate_out_grad_tangent_terms_at<K>(v, C, c, a0, a1, a2, a3, a4, b0, b1, b2, b3, b4);
        }
        if constexpr (WantGeometry) {
          using launch::warp_sum;
          const T a[5] = {warp_sum(a0), warp_sum(a1), warp_sum(a2), warp_sum(a3), warp_sum(a4)};
          const T b[5] = {warp_sum(b0), warp_sum(b1), warp_sum(b2), warp_sum(b3), warp_sum(b4)};
#pragma unroll
          for (int k = 0; k < K; ++k) {
            if (lane == 0) op.gD2[e * 81 + r * 9 + k0 + k] = v.ds * a[k] + v.s * b[k];
            part += v.dd[k] * a[k] + v.d[k] * b[k];
          }
        }
      });
    }
    if constexpr (WantGeometry)
      sum_rows_in_order(row_part, part, j, lane, op.rows, op.genvelope2 + e);
  }
}
#endif

}  // namespace uma::edges::kernels
