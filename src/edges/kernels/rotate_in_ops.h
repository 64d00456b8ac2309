// The rotation into the edge frame as ops (launch/grid.h), over the bodies of
// kernels/rotate_in.h: the forward and its tangent, and the node pass of the
// backward for x and its tangent.  Forward and tangent: on the CPU a range
// of edges, a row's view once per (edge, M row, half) and its channels one
// vector loop; on CUDA one warp per (edge, M row, half), its lanes striding
// over the C channels (a warp reads consecutive channels of one row of x and
// writes one row of out).  The node passes, x's gradient gx ([N, 9, C],
// accumulated) summed over each node's edges as source, then as target, in
// their segments' order: on the CPU a range of nodes, each edge's rows added
// into the node's rows of gx; on CUDA one thread per (node, degree,
// channel), its sums in registers.  Deterministic, no atomics.
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

#define UMA_ROTATE_IN_OPS(X) \
  X(RotateInOp) X(RotateInTangentOp) X(RotateInGradNodesOp) X(RotateInGradNodesTangentOp)

namespace uma::edges::kernels {

// ---- out (pieces of [E, rows, 2C], written) = F(D, x, radial) -------------

template <typename T>
struct RotateInOp {
  static constexpr const char* kName = "rotate_in";
  const T *D, *x;
  const int64_t *src, *tgt;
  const T* radial;
  Rows<T> out;
  int64_t C, E;

  static constexpr int kVariants = 1;
  static constexpr int64_t kCpuGrain = 32;
  int variant() const { return 0; }
  int64_t cpu_items() const { return E; }
  // CUDA: one warp per row r = (e * 9 + j) * 2 + h (edge e, M row j, half h)
  launch::Grid cuda_grid() const { return launch::warps_for(E * 18); }
  UMA_BODY RotateInRow<T> row(int64_t e, int j, int h) const {
    return rotate_in_row(D, x, src, tgt, radial, out, C, e, j, h);
  }
  template <int K>
  UMA_BODY static void at(const RotateInRow<T>& v, int64_t C, int64_t c) {
    rotate_in_at<K>(v, C, c);
  }
};

// out (written) = F(dD, x, r) + F(D, dx, r) + F(D, x, dr).
template <typename T>
struct RotateInTangentOp {
  static constexpr const char* kName = "rotate_in_tangent";
  const T *D, *dD, *x, *dx;
  const int64_t *src, *tgt;
  const T *radial, *dradial;
  Rows<T> out;
  int64_t C, E;

  static constexpr int kVariants = 1;
  static constexpr int64_t kCpuGrain = 32;
  int variant() const { return 0; }
  int64_t cpu_items() const { return E; }
  // CUDA: one warp per row r = (e * 9 + j) * 2 + h (edge e, M row j, half h)
  launch::Grid cuda_grid() const { return launch::warps_for(E * 18); }
  UMA_BODY RotateInTangentRow<T> row(int64_t e, int j, int h) const {
    return rotate_in_tangent_row(D, dD, x, dx, src, tgt, radial, dradial, out, C, e, j, h);
  }
  template <int K>
  UMA_BODY static void at(const RotateInTangentRow<T>& v, int64_t C, int64_t c) {
    rotate_in_tangent_at<K>(v, C, c);
  }
};

// ---- gx ([N, 9, C], accumulated) += x's gradient, per node -----------------

// The graph a node pass walks: edges by source and by target (entries >=
// edges are skipped), N nodes, C channels.
struct NodeWalk {
  const int64_t *src_order, *src_offsets, *tgt_order, *tgt_offsets;
  int64_t edges, C, N;

  static constexpr int kVariants = 1;
  static constexpr int64_t kCpuGrain = 4;
  int variant() const { return 0; }
  int64_t cpu_items() const { return N; }
  launch::Grid cuda_grid() const { return launch::threads_for(N * 3 * C); }
};

// rotate_in's backward for x, g the incoming gradient (pieces of [E, rows, 2C]).
template <typename T>
struct RotateInGradNodesOp : NodeWalk {
  static constexpr const char* kName = "rotate_in_grad_nodes";
  const T *D, *radial;
  Rows<const T> g;
  T* gx;

  UMA_BODY RotateInGradNodeRow<T> row(int64_t e, int j, int h) const {
    return rotate_in_grad_node_row(D, radial, g, C, e, j, h);
  }
  template <int K>
  UMA_BODY static void add(const RotateInGradNodeRow<T>& v, int64_t c, T* acc, int64_t stride) {
    rotate_in_grad_node_at<K>(v, c, acc, stride);
  }
};

// Its tangent along (dD, dradial) (gx does not depend on x).
template <typename T>
struct RotateInGradNodesTangentOp : NodeWalk {
  static constexpr const char* kName = "rotate_in_grad_nodes_tangent";
  const T *D, *dD, *radial, *dradial;
  Rows<const T> g;
  T* gx;

  UMA_BODY RotateInGradNodeTangentRow<T> row(int64_t e, int j, int h) const {
    return rotate_in_grad_node_tangent_row(D, dD, radial, dradial, g, C, e, j, h);
  }
  template <int K>
  UMA_BODY static void add(const RotateInGradNodeTangentRow<T>& v, int64_t c, T* acc,
                           int64_t stride) {
    rotate_in_grad_node_tangent_at<K>(v, c, acc, stride);
  }
};

#if !defined(__CUDACC__)
template <typename Op>
UMA_ALWAYS_INLINE void rotate_in_edges(const Op& op, int64_t begin, int64_t end) {
  const int64_t C = op.C;
  for (int64_t e = begin; e < end; ++e)
    for (int j = 0; j < 9; ++j)
      with_block_size(block_size(l_row(j)), [&](auto K) UMA_INLINE_LAMBDA {
        for (int h = 0; h < 2; ++h) {
          const auto v = op.row(e, j, h);
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) Op::template at<decltype(K)::value>(v, C, c);
        }
      });
}

