// The per-row work of the lean edge kernels (edges/lean_kernels.h), shared by
// their families' sources: the inline bodies, one row of one edge (or node) at
// a time (the L/M layout: edges/kernels/layout.h; Rows: edges/kernels/rows.h;
// the bodies already shared with CUDA: edges/kernels/gate.h, rotate_in.h).
// Inner loops run over channels, contiguous in every tensor; the l-block of a
// row (1, 3 or 5 columns of D) is a template parameter so that each loop is a
// fixed short sum the compiler vectorises.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "edges/kernels/layout.h"
#include "edges/kernels/rotate_in.h"
#include "edges/kernels/rows.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
// One copy per vector width, picked at load time for the running CPU.
#define UMA_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define UMA_VECTOR_CLONES
#endif
#define UMA_ALWAYS_INLINE inline __attribute__((always_inline))

namespace uma::nn::kernels {

// out[k] += the first K of a0..a4: a row's channel sums, one per column of
// its l-block (kept in scalars inside the channel loops, stored after them).
template <int K, typename T>
UMA_ALWAYS_INLINE void add_sums(T* out, T a0, T a1, T a2, T a3, T a4) {
  const T a[5] = {a0, a1, a2, a3, a4};
  for (int k = 0; k < K; ++k) out[k] += a[k];
}

// One row of rotate_in's backward for the radial weights and D (gd: where
// WantD, accumulated): the bodies of edges/kernels/rotate_in.h in one vector
// loop over c, a[k]'s sums kept in scalars.
template <int K, bool Accumulate, bool WantD, typename T>
UMA_ALWAYS_INLINE void rotate_in_grad_row_sums(const RotateInGradRow<T>& v, int64_t C, T* gd) {
  T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, a4)
  for (int64_t c = 0; c < C; ++c) {
    rotate_in_grad_radial_at<K, Accumulate>(v, C, c);
    if constexpr (WantD) rotate_in_grad_D_terms_at<K>(v, C, c, a0, a1, a2, a3, a4);
  }
  if constexpr (!WantD) return;
  add_sums<K>(gd, a0, a1, a2, a3, a4);
}

// One row's contribution to x's gradient, gx (an endpoint's K rows of C) +=.
template <int K, typename T>
UMA_ALWAYS_INLINE void rotate_in_grad_node_row_add(const RotateInGradNodeRow<T>& v, int64_t C,
                                                   T* gx) {
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) rotate_in_grad_node_at<K>(v, c, gx + c, C);
}

// The tangent of rotate_row_grad_edge along (dd, dx, dw), both halves: gw
// (+)= g (d.dx + dd.x), gd[k] += sum_c g (w dx[k] + dw x[k]) (where WantD).
template <int K, bool Accumulate, bool WantD, typename T>
UMA_ALWAYS_INLINE void rotate_row_grad_edge_tangent(const T* d, const T* dd, const T* x0,
                                                    const T* dx0, const T* x1, const T* dx1,
                                                    int64_t C, const T* w, const T* dw, const T* g,
                                                    T* gw, T* gd) {
  T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, a4)
  for (int64_t c = 0; c < C; ++c) {
    T t0 = d[0] * dx0[c] + dd[0] * x0[c], t1 = d[0] * dx1[c] + dd[0] * x1[c];
    for (int k = 1; k < K; ++k) {
      t0 += d[k] * dx0[k * C + c] + dd[k] * x0[k * C + c];
      t1 += d[k] * dx1[k * C + c] + dd[k] * x1[k * C + c];
    }
    const T g0 = g[c], g1 = g[C + c];
    if constexpr (Accumulate) {
      gw[c] += g0 * t0;
      gw[C + c] += g1 * t1;
    } else {
      gw[c] = g0 * t0;
      gw[C + c] = g1 * t1;
    }
    if constexpr (WantD) {
      const T r0 = g0 * w[c], s0 = g0 * dw[c], r1 = g1 * w[C + c], s1 = g1 * dw[C + c];
      a0 += r0 * dx0[c] + s0 * x0[c] + r1 * dx1[c] + s1 * x1[c];
      if constexpr (K > 1) {
        a1 += r0 * dx0[C + c] + s0 * x0[C + c] + r1 * dx1[C + c] + s1 * x1[C + c];
        a2 += r0 * dx0[2 * C + c] + s0 * x0[2 * C + c] + r1 * dx1[2 * C + c] + s1 * x1[2 * C + c];
      }
      if constexpr (K > 3) {
        a3 += r0 * dx0[3 * C + c] + s0 * x0[3 * C + c] + r1 * dx1[3 * C + c] + s1 * x1[3 * C + c];
        a4 += r0 * dx0[4 * C + c] + s0 * x0[4 * C + c] + r1 * dx1[4 * C + c] + s1 * x1[4 * C + c];
      }
    }
  }
  if constexpr (!WantD) return;
  add_sums<K>(gd, a0, a1, a2, a3, a4);
}

