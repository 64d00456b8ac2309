// The rotation back from the edge frame, scaled by the envelope and summed
// into each edge's target atom: one edge's contribution to one degree l of
// its target's rows at one channel c, for the host and for CUDA.  The
// ops (edges/kernels/rotate_out_ops.h) visit a
// node's edges in the order of the edges sorted by target (order, offsets)
// and add each edge's contribution into the node's sums: on the CPU into
// out's rows, edge by edge, over all channels at once; on CUDA into one
// thread's registers per (node, l, channel), added into out at the end.  Each output is thus one sum in
// a fixed order on both: no atomics, the same bits every run.
//
// With the l-block's K = 2l + 1 columns from k0 = l * l, for k < K:
//   out[n, k0 + k, c] += sum over the node's edges e (entries of order[offsets[n]
//                       .. offsets[n + 1]) below `edges`), in that order,
//                       of sum over the M rows j < rows of degree l, ascending,
//                       of (envelope[e] D[e, l_row(j), k0 + k]) y[e, j, c]
// D: [E, 9, 9]; envelope: [E]; y: pieces of [E, rows, C]; out: [N, 9, C]
// (rows 3: only the m = 0 rows, one of each degree).
#pragma once

#include <cstdint>

#include "edges/kernels/device.h"
#include "edges/kernels/layout.h"
#include "edges/kernels/rows.h"