template <int V, typename T>
UMA_ALWAYS_INLINE void cpu_run(const RotateInOp<T>& op, int64_t begin, int64_t end) {
  rotate_in_edges(op, begin, end);
}
template <int V, typename T>
UMA_ALWAYS_INLINE void cpu_run(const RotateInTangentOp<T>& op, int64_t begin, int64_t end) {
  rotate_in_edges(op, begin, end);
}

// A node's edges visited in segment order, the next ones' rows fetched while
// this one is summed (kernel_rows.h's prefetch_edge_rows).
template <typename Op, typename Prefetch>
UMA_ALWAYS_INLINE void rotate_in_nodes(const Op& op, int64_t begin, int64_t end,
                                       Prefetch prefetch) {
  const int64_t C = op.C, edges = op.edges;
  for (int64_t n = begin; n < end; ++n) {
    auto* out = op.gx + n * 9 * C;
    for (int h = 0; h < 2; ++h) {
      const int64_t* order = h ? op.tgt_order : op.src_order;
      const int64_t* offsets = h ? op.tgt_offsets : op.src_offsets;
      for (int64_t p = offsets[n]; p < offsets[n + 1]; ++p) {
        const int64_t e = order[p];
        if (p + kPrefetchEdges < offsets[n + 1] && order[p + kPrefetchEdges] < edges)
          prefetch(order[p + kPrefetchEdges], h);
        if (e >= edges) continue;
        for (int j = 0; j < 9; ++j) {
          const auto v = op.row(e, j, h);
          const int r = l_row(j);
          with_block_size(block_size(r), [&](auto K) UMA_INLINE_LAMBDA {
            auto* o = out + block_start(r) * C;
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) Op::template add<decltype(K)::value>(v, c, o + c, C);
          });
        }
      }
    }
  }
}

template <int V, typename T>
UMA_ALWAYS_INLINE void cpu_run(const RotateInGradNodesOp<T>& op, int64_t begin, int64_t end) {
  rotate_in_nodes(op, begin, end, [&](int64_t e, int h) UMA_INLINE_LAMBDA {
    prefetch_edge_rows<T>({{op.D, op.radial}}, op.g, e, op.C, h);
  });
}
template <int V, typename T>
UMA_ALWAYS_INLINE void cpu_run(const RotateInGradNodesTangentOp<T>& op, int64_t begin,
                               int64_t end) {
  rotate_in_nodes(op, begin, end, [&](int64_t e, int h) UMA_INLINE_LAMBDA {
    prefetch_edge_rows<T>({{op.D, op.radial}, {op.dD, op.dradial}}, op.g, e, op.C, h);
  });
}
#else
template <typename Op>
__device__ __forceinline__ void rotate_in_warps(const Op& op) {
  const int64_t C = op.C;
  launch::for_each_row(op.E * 18, [&](int64_t r, int lane) {
    const int64_t e = r / 18;
    const int jh = int(r - e * 18), j = jh >> 1, h = jh & 1;
    const auto v = op.row(e, j, h);
    with_block_size(block_size(l_row(j)), [&](auto K) {
      for (int64_t c = lane; c < C; c += launch::kWarp)
        Op::template at<decltype(K)::value>(v, C, c);
    });
  });
}

template <int V, typename T>
__device__ __forceinline__ void cuda_run(const RotateInOp<T>& op) {
  rotate_in_warps(op);
}
template <int V, typename T>
__device__ __forceinline__ void cuda_run(const RotateInTangentOp<T>& op) {
  rotate_in_warps(op);
}

// One thread per (node, degree, channel).
template <typename Op>
__device__ __forceinline__ void rotate_in_node_threads(const Op& op) {
  const int64_t C = op.C;
  launch::for_each_element(op.N * 3, C, [&](int64_t nl, int64_t c) {
    const int64_t n = nl / 3;
    with_degree(int(nl - n * 3), [&](auto L) {
      constexpr int l = decltype(L)::value, K = 2 * l + 1;
      auto* o = op.gx + (n * 9 + l * l) * C + c;
      std::remove_reference_t<decltype(*o)> acc[K];
#pragma unroll
      for (int k = 0; k < K; ++k) acc[k] = 0;
      for (int h = 0; h < 2; ++h) {
        const int64_t* order = h ? op.tgt_order : op.src_order;
        const int64_t* offsets = h ? op.tgt_offsets : op.src_offsets;
        for (int64_t p = offsets[n], last = offsets[n + 1]; p < last; ++p) {
          const int64_t e = order[p];
          if (e >= op.edges) continue;
#pragma unroll
          for (int i = 0; i < 2 * l + 1; ++i)
            Op::template add<K>(op.row(e, row_of_degree(l, i), h), c, acc, 1);
        }
      }
#pragma unroll
      for (int k = 0; k < K; ++k) o[k * C] += acc[k];
    });
  });
}

template <int V, typename T>
__device__ __forceinline__ void cuda_run(const RotateInGradNodesOp<T>& op) {
  rotate_in_node_threads(op);
}
template <int V, typename T>
__device__ __forceinline__ void cuda_run(const RotateInGradNodesTangentOp<T>& op) {
  rotate_in_node_threads(op);
}
#endif

}  // namespace uma::edges::kernels