// The tangent of rotate_row_grad_node along (dd, dw): gx[k, c] += g[c] (dd[k] w[c] + d[k] dw[c]).
template <int K, typename T>
UMA_ALWAYS_INLINE void rotate_row_grad_node_tangent(const T* d, const T* dd, const T* g, const T* w,
                                                    const T* dw, int64_t C, T* gx) {
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) {
    const T gw = g[c] * w[c], gdw = g[c] * dw[c];
    for (int k = 0; k < K; ++k) gx[k * C + c] += dd[k] * gw + d[k] * gdw;
  }
}

// gD ([E, 81], accumulated; where WantD), gradial ([E, 6, 2C]) and, where
// WantX, gx ([N, 9, C], accumulated) of rotate_in, per edge.  gx here is one
// thread's own buffer: a node's sums come from edges of any thread.
template <bool WantD, bool WantX, typename T>
UMA_ALWAYS_INLINE void rotate_in_grad_edges_of(const T* D, const T* x, const int64_t* src,
                                               const int64_t* tgt, const T* radial, Rows<const T> g,
                                               int64_t C, T* gD, T* gradial, T* gx, int64_t begin,
                                               int64_t end) {
  for (int64_t e = begin; e < end; ++e) {
    for (int j = 0; j < 9; ++j) {
      const auto v = rotate_in_grad_row(D, x, src, tgt, radial, g, gradial, C, e, j);
      const int r = l_row(j), k0 = block_start(r);
      T* gd = WantD ? gD + e * 81 + r * 9 + k0 : nullptr;
      with_block_size(block_size(r), [&](auto Kc) UMA_INLINE_LAMBDA {
        constexpr int K = decltype(Kc)::value;
        if (radial_first(j))
          rotate_in_grad_row_sums<K, false, WantD>(v, C, gd);
        else
          rotate_in_grad_row_sums<K, true, WantD>(v, C, gd);
        if constexpr (WantX) {
          // While g's and w's rows are in cache; two passes, so that a node
          // that is its own neighbour sums both.
          for (int h = 0; h < 2; ++h)
            rotate_in_grad_node_row_add<K>(rotate_in_grad_node_row(D, radial, g, C, e, j, h), C,
                                           gx + ((h ? tgt[e] : src[e]) * 9 + k0) * C);
        }
      });
    }
  }
}

