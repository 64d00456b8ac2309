// The per-row work of the lean edge kernels on the CPU, shared by their
// families' ops (edges/kernels/*_ops.h): the inline loops, one row of one edge
// (or node) at a time (the L/M layout: edges/kernels/layout.h; Rows:
// edges/kernels/rows.h; the bodies shared with CUDA: edges/kernels/rotate_in.h).
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

#define UMA_ALWAYS_INLINE inline __attribute__((always_inline))

namespace uma::edges::kernels {

// layout.h's M-to-L row map (by M row j) and l-blocks (first column and
// size, by L row r) as tables, for the row loops whose length is known only
// at run time (rotate_out's 3 or 9 rows): GCC compiles such a loop around its
// vector loops to faster code when it reads these from memory than when it
// computes them from j (rotate_out_grad and its tangent, fp32, 1.3x).
#define UMA_NINE(f) {f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7), f(8)}
inline constexpr int kLRow[9] = UMA_NINE(l_row);
inline constexpr int kBlockStart[9] = UMA_NINE(block_start);
inline constexpr int kBlockSize[9] = UMA_NINE(block_size);
#undef UMA_NINE

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

// One row of the tangent of rotate_in's backward for the radial weights and
// D (gd: where WantD, accumulated), one vector loop over c.
template <int K, bool Accumulate, bool WantD, typename T>
UMA_ALWAYS_INLINE void rotate_in_grad_tangent_row_sums(const RotateInGradTangentRow<T>& v,
                                                       int64_t C, T* gd) {
  T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, a4)
  for (int64_t c = 0; c < C; ++c) {
    rotate_in_grad_tangent_radial_at<K, Accumulate>(v, C, c);
    if constexpr (WantD) rotate_in_grad_tangent_D_terms_at<K>(v, C, c, a0, a1, a2, a3, a4);
  }
  if constexpr (!WantD) return;
  add_sums<K>(gd, a0, a1, a2, a3, a4);
}

// One row's contribution to the tangent of x's gradient, gx (K rows of C) +=.
template <int K, typename T>
UMA_ALWAYS_INLINE void rotate_in_grad_node_tangent_row_add(const RotateInGradNodeTangentRow<T>& v,
                                                           int64_t C, T* gx) {
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) rotate_in_grad_node_tangent_at<K>(v, c, gx + c, C);
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
      const auto v =
          rotate_in_grad_tangent_row(D, dD, x, dx, src, tgt, radial, dradial, g, gradial, C, e, j);
      const int r = l_row(j);
      T* gd = WantD ? gD + e * 81 + r * 9 + block_start(r) : nullptr;
      with_block_size(block_size(r), [&](auto Kc) UMA_INLINE_LAMBDA {
        constexpr int K = decltype(Kc)::value;
        if (radial_first(j))
          rotate_in_grad_tangent_row_sums<K, false, WantD>(v, C, gd);
        else
          rotate_in_grad_tangent_row_sums<K, true, WantD>(v, C, gd);
      });
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

}  // namespace uma::edges::kernels
