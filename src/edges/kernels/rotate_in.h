// The rotation into the edge frame and its tangent: one edge e, one M row j
// and one half h of the output's channels at a time (h = 0: the source
// atom's C channels, h = 1: the target's), one channel c per call, for the
// host and for CUDA.  Its ops (edges/kernels/rotate_in_ops.h,
// rotate_in_grad_ops.h) build a row's view once and run its body over c.
//
// With r = l_row(j), its l-block's K columns of D from k0 = block_start(r),
// and n the edge's source (h = 0) or target (h = 1):
//   out[e, j, hC + c] = radial[e, radial_row(j), hC + c] * sum_k D[e, r, k0 + k] x[n, k0 + k, c]
// D: [E, 9, 9]; x: [N, 9, C]; radial: [E, 6, 2C]; out: pieces of [E, rows, 2C].
#pragma once

#include <cstdint>

#include "edges/kernels/device.h"
#include "edges/kernels/layout.h"
#include "edges/kernels/rows.h"

namespace uma::edges::kernels {

// The pointers of one (e, j, h): D's K entries, x's K rows of C channels,
// radial's and out's C channels.
template <typename T>
struct RotateInRow {
  const T* d;
  const T* x;
  const T* w;
  T* out;
};

template <typename T>
UMA_BODY RotateInRow<T> rotate_in_row(const T* D, const T* x, const int64_t* src,
                                      const int64_t* tgt, const T* radial, const Rows<T>& out,
                                      int64_t C, int64_t e, int j, int h) {
  const int r = l_row(j), k0 = block_start(r);
  const int64_t n = h ? tgt[e] : src[e];
  return {D + e * 81 + r * 9 + k0, x + (n * 9 + k0) * C,
          radial + (e * 6 + radial_row(j)) * 2 * C + h * C, out.row(e, j) + h * C};
}

template <int K, typename T>
UMA_BODY void rotate_in_at(const RotateInRow<T>& v, int64_t C, int64_t c) {
  T a = v.d[0] * v.x[c];
  UMA_UNROLL
  for (int k = 1; k < K; ++k) a += v.d[k] * v.x[k * C + c];
  v.out[c] = a * v.w[c];
}

// ---- the tangent along (dD, dx, dradial): rotate_in is linear in each of D,
// x and radial, so
//   out = radial * sum_k (D dx + dD x) + dradial * sum_k D x
// (the gradient of the incoming gradient in rotate_in's double backward). ----

template <typename T>
struct RotateInTangentRow {
  const T *d, *dd;  // D's and dD's K entries
  const T *x, *dx;  // K rows of C
  const T *w, *dw;  // radial's and dradial's C channels
  T* out;
};

template <typename T>
UMA_BODY RotateInTangentRow<T> rotate_in_tangent_row(const T* D, const T* dD, const T* x,
                                                     const T* dx, const int64_t* src,
                                                     const int64_t* tgt, const T* radial,
                                                     const T* dradial, const Rows<T>& out,
                                                     int64_t C, int64_t e, int j, int h) {
  const int r = l_row(j), k0 = block_start(r);
  const int64_t n = h ? tgt[e] : src[e];
  const int64_t d_at = e * 81 + r * 9 + k0, x_at = (n * 9 + k0) * C,
                w_at = (e * 6 + radial_row(j)) * 2 * C + h * C;
  return {D + d_at,
          dD + d_at,
          x + x_at,
          dx + x_at,
          radial + w_at,
          dradial + w_at,
          out.row(e, j) + h * C};
}

template <int K, typename T>
UMA_BODY void rotate_in_tangent_at(const RotateInTangentRow<T>& v, int64_t C, int64_t c) {
  T a = v.d[0] * v.x[c], t = v.d[0] * v.dx[c] + v.dd[0] * v.x[c];
  UMA_UNROLL
  for (int k = 1; k < K; ++k) {
    a += v.d[k] * v.x[k * C + c];
    t += v.d[k] * v.dx[k * C + c] + v.dd[k] * v.x[k * C + c];
  }
  v.out[c] = t * v.w[c] + a * v.dw[c];
}

// ---- the backward for the radial weights and D, per edge e and M row j,
// both halves at channel c (x_h: the endpoint's K rows, w and g: [2C] rows):
//   rotated_h[c] = sum_k d[k] x_h[k, c]
//   gw[hC + c] (+)= g[hC + c] rotated_h[c]  (= for the radial row's first M
//                   row, += for its second: rows 3 and 5, 4 and 6, 7 and 8)
//   a[k] = sum over h, c of g[hC + c] w[hC + c] x_h[k, c]: gD[e, r, k0 + k] += a[k]
// The channel terms of a[k] are the body's; the launchers sum them. --------------

// gw (+)= g times the two halves' values u0, u1 at channel c ([2C] rows).
template <bool Accumulate, typename T>
UMA_BODY void radial_grad_store(T* gw, const T* g, int64_t C, int64_t c, T u0, T u1) {
  if constexpr (Accumulate) {
    gw[c] += g[c] * u0;
    gw[C + c] += g[C + c] * u1;
  } else {
    gw[c] = g[c] * u0;
    gw[C + c] = g[C + c] * u1;
  }
}

template <typename T>
struct RotateInGradRow {
  const T* d;        // K entries of D
  const T *x0, *x1;  // the source's and the target's K rows of C
  const T *w, *g;    // [2C]: the radial weights and the incoming gradient
  T* gw;             // [2C]: the radial weights' gradient
};

template <typename T>
UMA_BODY RotateInGradRow<T> rotate_in_grad_row(const T* D, const T* x, const int64_t* src,
                                               const int64_t* tgt, const T* radial,
                                               const Rows<const T>& g, T* gradial, int64_t C,
                                               int64_t e, int j) {
  const int r = l_row(j), k0 = block_start(r);
  const int64_t w_at = (e * 6 + radial_row(j)) * 2 * C;
  return {D + e * 81 + r * 9 + k0,
          x + (src[e] * 9 + k0) * C,
          x + (tgt[e] * 9 + k0) * C,
          radial + w_at,
          g.row(e, j),
          gradial + w_at};
}

template <int K, bool Accumulate, typename T>
UMA_BODY void rotate_in_grad_radial_at(const RotateInGradRow<T> v, int64_t C, int64_t c) {
  T r0 = v.d[0] * v.x0[c], r1 = v.d[0] * v.x1[c];
  UMA_UNROLL
  for (int k = 1; k < K; ++k) {
    r0 += v.d[k] * v.x0[k * C + c];
    r1 += v.d[k] * v.x1[k * C + c];
  }
  radial_grad_store<Accumulate>(v.gw, v.g, C, c, r0, r1);
}

// a_k += the terms of a[k] at channel c, both halves.
template <int K, typename T>
UMA_BODY void rotate_in_grad_D_terms_at(const RotateInGradRow<T> v, int64_t C, int64_t c, T& a0,
                                        T& a1, T& a2, T& a3, T& a4) {
  const T q0 = v.g[c] * v.w[c], q1 = v.g[C + c] * v.w[C + c];
  a0 += q0 * v.x0[c] + q1 * v.x1[c];
  if constexpr (K > 1) {
    a1 += q0 * v.x0[C + c] + q1 * v.x1[C + c];
    a2 += q0 * v.x0[2 * C + c] + q1 * v.x1[2 * C + c];
  }
  if constexpr (K > 3) {
    a3 += q0 * v.x0[3 * C + c] + q1 * v.x1[3 * C + c];
    a4 += q0 * v.x0[4 * C + c] + q1 * v.x1[4 * C + c];
  }
}

// ---- the backward for x, one edge's contribution to one endpoint n (h = 0:
// the edge's source, the first C channels; h = 1: its target, the second):
//   gx[n, k0 + k, c] += d[k] (g[e, j, hC + c] w[hC + c])
// summed over n's edges as source, then as target, in their segments' order
// (the launchers: per node; the CPU also per edge, into a thread's own gx). --

template <typename T>
struct RotateInGradNodeRow {
  const T* d;      // K entries of D
  const T *g, *w;  // C: this half of the incoming gradient and the radial weights
};

template <typename T>
UMA_BODY RotateInGradNodeRow<T> rotate_in_grad_node_row(const T* D, const T* radial,
                                                        const Rows<const T>& g, int64_t C,
                                                        int64_t e, int j, int h) {
  const int r = l_row(j);
  return {D + e * 81 + r * 9 + block_start(r), g.row(e, j) + h * C,
          radial + (e * 6 + radial_row(j)) * 2 * C + h * C};
}

// acc[k * stride] += the row's contribution to column k0 + k at channel c.
template <int K, typename T>
UMA_BODY void rotate_in_grad_node_at(const RotateInGradNodeRow<T> v, int64_t c, T* acc,
                                     int64_t stride) {
  const T gr = v.g[c] * v.w[c];
  UMA_UNROLL
  for (int k = 0; k < K; ++k) acc[k * stride] += v.d[k] * gr;
}

// ---- the tangents of the backward along (dD, dx, dradial), as the double
// backward runs them.  The radial weights' and D's part, per edge and row,
// both halves:
//   t_h[c] = sum_k d[k] dx_h[k, c] + dd[k] x_h[k, c]
//   gw[hC + c] (+)= g[hC + c] t_h[c]  (= and += as in the backward)
//   a[k] = sum over h, c of g (w dx_h[k, c] + dw x_h[k, c]): gD[e, r, k0 + k] += a[k]
// x's part, per node as in the backward:
//   gx[n, k0 + k, c] += dd[k] (g w) + d[k] (g dw) -----------------------------

template <typename T>
struct RotateInGradTangentRow {
  const T *d, *dd;               // K entries of D and dD
  const T *x0, *dx0, *x1, *dx1;  // the endpoints' K rows of C, and their tangents
  const T *w, *dw, *g;           // [2C]
  T* gw;                         // [2C]
};

template <typename T>
UMA_BODY RotateInGradTangentRow<T> rotate_in_grad_tangent_row(const T* D, const T* dD, const T* x,
                                                              const T* dx, const int64_t* src,
                                                              const int64_t* tgt, const T* radial,
                                                              const T* dradial,
                                                              const Rows<const T>& g, T* gradial,
                                                              int64_t C, int64_t e, int j) {
  const int r = l_row(j), k0 = block_start(r);
  const int64_t d_at = e * 81 + r * 9 + k0, w_at = (e * 6 + radial_row(j)) * 2 * C;
  const int64_t at0 = (src[e] * 9 + k0) * C, at1 = (tgt[e] * 9 + k0) * C;
  return {D + d_at, dD + d_at,     x + at0,        dx + at0,    x + at1,
          dx + at1, radial + w_at, dradial + w_at, g.row(e, j), gradial + w_at};
}

template <int K, bool Accumulate, typename T>
UMA_BODY void rotate_in_grad_tangent_radial_at(const RotateInGradTangentRow<T> v, int64_t C,
                                               int64_t c) {
  T t0 = v.d[0] * v.dx0[c] + v.dd[0] * v.x0[c], t1 = v.d[0] * v.dx1[c] + v.dd[0] * v.x1[c];
  UMA_UNROLL
  for (int k = 1; k < K; ++k) {
    t0 += v.d[k] * v.dx0[k * C + c] + v.dd[k] * v.x0[k * C + c];
    t1 += v.d[k] * v.dx1[k * C + c] + v.dd[k] * v.x1[k * C + c];
  }
  radial_grad_store<Accumulate>(v.gw, v.g, C, c, t0, t1);
}

// a_k += the terms of a[k] at channel c, both halves.
template <int K, typename T>
UMA_BODY void rotate_in_grad_tangent_D_terms_at(const RotateInGradTangentRow<T> v, int64_t C,
                                                int64_t c, T& a0, T& a1, T& a2, T& a3, T& a4) {
  const T g0 = v.g[c], g1 = v.g[C + c];
  const T r0 = g0 * v.w[c], s0 = g0 * v.dw[c], r1 = g1 * v.w[C + c], s1 = g1 * v.dw[C + c];
  auto term = [&](int k) UMA_INLINE_LAMBDA {
    return r0 * v.dx0[k * C + c] + s0 * v.x0[k * C + c] + r1 * v.dx1[k * C + c] +
           s1 * v.x1[k * C + c];
  };
  a0 += term(0);
  if constexpr (K > 1) {
    a1 += term(1);
    a2 += term(2);
  }
  if constexpr (K > 3) {
    a3 += term(3);
    a4 += term(4);
  }
}

template <typename T>
struct RotateInGradNodeTangentRow {
  const T *d, *dd;      // K entries of D and dD
  const T *g, *w, *dw;  // C: this half
};

template <typename T>
UMA_BODY RotateInGradNodeTangentRow<T> rotate_in_grad_node_tangent_row(
    const T* D, const T* dD, const T* radial, const T* dradial, const Rows<const T>& g, int64_t C,
    int64_t e, int j, int h) {
  const int r = l_row(j);
  const int64_t d_at = e * 81 + r * 9 + block_start(r),
                w_at = (e * 6 + radial_row(j)) * 2 * C + h * C;
  return {D + d_at, dD + d_at, g.row(e, j) + h * C, radial + w_at, dradial + w_at};
}

template <int K, typename T>
UMA_BODY void rotate_in_grad_node_tangent_at(const RotateInGradNodeTangentRow<T> v, int64_t c,
                                             T* acc, int64_t stride) {
  const T gw = v.g[c] * v.w[c], gdw = v.g[c] * v.dw[c];
  UMA_UNROLL
  for (int k = 0; k < K; ++k) acc[k * stride] += v.dd[k] * gw + v.d[k] * gdw;
}

}  // namespace uma::edges::kernels
