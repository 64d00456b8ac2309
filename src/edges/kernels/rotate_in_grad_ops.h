// The backward of the rotation into the edge frame for the radial weights
// and D, and its tangent, as ops (launch/grid.h) over the bodies of
// kernels/rotate_in.h: gradial ([E, 6, 2C], written) and, where gD is given,
// gD ([E, 81], accumulated).  On the CPU a range of edges, each M row's
// channels one vector loop (edges/cpu/kernel_rows.h), and, where gx_threads
// is given, x's gradient summed in the same pass into the range's thread's
// own gx (one per thread: a node's edges lie in every thread's range).  On
// CUDA one block per edge, one warp per radial row (its one or two M rows in
// order, so that the second adds to the first's gradient as on the CPU), a
// row's sums over the channels in the warp; x's gradient there is the node
// pass (kernels/rotate_in_ops.h).  Deterministic, no atomics.
#pragma once

#include <cstdint>

#include "edges/kernels/layout.h"
#include "edges/kernels/rotate_in.h"
#include "edges/launch/grid.h"
#if defined(__CUDACC__)
#include "edges/launch/threads.cuh"
#else
#include "edges/cpu/kernel_rows.h"
#endif

#define UMA_ROTATE_IN_GRAD_OPS(X) X(RotateInGradEdgesOp) X(RotateInGradEdgesTangentOp)

namespace uma::edges::kernels {

// g: the incoming gradient (pieces of [E, rows, 2C]).
template <typename T>
struct RotateInGradEdgesOp {
  static constexpr const char* kName = "rotate_in_grad_edges";
  const T *D, *x;
  const int64_t *src, *tgt;
  const T* radial;
  Rows<const T> g;
  int64_t C, E;
  T *gD, *gradial;
  T* gx_threads = nullptr;  // CPU only: one gx ([N, 9, C]) per thread, gx_size apart
  int64_t gx_size = 0;

  // bit 0: gD wanted; bit 1: gx in this pass (the CPU's)
  static constexpr int kVariants = 4;
  static constexpr int64_t kCpuGrain = 32;
  int variant() const { return (gD ? 1 : 0) | (gx_threads ? 2 : 0); }
  int64_t cpu_items() const { return E; }
  launch::Grid cuda_grid() const { return launch::blocks_of_warps(E, 6); }
  RotateInGradEdgesOp for_thread(int thread) const {
    RotateInGradEdgesOp own = *this;
    if (gx_threads) own.gx_threads += thread * gx_size;
    return own;
  }

  UMA_BODY RotateInGradRow<T> row(int64_t e, int j) const {
    return rotate_in_grad_row(D, x, src, tgt, radial, g, gradial, C, e, j);
  }
  template <int K, bool Accumulate>
  UMA_BODY static void radial_at(const RotateInGradRow<T>& v, int64_t C, int64_t c) {
    rotate_in_grad_radial_at<K, Accumulate>(v, C, c);
  }
  template <int K>
  UMA_BODY static void D_terms_at(const RotateInGradRow<T>& v, int64_t C, int64_t c, T& a0, T& a1,
                                  T& a2, T& a3, T& a4) {
    rotate_in_grad_D_terms_at<K>(v, C, c, a0, a1, a2, a3, a4);
  }
};

// The tangent of RotateInGradEdgesOp along (dD, dx, dradial): its gradial
// (written) and gD (accumulated, where given) parts.
template <typename T>
struct RotateInGradEdgesTangentOp {
  static constexpr const char* kName = "rotate_in_grad_edges_tangent";
  const T *D, *dD, *x, *dx;
  const int64_t *src, *tgt;
  const T *radial, *dradial;
  Rows<const T> g;
  int64_t C, E;
  T *gD, *gradial;

  static constexpr int kVariants = 2;  // gD wanted or not
  static constexpr int64_t kCpuGrain = 32;
  int variant() const { return gD ? 1 : 0; }
  int64_t cpu_items() const { return E; }
  launch::Grid cuda_grid() const { return launch::blocks_of_warps(E, 6); }

  UMA_BODY RotateInGradTangentRow<T> row(int64_t e, int j) const {
    return rotate_in_grad_tangent_row(D, dD, x, dx, src, tgt, radial, dradial, g, gradial, C, e, j);
  }
  template <int K, bool Accumulate>
  UMA_BODY static void radial_at(const RotateInGradTangentRow<T>& v, int64_t C, int64_t c) {
    rotate_in_grad_tangent_radial_at<K, Accumulate>(v, C, c);
  }
  template <int K>
  UMA_BODY static void D_terms_at(const RotateInGradTangentRow<T>& v, int64_t C, int64_t c, T& a0,
                                  T& a1, T& a2, T& a3, T& a4) {
    rotate_in_grad_tangent_D_terms_at<K>(v, C, c, a0, a1, a2, a3, a4);
  }
};

#if !defined(__CUDACC__)
template <int V, typename T>
UMA_ALWAYS_INLINE void cpu_run(const RotateInGradEdgesOp<T>& op, int64_t begin, int64_t end) {
  rotate_in_grad_edges_of<(V & 1) != 0, (V & 2) != 0>(op.D, op.x, op.src, op.tgt, op.radial, op.g,
                                                      op.C, op.gD, op.gradial, op.gx_threads, begin,
                                                      end);
}
template <int V, typename T>
UMA_ALWAYS_INLINE void cpu_run(const RotateInGradEdgesTangentOp<T>& op, int64_t begin,
                               int64_t end) {
  rotate_in_grad_edges_tangent_of<V == 1>(op.D, op.dD, op.x, op.dx, op.src, op.tgt, op.radial,
                                          op.dradial, op.g, op.C, op.gD, op.gradial, begin, end);
}
#else
// Block: 6 warps, warp rr for radial row rr; grid: one block per edge.
template <bool WantD, typename T, typename Op>
__device__ __forceinline__ void radial_and_D_blocks(const Op& op) {
  const int rr = int(threadIdx.x) / launch::kWarp, lane = int(threadIdx.x) % launch::kWarp;
  const int64_t C = op.C;
  for (int64_t e = blockIdx.x; e < op.E; e += gridDim.x)
    for (int i = 0; i < rows_of_radial(rr); ++i) {
      const int j = row_of_radial(rr, i), r = l_row(j);
      const auto v = op.row(e, j);
      with_block_size(block_size(r), [&](auto Kc) {
        constexpr int K = decltype(Kc)::value;
        [[maybe_unused]] T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0;
        for (int64_t c = lane; c < C; c += launch::kWarp) {
          if (i == 0)
            Op::template radial_at<K, false>(v, C, c);
          else
            Op::template radial_at<K, true>(v, C, c);
          if constexpr (WantD) Op::template D_terms_at<K>(v, C, c, a0, a1, a2, a3, a4);
        }
        if constexpr (WantD) {
          using launch::warp_sum;
          const T a[5] = {warp_sum(a0), warp_sum(a1), warp_sum(a2), warp_sum(a3), warp_sum(a4)};
          if (lane == 0) {
            T* gd = op.gD + e * 81 + r * 9 + block_start(r);
#pragma unroll
            for (int k = 0; k < K; ++k) gd[k] += a[k];
          }
        }
      });
    }
}

template <int V, typename T>
__device__ __forceinline__ void cuda_run(const RotateInGradEdgesOp<T>& op) {
  radial_and_D_blocks<(V & 1) != 0, T>(op);
}
template <int V, typename T>
__device__ __forceinline__ void cuda_run(const RotateInGradEdgesTangentOp<T>& op) {
  radial_and_D_blocks<V == 1, T>(op);
}
#endif

}  // namespace uma::edges::kernels
