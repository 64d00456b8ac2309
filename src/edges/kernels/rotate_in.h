// The rotation into the edge frame and its tangent: one edge e, one M row j
// and one half h of the output's channels at a time (h = 0: the source
// atom's C channels, h = 1: the target's), one channel c per call, for the
// host and for CUDA.  The launchers (edges/cpu/rotate_in.cpp,
// edges/cuda/rotate_in.cu) build a row's view once and run its body over c.
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

namespace uma::nn::kernels {

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

}  // namespace uma::nn::kernels