// The tangents of rotate_in_grad_edges along (dD, dx, dradial): dD ([E, 81],
// accumulated; where WantD) and dradial ([E, 6, 2C], written), per edge.
template <bool WantD, typename T>
UMA_ALWAYS_INLINE void rotate_in_grad_edges_tangent_of(const T* D, const T* dD, const T* x,
                                                       const T* dx, const int64_t* src,
                                                       const int64_t* tgt, const T* radial,
                                                       const T* dradial, Rows<const T> g, int64_t C,
                                                       T* gD, T* gradial, int64_t begin,
                                                       int64_t end) {
  for (int64_t e = begin; e < end; ++e) {
    for (int j = 0; j < 9; ++j) {
      const int r = l_row(j), k0 = block_start(r), K = block_size(r);
      const int64_t d_at = e * 81 + r * 9 + k0, w_at = (e * 6 + radial_row(j)) * 2 * C;
      const int64_t at0 = (src[e] * 9 + k0) * C, at1 = (tgt[e] * 9 + k0) * C;
      const T *d = D + d_at, *dd = dD + d_at;
      T* gd = WantD ? gD + d_at : nullptr;
      const T *x0 = x + at0, *dx0 = dx + at0, *x1 = x + at1, *dx1 = dx + at1;
      const T *w = radial + w_at, *dw = dradial + w_at, *gj = g.row(e, j);
      T* gw = gradial + w_at;
      if (radial_first(j)) {
        if (K == 1)
          rotate_row_grad_edge_tangent<1, false, WantD>(d, dd, x0, dx0, x1, dx1, C, w, dw, gj, gw,
                                                        gd);
        else if (K == 3)
          rotate_row_grad_edge_tangent<3, false, WantD>(d, dd, x0, dx0, x1, dx1, C, w, dw, gj, gw,
                                                        gd);
        else
          rotate_row_grad_edge_tangent<5, false, WantD>(d, dd, x0, dx0, x1, dx1, C, w, dw, gj, gw,
                                                        gd);
      } else {
        if (K == 1)
          rotate_row_grad_edge_tangent<1, true, WantD>(d, dd, x0, dx0, x1, dx1, C, w, dw, gj, gw,
                                                       gd);
        else if (K == 3)
          rotate_row_grad_edge_tangent<3, true, WantD>(d, dd, x0, dx0, x1, dx1, C, w, dw, gj, gw,
                                                       gd);
        else
          rotate_row_grad_edge_tangent<5, true, WantD>(d, dd, x0, dx0, x1, dx1, C, w, dw, gj, gw,
                                                       gd);
      }
    }
  }
}

// The node passes visit a node's edges in segment order, scattered over the
// edge arrays (a node's edges as target are far apart when the edges run by
// source): fetch the next edges' rows while this one is summed, or each edge
// waits for memory (with few channels the wait is most of the pass).
constexpr int kPrefetchEdges = 2;

// Edge e's rows of g, and of D and radial (each pair, the tangents' too).
template <typename T>
UMA_ALWAYS_INLINE void prefetch_edge_rows(
    std::initializer_list<std::pair<const T*, const T*>> D_radial, const Rows<const T>& g,
    int64_t e, int64_t C, int h) {
  for (int j = 0; j < 9; ++j) __builtin_prefetch(g.row(e, j) + h * C);
  for (const auto& [D, radial] : D_radial) {
    for (int r = 0; r < 6; ++r) __builtin_prefetch(radial + (e * 6 + r) * 2 * C + h * C);
    for (int i = 0; i < 81; i += 64 / static_cast<int>(sizeof(T)))
      __builtin_prefetch(D + e * 81 + i);
  }
}

