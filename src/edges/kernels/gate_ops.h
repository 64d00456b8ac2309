// The gate's kernels as ops (launch/grid.h): each edge's views built once
// and the channel bodies of kernels/gate.h run over c in [0, H): on the CPU
// a range of edges, the channels one vector loop; on CUDA one thread per
// (edge, channel).
#pragma once

#include <cstdint>

#include "edges/kernels/gate.h"
#include "edges/launch/grid.h"
#if defined(__CUDACC__)
#include "edges/launch/threads.cuh"
#else
#include "edges/cpu/kernel_rows.h"
#endif

#define UMA_GATE_OPS(X) X(GateOp) X(GateGradOp) X(GateGradGradOp)

namespace uma::edges::kernels {

// What every gate op reads: y0 [E, 5H] (rows y0_stride apart), sig [E, 3H]
// and the M rows 3..8 (rows); E edges of H channels.
template <typename T>
struct GateInput {
  const T* y0;
  int64_t y0_stride;
  Rows<const T> rows;
  const T* sig;
  int64_t H, E;

  static constexpr int kVariants = 1;
  static constexpr int64_t kCpuGrain = 32;
  int variant() const { return 0; }
  int64_t cpu_items() const { return E; }
  launch::Grid cuda_grid() const { return launch::threads_for(E * H); }
  UMA_BODY GateEdge<T> input(int64_t e) const { return gate_edge(y0, y0_stride, rows, sig, H, e); }
};

// q (every row written) = the gate of the input.
template <typename T>
struct GateOp : GateInput<T> {
  static constexpr const char* kName = "gate";
  Rows<T> q;

  UMA_BODY GateOut<T> output(int64_t e) const { return gate_out(q, e); }
  UMA_BODY static void at(const GateEdge<T>& in, const GateOut<T>& out, int64_t c) {
    gate_at(in, out, c);
  }
};

// gy0 ([E, 5H] contiguous) and gy (rows 3..8) of the gate along gq.
template <typename T>
struct GateGradOp : GateInput<T> {
  static constexpr const char* kName = "gate_grad";
  Rows<const T> gq;
  T* gy0;
  Rows<T> gy;

  UMA_BODY GateGrad<T> output(int64_t e) const { return gate_grad_edge(gq, gy0, gy, this->H, e); }
  UMA_BODY static void at(const GateEdge<T>& in, const GateGrad<T>& out, int64_t c) {
    gate_grad_at(in, out, c);
  }
};

// The gate's double backward (kernels/gate.h): given the adjoints of
// GateGradOp's outputs (a0 like gy0, a's rows 3..8 like gy), dgq (every row)
// and dy0 ([E, 5H] contiguous), dy (rows 3..8), all written.
template <typename T>
struct GateGradGradOp : GateInput<T> {
  static constexpr const char* kName = "gate_grad_grad";
  Rows<const T> gq;
  const T* a0;
  Rows<const T> a;
  Rows<T> dgq;
  T* dy0;
  Rows<T> dy;

  UMA_BODY GateGradGrad<T> output(int64_t e) const {
    return gate_grad_grad_edge(gq, a0, a, dgq, dy0, dy, this->H, e);
  }
  UMA_BODY static void at(const GateEdge<T>& in, const GateGradGrad<T>& out, int64_t c) {
    gate_grad_grad_at(in, out, c);
  }
};

#if !defined(__CUDACC__)
// A range of edges: an edge's views once, its channels one vector loop.
template <typename Op>
UMA_ALWAYS_INLINE void gate_edges(const Op& op, int64_t begin, int64_t end) {
  const int64_t H = op.H;
  for (int64_t e = begin; e < end; ++e) {
    const auto in = op.input(e);
    const auto out = op.output(e);
#pragma omp simd
    for (int64_t c = 0; c < H; ++c) Op::at(in, out, c);
  }
}

template <int V, typename T>
UMA_ALWAYS_INLINE void cpu_run(const GateOp<T>& op, int64_t begin, int64_t end) {
  gate_edges(op, begin, end);
}
template <int V, typename T>
UMA_ALWAYS_INLINE void cpu_run(const GateGradOp<T>& op, int64_t begin, int64_t end) {
  gate_edges(op, begin, end);
}
template <int V, typename T>
UMA_ALWAYS_INLINE void cpu_run(const GateGradGradOp<T>& op, int64_t begin, int64_t end) {
  gate_edges(op, begin, end);
}
#else
// One thread per (edge, channel).
template <typename Op>
__device__ __forceinline__ void gate_threads(const Op& op) {
  launch::for_each_element(op.E, op.H,
                           [&](int64_t e, int64_t c) { Op::at(op.input(e), op.output(e), c); });
}

template <int V, typename T>
__device__ __forceinline__ void cuda_run(const GateOp<T>& op) {
  gate_threads(op);
}
template <int V, typename T>
__device__ __forceinline__ void cuda_run(const GateGradOp<T>& op) {
  gate_threads(op);
}
template <int V, typename T>
__device__ __forceinline__ void cuda_run(const GateGradGradOp<T>& op) {
  gate_threads(op);
}
#endif

}  // namespace uma::edges::kernels
