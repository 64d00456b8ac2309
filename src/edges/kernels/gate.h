// The gate between the SO(2) convolutions, its gradient and its double
// backward: one edge e and one channel c at a time, for the host and for
// CUDA.  Its ops (edges/kernels/gate_ops.h) build an
// edge's views once and run the channel bodies over c in [0, H).
//
// Input per edge: y0 [5H] = [logit l1 | logit l2 | l0m0 | l1m0 | l2m0], sig
// [3H] = sigmoid of y0's first 3H (l1, l2, l0m0), and the M rows 3..8 (H
// each) from the pieces.  Output: q = silu(l0m0) on row 0, sigmoid(logit_l)
// times every other row of degree l (rows 1, 3, 5: l = 1; 2, 4, 6, 7, 8: l = 2).
#pragma once

#include <cstdint>

#include "edges/kernels/device.h"
#include "edges/kernels/rows.h"

namespace uma::edges::kernels {

// Degree of M row j (rows 1..8; row 0 is l = 0).
UMA_BODY constexpr bool degree_one(int j) { return j == 1 || j == 3 || j == 5; }

// One edge's view of the gate's inputs.
template <typename T>
struct GateEdge {
  const T *s1, *s2, *s0;  // sigmoid of the l = 1 and l = 2 logits and of l0m0
  const T* y[9];          // the M rows of the input
};

template <typename T>
UMA_BODY GateEdge<T> gate_edge(const T* y0, int64_t y0_stride, const Rows<const T>& rows,
                               const T* sig, int64_t H, int64_t e) {
  GateEdge<T> g;
  g.s1 = sig + e * 3 * H;
  g.s2 = g.s1 + H;
  g.s0 = g.s1 + 2 * H;
  UMA_UNROLL
  for (int j = 0; j < 3; ++j) g.y[j] = y0 + e * y0_stride + (2 + j) * H;
  UMA_UNROLL
  for (int j = 3; j < 9; ++j) g.y[j] = rows.row(e, j);
  return g;
}

// ---- the gate: q[j][c] -----------------------------------------------------

template <typename T>
struct GateOut {
  T* q[9];
};

template <typename T>
UMA_BODY GateOut<T> gate_out(const Rows<T>& q, int64_t e) {
  GateOut<T> o;
  UMA_UNROLL
  for (int j = 0; j < 9; ++j) o.q[j] = q.row(e, j);
  return o;
}

template <typename T>
UMA_BODY void gate_at(const GateEdge<T>& in, const GateOut<T>& out, int64_t c) {
  const T s1 = in.s1[c], s2 = in.s2[c];
  out.q[0][c] = in.y[0][c] * in.s0[c];
  UMA_UNROLL
  for (int j = 1; j < 9; ++j) out.q[j][c] = in.y[j][c] * (degree_one(j) ? s1 : s2);
}

// ---- its gradient along gq: gy0 [E, 5H] (the logits' rows, then rows 0..2),
// gy rows 3..8 -----------------------------------------------------------------

template <typename T>
struct GateGrad {
  const T* g[9];  // gq's rows
  T* gy0;         // this edge's [5H] row of gy0
  T* gy[9];       // rows 3..8 of gy (0..2 unused)
  int64_t H;
};

template <typename T>
UMA_BODY GateGrad<T> gate_grad_edge(const Rows<const T>& gq, T* gy0, const Rows<T>& gy, int64_t H,
                                    int64_t e) {
  GateGrad<T> v;
  UMA_UNROLL
  for (int j = 0; j < 9; ++j) {
    v.g[j] = gq.row(e, j);
    v.gy[j] = j < 3 ? nullptr : gy.row(e, j);
  }
  v.gy0 = gy0 + e * 5 * H;
  v.H = H;
  return v;
}

template <typename T>
UMA_BODY void gate_grad_at(const GateEdge<T>& in, const GateGrad<T>& v, int64_t c) {
  const T s1 = in.s1[c], s2 = in.s2[c], s0 = in.s0[c];
  const int64_t H = v.H;
  T gs1 = 0, gs2 = 0;  // <g, y> over the rows of degree 1 and 2
  UMA_UNROLL
  for (int j = 1; j < 9; ++j) (degree_one(j) ? gs1 : gs2) += v.g[j][c] * in.y[j][c];
  v.gy0[c] = gs1 * s1 * (1 - s1);
  v.gy0[H + c] = gs2 * s2 * (1 - s2);
  v.gy0[2 * H + c] = v.g[0][c] * s0 * (1 + in.y[0][c] * (1 - s0));
  v.gy0[3 * H + c] = v.g[1][c] * s1;
  v.gy0[4 * H + c] = v.g[2][c] * s2;
  UMA_UNROLL
  for (int j = 3; j < 9; ++j) v.gy[j][c] = v.g[j][c] * (degree_one(j) ? s1 : s2);
}

// ---- the double backward: given the adjoints a of gate_grad's outputs (a0
// like gy0, rows 3..8 like gy), the gradients of <a, gate_grad(y, gq)> for gq
// (dgq, all rows) and for y (dy0 like gy0, dy rows 3..8).  With s = sigmoid:
// s' = s(1 - s), s'' = s'(1 - 2s); silu'(y) = s(1 + y(1 - s)),
// silu''(y) = s'(2 + y(1 - 2s)). ----------------------------------------------

template <typename T>
struct GateGradGrad {
  const T* g[9];       // gq's rows
  const T* a[9];       // the adjoints of rows 0..8 of the gradient (0..2 inside a0's row)
  const T *aL1, *aL2;  // the adjoints of the logits' gradients
  T* dg[9];
  T* dy[9];  // rows 0..2 inside dy0's row, 3..8 in the pieces
  T *dL1, *dL2;
};

template <typename T>
UMA_BODY GateGradGrad<T> gate_grad_grad_edge(const Rows<const T>& gq, const T* a0,
                                             const Rows<const T>& a, const Rows<T>& dgq, T* dy0,
                                             const Rows<T>& dy, int64_t H, int64_t e) {
  GateGradGrad<T> v;
  v.aL1 = a0 + e * 5 * H;
  v.aL2 = v.aL1 + H;
  v.dL1 = dy0 + e * 5 * H;
  v.dL2 = v.dL1 + H;
  UMA_UNROLL
  for (int j = 0; j < 9; ++j) {
    v.g[j] = gq.row(e, j);
    v.dg[j] = dgq.row(e, j);
    v.a[j] = j < 3 ? v.aL1 + (2 + j) * H : a.row(e, j);
    v.dy[j] = j < 3 ? v.dL1 + (2 + j) * H : dy.row(e, j);
  }
  return v;
}

template <typename T>
UMA_BODY void gate_grad_grad_at(const GateEdge<T>& in, const GateGradGrad<T>& v, int64_t c) {
  const T s0 = in.s0[c], s1 = in.s1[c], s2 = in.s2[c];
  const T p1 = s1 * (1 - s1), p2 = s2 * (1 - s2), p0 = s0 * (1 - s0);
  const T u1 = v.aL1[c] * p1, u2 = v.aL2[c] * p2;
  // row 0: silu
  const T y0 = in.y[0][c], a0 = v.a[0][c];
  v.dg[0][c] = a0 * s0 * (1 + y0 * (1 - s0));
  v.dy[0][c] = a0 * v.g[0][c] * p0 * (2 + y0 * (1 - 2 * s0));
  // the rows of degree 1 (1, 3, 5) and 2 (2, 4, 6, 7, 8)
  T gy1 = 0, ag1 = 0, gy2 = 0, ag2 = 0;
  UMA_UNROLL
  for (int j = 1; j < 9; ++j) {
    const bool one = degree_one(j);
    const T u = one ? u1 : u2, s = one ? s1 : s2;
    const T gj = v.g[j][c], yj = in.y[j][c], aj = v.a[j][c];
    v.dg[j][c] = u * yj + aj * s;
    v.dy[j][c] = u * gj;
    (one ? gy1 : gy2) += gj * yj;
    (one ? ag1 : ag2) += aj * gj;
  }
  v.dL1[c] = u1 * gy1 * (1 - 2 * s1) + ag1 * p1;
  v.dL2[c] = u2 * gy2 * (1 - 2 * s2) + ag2 * p2;
}

}  // namespace uma::edges::kernels
