// The lean edge kernels' gate family on the CPU: ranges of edges or nodes,
// each called from at::parallel_for (edges/lean_edges.cpp).  Compiled once per
// scalar type (the explicit instantiations at the end).
#include "edges/cpu/lean_kernels.h"

#include "edges/cpu/kernel_rows.h"

namespace uma::nn::kernels {

// The gate between the convolutions: silu on l0m0, sigmoid(logit_l) on every
// other row of degree l.
template <typename T>
UMA_VECTOR_CLONES void gate(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig,
                            Rows<T> q, int64_t H, int64_t begin, int64_t end) {
  for (int64_t e = begin; e < end; ++e) {
    const auto in = gate_edge(y0, y0_stride, rows, sig, H, e);
    const T *s0 = in.s0, *s1 = in.s1, *s2 = in.s2;
    const T* const* y = in.y;
    T* o[9];
    for (int j = 0; j < 9; ++j) o[j] = q.row(e, j);
#pragma omp simd
    for (int64_t c = 0; c < H; ++c) {
      o[0][c] = y[0][c] * s0[c];
      o[1][c] = y[1][c] * s1[c];
      o[2][c] = y[2][c] * s2[c];
      o[3][c] = y[3][c] * s1[c];
      o[4][c] = y[4][c] * s2[c];
      o[5][c] = y[5][c] * s1[c];
      o[6][c] = y[6][c] * s2[c];
      o[7][c] = y[7][c] * s2[c];
      o[8][c] = y[8][c] * s2[c];
    }
  }
}

// gy0 ([E, 5H] contiguous) and gy (pieces 1 and 2) of gate.
template <typename T>
UMA_VECTOR_CLONES void gate_grad(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig,
                                 Rows<const T> gq, T* gy0, Rows<T> gy, int64_t H, int64_t begin,
                                 int64_t end) {
  for (int64_t e = begin; e < end; ++e) {
    const auto in = gate_edge(y0, y0_stride, rows, sig, H, e);
    const T *s0 = in.s0, *s1 = in.s1, *s2 = in.s2;
    const T* const* y = in.y;
    const T* g[9];
    for (int j = 0; j < 9; ++j) g[j] = gq.row(e, j);
    T* o0 = gy0 + e * 5 * H;  // the two logit rows, then rows 0..2
    T* o[9] = {};             // rows 3..8
    for (int j = 3; j < 9; ++j) o[j] = gy.row(e, j);
#pragma omp simd
    for (int64_t c = 0; c < H; ++c) {
      const T gs1 = g[1][c] * y[1][c] + g[3][c] * y[3][c] + g[5][c] * y[5][c];
      const T gs2 = g[2][c] * y[2][c] + g[4][c] * y[4][c] + g[6][c] * y[6][c] + g[7][c] * y[7][c] +
                    g[8][c] * y[8][c];
      o0[c] = gs1 * s1[c] * (1 - s1[c]);
      o0[H + c] = gs2 * s2[c] * (1 - s2[c]);
      o0[2 * H + c] = g[0][c] * s0[c] * (1 + y[0][c] * (1 - s0[c]));
      o0[3 * H + c] = g[1][c] * s1[c];
      o0[4 * H + c] = g[2][c] * s2[c];
      o[3][c] = g[3][c] * s1[c];
      o[4][c] = g[4][c] * s2[c];
      o[5][c] = g[5][c] * s1[c];
      o[6][c] = g[6][c] * s2[c];
      o[7][c] = g[7][c] * s2[c];
      o[8][c] = g[8][c] * s2[c];
    }
  }
}

// The double backward of gate: given the adjoints a of gate_grad's outputs
// (a0: [E, 5H] like gy0, pieces 1 and 2 like gy), the gradients of
// <a, gate_grad(y, gq)> with respect to gq (dgq, pieces 0..2) and to y (dy0
// [E, 5H] contiguous, dy pieces 1 and 2).  With s = sigmoid: s' = s(1 - s),
// s'' = s'(1 - 2s); silu'(y) = s(1 + y(1 - s)), silu''(y) = s'(2 + y(1 - 2s)).
template <typename T>
UMA_VECTOR_CLONES void gate_grad_grad(const T* y0, int64_t y0_stride, Rows<const T> rows,
                                      const T* sig, Rows<const T> gq, const T* a0, Rows<const T> a,
                                      Rows<T> dgq, T* dy0, Rows<T> dy, int64_t H, int64_t begin,
                                      int64_t end) {
  for (int64_t e = begin; e < end; ++e) {
    const auto in = gate_edge(y0, y0_stride, rows, sig, H, e);
    const T *s0 = in.s0, *s1 = in.s1, *s2 = in.s2;
    const T* const* y = in.y;
    const T *g[9], *ar[9];
    T *dg[9], *dyr[9];
    const T* aL1 = a0 + e * 5 * H;  // adjoints of the logits' gradients
    const T* aL2 = aL1 + H;
    T* dL1 = dy0 + e * 5 * H;
    T* dL2 = dL1 + H;
    for (int j = 0; j < 9; ++j) {
      g[j] = gq.row(e, j);
      dg[j] = dgq.row(e, j);
      ar[j] = j < 3 ? aL1 + (2 + j) * H : a.row(e, j);
      dyr[j] = j < 3 ? dL1 + (2 + j) * H : dy.row(e, j);
    }
#pragma omp simd
    for (int64_t c = 0; c < H; ++c) {
      const T p1 = s1[c] * (1 - s1[c]), p2 = s2[c] * (1 - s2[c]), p0 = s0[c] * (1 - s0[c]);
      const T u1 = aL1[c] * p1, u2 = aL2[c] * p2;
      // row 0: silu
      dg[0][c] = ar[0][c] * s0[c] * (1 + y[0][c] * (1 - s0[c]));
      dyr[0][c] = ar[0][c] * g[0][c] * p0 * (2 + y[0][c] * (1 - 2 * s0[c]));
      // rows of degree 1 (1, 3, 5) and 2 (2, 4, 6, 7, 8)
      T gy1 = 0, ag1 = 0, gy2 = 0, ag2 = 0;
      for (int j = 1; j < 9; ++j) {
        const bool one = j == 1 || j == 3 || j == 5;
        const T u = one ? u1 : u2, s = one ? s1[c] : s2[c];
        const T gj = g[j][c], yj = y[j][c], aj = ar[j][c];
        dg[j][c] = u * yj + aj * s;
        dyr[j][c] = u * gj;
        (one ? gy1 : gy2) += gj * yj;
        (one ? ag1 : ag2) += aj * gj;
      }
      dL1[c] = u1 * gy1 * (1 - 2 * s1[c]) + ag1 * p1;
      dL2[c] = u2 * gy2 * (1 - 2 * s2[c]) + ag2 * p2;
    }
  }
}

template void gate<float>(const float* y0, int64_t y0_stride, Rows<const float> rows,
                          const float* sig, Rows<float> q, int64_t H, int64_t begin, int64_t end);
template void gate<double>(const double* y0, int64_t y0_stride, Rows<const double> rows,
                           const double* sig, Rows<double> q, int64_t H, int64_t begin,
                           int64_t end);
template void gate_grad<float>(const float* y0, int64_t y0_stride, Rows<const float> rows,
                               const float* sig, Rows<const float> gq, float* gy0, Rows<float> gy,
                               int64_t H, int64_t begin, int64_t end);
template void gate_grad<double>(const double* y0, int64_t y0_stride, Rows<const double> rows,
                                const double* sig, Rows<const double> gq, double* gy0,
                                Rows<double> gy, int64_t H, int64_t begin, int64_t end);
template void gate_grad_grad<float>(const float* y0, int64_t y0_stride, Rows<const float> rows,
                                    const float* sig, Rows<const float> gq, const float* a0,
                                    Rows<const float> a, Rows<float> dgq, float* dy0,
                                    Rows<float> dy, int64_t H, int64_t begin, int64_t end);
template void gate_grad_grad<double>(const double* y0, int64_t y0_stride, Rows<const double> rows,
                                     const double* sig, Rows<const double> gq, const double* a0,
                                     Rows<const double> a, Rows<double> dgq, double* dy0,
                                     Rows<double> dy, int64_t H, int64_t begin, int64_t end);

}  // namespace uma::nn::kernels