namespace uma::edges::kernels {

// One edge's view for degree l: its rows of y and the envelope-scaled D
// entries that multiply them; all rows (rows 9) or the m = 0 row alone (rows 3).
template <int l, bool AllRows, typename T>
struct RotateOutEdge {
  static constexpr int K = 2 * l + 1, J = AllRows ? rows_of_degree(l) : 1;
  const T* y[J];
  T sd[J][K];
};

template <int l, bool AllRows, typename T>
UMA_BODY RotateOutEdge<l, AllRows, T> rotate_out_edge(const T* D, const T* envelope,
                                                      const Rows<const T>& y, int64_t e) {
  RotateOutEdge<l, AllRows, T> v;
  constexpr int K = v.K, k0 = l * l;
  const T s = envelope[e];
  UMA_UNROLL
  for (int i = 0; i < v.J; ++i) {
    const int j = row_of_degree(l, i);
    const T* d = D + e * 81 + l_row(j) * 9 + k0;
    v.y[i] = y.row(e, j);
    UMA_UNROLL
    for (int k = 0; k < K; ++k) v.sd[i][k] = s * d[k];
  }
  return v;
}

// acc[k * stride] += the edge's contribution through its i-th row (i < J) to
// column k0 + k at channel c.
template <int l, bool AllRows, typename T>
UMA_BODY void rotate_out_add(const RotateOutEdge<l, AllRows, T>& v, int i, int64_t c, T* acc,
                             int64_t stride) {
  const T yc = v.y[i][c];
  UMA_UNROLL
  for (int k = 0; k < v.K; ++k) acc[k * stride] += v.sd[i][k] * yc;
}

// ---- the backward, per edge e and M row j < rows (r = l_row(j), the
// l-block's K columns from k0, d = D[e, r, k0..], s = envelope[e], gt = the
// gradient's rows k0.. of the target node):
//   gy[e, j, c] = s sum_k d[k] gt[k, c]
//   a[k] = sum_c gt[k, c] y[e, j, c]: gD[e, r, k0 + k] = s a[k],
//   genvelope[e] = sum over j of sum_k d[k] a[k]
// The channel terms of a[k] are the bodies' (rotate_out_grad_terms_at); the
// launchers sum them over c and j (the CPU in vector lanes, CUDA in a warp
// per row and a block per edge). ----------------------------------------------

template <typename T>
struct RotateOutGradRow {
  const T* d;   // K entries of D
  T s;          // the envelope
  const T* gt;  // K rows of C: the incoming gradient at the target
  const T* y;   // C: the forward's input row
  T* gy;        // C, or null (no gy wanted)
};

template <typename T>
UMA_BODY RotateOutGradRow<T> rotate_out_grad_row(const T* D, const T* envelope,
                                                 const Rows<const T>& y, const int64_t* tgt,
                                                 const T* gout, const Rows<T>& gy, int64_t C,
                                                 int64_t e, int j) {
  const int r = l_row(j), k0 = block_start(r);
  return {D + e * 81 + r * 9 + k0, envelope[e], gout + (tgt[e] * 9 + k0) * C, y.row(e, j),
          gy.base[0] ? gy.row(e, j) : nullptr};
}

template <int K, typename T>
UMA_BODY void rotate_out_grad_gy_at(const RotateOutGradRow<T> v, int64_t C, int64_t c) {
  T acc = v.d[0] * v.gt[c];
  UMA_UNROLL
  for (int k = 1; k < K; ++k) acc += v.d[k] * v.gt[k * C + c];
  v.gy[c] = v.s * acc;
}

// a_k += gt[k, c] y[c] for k < K: the terms of a[k] at channel c (scalars,
// so that a CPU vector loop keeps them in registers as its reduction).
template <int K, typename T>
UMA_BODY void rotate_out_grad_terms_at(const RotateOutGradRow<T> v, int64_t C, int64_t c, T& a0,
                                       T& a1, T& a2, T& a3, T& a4) {
  const T yc = v.y[c];
  a0 += v.gt[c] * yc;
  if constexpr (K > 1) {
    a1 += v.gt[C + c] * yc;
    a2 += v.gt[2 * C + c] * yc;
  }
  if constexpr (K > 3) {
    a3 += v.gt[3 * C + c] * yc;
    a4 += v.gt[4 * C + c] * yc;
  }
}

// ---- the tangents along (dD, denvelope, dy), as the double backward runs
// them, with m1 = s dd + ds d (the tangent of s d).  The forward's, per node
// as the forward:
//   out[n, k0 + k, c] += sum over edges and rows as above of m1[k] y[c] + (s d[k]) dy[c]
// The backward's, per edge and row (gy2: the gradient for y; a, b: sums over c):
//   gy2[e, j, c] = sum_k m1[k] gt[k, c]
//   a[k] = sum_c gt[k, c] y[c], b[k] = sum_c gt[k, c] dy[c]:
//   gD2[e, r, k0 + k] = ds a[k] + s b[k],
//   genvelope2[e] = sum over j of sum_k dd[k] a[k] + d[k] b[k] -----------------

template <int l, bool AllRows, typename T>
struct RotateOutTangentEdge {
  static constexpr int K = 2 * l + 1, J = AllRows ? rows_of_degree(l) : 1;
  const T *y[J], *dy[J];
  T m1[J][K], sd[J][K];
};

template <int l, bool AllRows, typename T>
UMA_BODY RotateOutTangentEdge<l, AllRows, T> rotate_out_tangent_edge(
    const T* D, const T* dD, const T* envelope, const T* denvelope, const Rows<const T>& y,
    const Rows<const T>& dy, int64_t e) {
  RotateOutTangentEdge<l, AllRows, T> v;
  constexpr int K = v.K, k0 = l * l;
  const T s = envelope[e], ds = denvelope[e];
  UMA_UNROLL
  for (int i = 0; i < v.J; ++i) {
    const int j = row_of_degree(l, i);
    const int64_t at = e * 81 + l_row(j) * 9 + k0;
    v.y[i] = y.row(e, j);
    v.dy[i] = dy.row(e, j);
    UMA_UNROLL
    for (int k = 0; k < K; ++k) {
      v.m1[i][k] = s * dD[at + k] + ds * D[at + k];
      v.sd[i][k] = s * D[at + k];
    }
  }
  return v;
}

template <int l, bool AllRows, typename T>
UMA_BODY void rotate_out_tangent_add(const RotateOutTangentEdge<l, AllRows, T>& v, int i, int64_t c,
                                     T* acc, int64_t stride) {
  const T yc = v.y[i][c], dyc = v.dy[i][c];
  UMA_UNROLL
  for (int k = 0; k < v.K; ++k) acc[k * stride] += v.m1[i][k] * yc + v.sd[i][k] * dyc;
}

template <typename T>
struct RotateOutGradTangentRow {
  const T *d, *dd;  // K entries of D and dD
  T s, ds;          // the envelope and its tangent
  T m1[5];          // s dd + ds d (K of them)
  const T* gt;      // K rows of C: the incoming gradient at the target
  const T *y, *dy;  // C
  T* gy2;           // C
};

template <typename T>
UMA_BODY RotateOutGradTangentRow<T> rotate_out_grad_tangent_row(
    const T* D, const T* dD, const T* envelope, const T* denvelope, const Rows<const T>& y,
    const Rows<const T>& dy, const int64_t* tgt, const T* gout, const Rows<T>& gy2, int64_t C,
    int64_t e, int j) {
  const int r = l_row(j), k0 = block_start(r);
  const int64_t at = e * 81 + r * 9 + k0;
  RotateOutGradTangentRow<T> v{D + at,       dD + at,         envelope[e],
                               denvelope[e], {0, 0, 0, 0, 0}, gout + (tgt[e] * 9 + k0) * C,
                               y.row(e, j),  dy.row(e, j),    gy2.row(e, j)};
  // All five, whatever K: a constant loop keeps m1 in registers on CUDA (the
  // entries past K, still within D's row, go unused).
  UMA_UNROLL
  for (int k = 0; k < 5; ++k) v.m1[k] = v.s * v.dd[k] + v.ds * v.d[k];
  return v;
}

template <int K, typename T>
UMA_BODY void rotate_out_grad_tangent_gy_at(const RotateOutGradTangentRow<T>& v, int64_t C,
                                            int64_t c) {
  T acc = v.m1[0] * v.gt[c];
  if constexpr (K > 1) acc += v.m1[1] * v.gt[C + c] + v.m1[2] * v.gt[2 * C + c];
  if constexpr (K > 3) acc += v.m1[3] * v.gt[3 * C + c] + v.m1[4] * v.gt[4 * C + c];
  v.gy2[c] = acc;
}

// a_k += gt[k, c] y[c], b_k += gt[k, c] dy[c] for k < K.
template <int K, typename T>
UMA_BODY void rotate_out_grad_tangent_terms_at(const RotateOutGradTangentRow<T>& v, int64_t C,
                                               int64_t c, T& a0, T& a1, T& a2, T& a3, T& a4, T& b0,
                                               T& b1, T& b2, T& b3, T& b4) {
  const T yc = v.y[c], dyc = v.dy[c], g0 = v.gt[c];
  a0 += g0 * yc;
  b0 += g0 * dyc;
  if constexpr (K > 1) {
    const T g1 = v.gt[C + c], g2 = v.gt[2 * C + c];
    a1 += g1 * yc;
    a2 += g2 * yc;
    b1 += g1 * dyc;
    b2 += g2 * dyc;
  }
  if constexpr (K > 3) {
    const T g3 = v.gt[3 * C + c], g4 = v.gt[4 * C + c];
    a3 += g3 * yc;
    a4 += g4 * yc;
    b3 += g3 * dyc;
    b4 += g4 * dyc;
  }
}

}  // namespace uma::edges::kernels
