// The rotation back into the atoms on the CPU, the loops the ops of
// edges/kernels/rotate_out_ops.h run over a range of nodes or edges: each
// edge's rows in one vector loop over the channels running the bodies of
// edges/kernels/rotate_out.h, a row's sums over the channels kept in scalars.
#pragma once

#include <cstdint>

#include "edges/cpu/kernel_rows.h"
#include "edges/kernels/rotate_out.h"

namespace uma::edges::kernels {

// Edge e's contribution of degree l to its target's rows o ([9, C]).
template <int l, bool AllRows, typename T>
UMA_ALWAYS_INLINE void rotate_out_edge_add(const T* D, const T* envelope, const Rows<const T>& y,
                                           int64_t e, int64_t C, T* o) {
  const auto v = rotate_out_edge<l, AllRows>(D, envelope, y, e);
  T* ol = o + l * l * C;
  for (int i = 0; i < v.J; ++i)
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) rotate_out_add(v, i, c, ol + c, C);
}

// out ([N, 9, C], accumulated) += rotate_to_nodes_summed, per node; rows: 3 or 9.
// The launcher adds each of a node's edges into out's rows, one vector loop
// over c in [0, C) per degree running the body of edges/kernels/rotate_out.h.
template <typename T>
UMA_ALWAYS_INLINE void rotate_out_nodes(const T* D, const T* envelope, Rows<const T> y, int rows,
                                        const int64_t* order, const int64_t* offsets, int64_t edges,
                                        int64_t C, T* out, int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) {
    T* o = out + n * 9 * C;
    for (int64_t p = offsets[n]; p < offsets[n + 1]; ++p) {
      const int64_t e = order[p];
      if (e >= edges) continue;
      for (int l = 0; l < 3; ++l)
        with_degree(l, [&](auto L) UMA_INLINE_LAMBDA {
          if (rows == 9)
            rotate_out_edge_add<decltype(L)::value, true>(D, envelope, y, e, C, o);
          else
            rotate_out_edge_add<decltype(L)::value, false>(D, envelope, y, e, C, o);
        });
    }
  }
}

// One row's gy (where WantGy) and a[k] = sum_c gt[k, c] y[c] (where WantA):
// the bodies of edges/kernels/rotate_out.h in one vector loop over c.
template <int K, bool WantGy, bool WantA, typename T>
UMA_ALWAYS_INLINE void rotate_out_grad_row_sums(const RotateOutGradRow<T> v, int64_t C, T* a) {
  T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, a4)
  for (int64_t c = 0; c < C; ++c) {
    if constexpr (WantGy) rotate_out_grad_gy_at<K>(v, C, c);
    if constexpr (WantA) rotate_out_grad_terms_at<K>(v, C, c, a0, a1, a2, a3, a4);
  }
  if constexpr (!WantA) return;
  const T sums[5] = {a0, a1, a2, a3, a4};
  for (int k = 0; k < K; ++k) a[k] = sums[k];
}

// gy (pieces, where WantGy), gD ([E, 81], zeroed) and genvelope ([E]) (where
// WantGeometry) of rotate_out, per edge.
template <bool WantGy, bool WantGeometry, typename T>
UMA_ALWAYS_INLINE void rotate_out_grad_edges(const T* D, const T* envelope, Rows<const T> y,
                                             int rows, const int64_t* tgt, const T* gout, int64_t C,
                                             Rows<T> gy, T* gD, T* genvelope, int64_t begin,
                                             int64_t end) {
  for (int64_t e = begin; e < end; ++e) {
    T ge = 0;
    for (int j = 0; j < rows; ++j) {
      const auto v = rotate_out_grad_row(D, envelope, y, tgt, gout, gy, C, e, j);
      const int r = kLRow[j], k0 = kBlockStart[r], K = kBlockSize[r];
      T a[5];
      with_block_size(K, [&](auto Kc) UMA_INLINE_LAMBDA {
        rotate_out_grad_row_sums<decltype(Kc)::value, WantGy, WantGeometry>(v, C, a);
      });
      if constexpr (WantGeometry)
        for (int k = 0; k < K; ++k) {
          gD[e * 81 + r * 9 + k0 + k] = v.s * a[k];
          ge += v.d[k] * a[k];
        }
    }
    if constexpr (WantGeometry) genvelope[e] = ge;
  }
}