// One row of rotate_out's double backward: out[c] = sum_k m1[k] g[k, c],
// a[k] = sum_c g[k, c] y[c], b[k] = sum_c g[k, c] dy[c] (a and b where WantAB).
template <int K, bool WantAB, typename T>
UMA_ALWAYS_INLINE void unrotate_row_grad_tangent(const T* m1, const T* g, const T* y, const T* dy,
                                                 int64_t C, T* out, T* a, T* b) {
  T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0, b4 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, a4, b0, b1, b2, b3, b4)
  for (int64_t c = 0; c < C; ++c) {
    const T g0 = g[c];
    T acc = m1[0] * g0;
    if constexpr (K > 1) acc += m1[1] * g[C + c] + m1[2] * g[2 * C + c];
    if constexpr (K > 3) acc += m1[3] * g[3 * C + c] + m1[4] * g[4 * C + c];
    out[c] = acc;
    if constexpr (WantAB) {
      const T yc = y[c], dyc = dy[c];
      a0 += g0 * yc;
      b0 += g0 * dyc;
      if constexpr (K > 1) {
        const T g1 = g[C + c], g2 = g[2 * C + c];
        a1 += g1 * yc;
        a2 += g2 * yc;
        b1 += g1 * dyc;
        b2 += g2 * dyc;
      }
      if constexpr (K > 3) {
        const T g3 = g[3 * C + c], g4 = g[4 * C + c];
        a3 += g3 * yc;
        a4 += g4 * yc;
        b3 += g3 * dyc;
        b4 += g4 * dyc;
      }
    }
  }
  if constexpr (!WantAB) return;
  const T as[5] = {a0, a1, a2, a3, a4}, bs[5] = {b0, b1, b2, b3, b4};
  for (int k = 0; k < K; ++k) {
    a[k] = as[k];
    b[k] = bs[k];
  }
}

// out[k, c] += m1[k] y[c] + sd[k] dy[c].
template <int K, typename T>
UMA_ALWAYS_INLINE void unrotate_row_tangent_add(const T* m1, const T* sd, const T* y, const T* dy,
                                                int64_t C, T* out) {
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) {
    const T yc = y[c], dyc = dy[c];
    for (int k = 0; k < K; ++k) out[k * C + c] += m1[k] * yc + sd[k] * dyc;
  }
}

// The double backward of rotate_out, per edge, given the adjoints (dD,
// denvelope, dy) of (gD, genvelope, gy) and the incoming gradient gout:
// with M1 = s dD + ds D, A = G(y) and B = G(dy) (G(u)[k] = sum_c gt[k, c] u[c]):
// gy2 = M1^T-rotated gt (the gradient for y), gD2 = ds A + s B,
// genvelope2 = <dD, A> + <D, B>.
// gD2 and genvelope2 where WantGeometry.
template <bool WantGeometry, typename T>
UMA_ALWAYS_INLINE void rotate_out_grad_tangent_of(const T* D, const T* dD, const T* envelope,
                                                  const T* denvelope, Rows<const T> y,
                                                  Rows<const T> dy, int rows, const int64_t* tgt,
                                                  const T* gout, int64_t C, Rows<T> gy2, T* gD2,
                                                  T* genvelope2, int64_t begin, int64_t end) {
  for (int64_t e = begin; e < end; ++e) {
    const T* gt = gout + tgt[e] * 9 * C;
    const T s = envelope[e], ds = denvelope[e];
    T ge = 0;
    for (int j = 0; j < rows; ++j) {
      const int r = l_row(j), k0 = block_start(r), K = block_size(r);
      const T *d = D + e * 81 + r * 9 + k0, *dd = dD + e * 81 + r * 9 + k0;
      const T *yj = y.row(e, j), *dyj = dy.row(e, j);
      const T* g = gt + k0 * C;
      T* out = gy2.row(e, j);
      T m1[5] = {0, 0, 0, 0, 0}, a[5], b[5];
      for (int k = 0; k < K; ++k) m1[k] = s * dd[k] + ds * d[k];
      if (K == 1)
        unrotate_row_grad_tangent<1, WantGeometry>(m1, g, yj, dyj, C, out, a, b);
      else if (K == 3)
        unrotate_row_grad_tangent<3, WantGeometry>(m1, g, yj, dyj, C, out, a, b);
      else
        unrotate_row_grad_tangent<5, WantGeometry>(m1, g, yj, dyj, C, out, a, b);
      if constexpr (WantGeometry)
        for (int k = 0; k < K; ++k) {
          gD2[e * 81 + r * 9 + k0 + k] = ds * a[k] + s * b[k];
          ge += dd[k] * a[k] + d[k] * b[k];
        }
    }
    if constexpr (WantGeometry) genvelope2[e] = ge;
  }
}

}  // namespace uma::nn::kernels