// Edge e's contribution of degree l to the tangent of its target's rows o.
template <int l, bool AllRows, typename T>
UMA_ALWAYS_INLINE void rotate_out_tangent_edge_add(const T* D, const T* dD, const T* envelope,
                                                   const T* denvelope, const Rows<const T>& y,
                                                   const Rows<const T>& dy, int64_t e, int64_t C,
                                                   T* o) {
  const auto v = rotate_out_tangent_edge<l, AllRows>(D, dD, envelope, denvelope, y, dy, e);
  T* ol = o + l * l * C;
  for (int i = 0; i < v.J; ++i)
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) rotate_out_tangent_add(v, i, c, ol + c, C);
}

// The double backward of rotate_out, per node: out ([N, 9, C], accumulated)
// += over edges e into n of M1[e]^T y[e] + s[e] D[e]^T dy[e], where
// M1 = s dD + ds D (the tangent of the product s D).
template <typename T>
UMA_ALWAYS_INLINE void rotate_out_tangent_nodes(const T* D, const T* dD, const T* envelope,
                                                const T* denvelope, Rows<const T> y,
                                                Rows<const T> dy, int rows, const int64_t* order,
                                                const int64_t* offsets, int64_t edges, int64_t C,
                                                T* out, int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) {
    T* o = out + n * 9 * C;
    for (int64_t p = offsets[n]; p < offsets[n + 1]; ++p) {
      const int64_t e = order[p];
      if (e >= edges) continue;
      for (int l = 0; l < 3; ++l)
        with_degree(l, [&](auto L) UMA_INLINE_LAMBDA {
          if (rows == 9)
            rotate_out_tangent_edge_add<decltype(L)::value, true>(D, dD, envelope, denvelope, y, dy,
                                                                  e, C, o);
          else
            rotate_out_tangent_edge_add<decltype(L)::value, false>(D, dD, envelope, denvelope, y,
                                                                   dy, e, C, o);
        });
    }
  }
}

// One row of rotate_out's double backward: gy2, and a and b (where WantAB),
// one vector loop over c.
template <int K, bool WantAB, typename T>
UMA_ALWAYS_INLINE void rotate_out_grad_tangent_row_sums(const RotateOutGradTangentRow<T> v,
                                                        int64_t C, T* a, T* b) {
  T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0, b4 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, a4, b0, b1, b2, b3, b4)
  for (int64_t c = 0; c < C; ++c) {
    rotate_out_grad_tangent_gy_at<K>(v, C, c);
    if constexpr (WantAB)
      rotate_out_grad_tangent_terms_at<K>(v, C, c, a0, a1, a2, a3, a4, b0, b1, b2, b3, b4);
  }
  if constexpr (!WantAB) return;
  const T as[5] = {a0, a1, a2, a3, a4}, bs[5] = {b0, b1, b2, b3, b4};
  for (int k = 0; k < K; ++k) {
    a[k] = as[k];
    b[k] = bs[k];
  }
}

// The double backward of rotate_out, per edge, given the adjoints (dD,
// denvelope, dy) of (gD, genvelope, gy) and the incoming gradient gout
// (edges/kernels/rotate_out.h): gy2, and gD2 and genvelope2 where
// WantGeometry.
template <bool WantGeometry, typename T>
UMA_ALWAYS_INLINE void rotate_out_grad_tangent_of(const T* D, const T* dD, const T* envelope,
                                                  const T* denvelope, Rows<const T> y,
                                                  Rows<const T> dy, int rows, const int64_t* tgt,
                                                  const T* gout, int64_t C, Rows<T> gy2, T* gD2,
                                                  T* genvelope2, int64_t begin, int64_t end) {
  for (int64_t e = begin; e < end; ++e) {
    T ge = 0;
    for (int j = 0; j < rows; ++j) {
      const auto v =
          rotate_out_grad_tangent_row(D, dD, envelope, denvelope, y, dy, tgt, gout, gy2, C, e, j);
      const int r = kLRow[j], k0 = kBlockStart[r], K = kBlockSize[r];
      T a[5], b[5];
      with_block_size(K, [&](auto Kc) UMA_INLINE_LAMBDA {
        rotate_out_grad_tangent_row_sums<decltype(Kc)::value, WantGeometry>(v, C, a, b);
      });
      if constexpr (WantGeometry)
        for (int k = 0; k < K; ++k) {
          gD2[e * 81 + r * 9 + k0 + k] = v.ds * a[k] + v.s * b[k];
          ge += v.dd[k] * a[k] + v.d[k] * b[k];
        }
    }
    if constexpr (WantGeometry) genvelope2[e] = ge;
  }
}

}  // namespace uma::edges::kernels
