// The lean edge kernels' rotate in family on the CPU: ranges of edges or nodes,
// each called from at::parallel_for (edges/lean_edges.cpp).  Compiled once per
// scalar type (the explicit instantiations at the end).
#include "edges/cpu/lean_kernels.h"

#include "edges/cpu/kernel_rows.h"
#include "edges/kernels/rotate_in.h"

namespace uma::edges::kernels {

// rotate_in and its tangent: each launcher builds a row's view once per (e,
// j, h) and runs the channel body of edges/kernels/rotate_in.h over c in
// [0, C) as one vector loop.
template <typename T>
UMA_VECTOR_CLONES void rotate_in(const T* D, const T* x, const int64_t* src, const int64_t* tgt,
                                 const T* radial, Rows<T> out, int64_t C, int64_t begin,
                                 int64_t end) {
  for (int64_t e = begin; e < end; ++e)
    for (int j = 0; j < 9; ++j)
      with_block_size(block_size(l_row(j)), [&](auto K) UMA_INLINE_LAMBDA {
        for (int h = 0; h < 2; ++h) {
          const auto v = rotate_in_row(D, x, src, tgt, radial, out, C, e, j, h);
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) rotate_in_at<decltype(K)::value>(v, C, c);
        }
      });
}

template <typename T>
UMA_VECTOR_CLONES void rotate_in_tangent(const T* D, const T* dD, const T* x, const T* dx,
                                         const int64_t* src, const int64_t* tgt, const T* radial,
                                         const T* dradial, Rows<T> out, int64_t C, int64_t begin,
                                         int64_t end) {
  for (int64_t e = begin; e < end; ++e)
    for (int j = 0; j < 9; ++j)
      with_block_size(block_size(l_row(j)), [&](auto K) UMA_INLINE_LAMBDA {
        for (int h = 0; h < 2; ++h) {
          const auto v =
              rotate_in_tangent_row(D, dD, x, dx, src, tgt, radial, dradial, out, C, e, j, h);
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) rotate_in_tangent_at<decltype(K)::value>(v, C, c);
        }
      });
}

// rotate_in_grad_edges_of; gD null: no gD; gx null: no gx.
template <typename T>
UMA_VECTOR_CLONES void rotate_in_grad_edges(const T* D, const T* x, const int64_t* src,
                                            const int64_t* tgt, const T* radial, Rows<const T> g,
                                            int64_t C, T* gD, T* gradial, T* gx, int64_t begin,
                                            int64_t end) {
  if (gD && gx)
    rotate_in_grad_edges_of<true, true>(D, x, src, tgt, radial, g, C, gD, gradial, gx, begin, end);
  else if (gD)
    rotate_in_grad_edges_of<true, false>(D, x, src, tgt, radial, g, C, gD, gradial, gx, begin, end);
  else if (gx)
    rotate_in_grad_edges_of<false, true>(D, x, src, tgt, radial, g, C, gD, gradial, gx, begin, end);
  else
    rotate_in_grad_edges_of<false, false>(D, x, src, tgt, radial, g, C, gD, gradial, gx, begin,
                                          end);
}

// rotate_in_grad_edges_tangent_of; gD null: gradial only.
template <typename T>
UMA_VECTOR_CLONES void rotate_in_grad_edges_tangent(const T* D, const T* dD, const T* x,
                                                    const T* dx, const int64_t* src,
                                                    const int64_t* tgt, const T* radial,
                                                    const T* dradial, Rows<const T> g, int64_t C,
                                                    T* gD, T* gradial, int64_t begin, int64_t end) {
  if (gD)
    rotate_in_grad_edges_tangent_of<true>(D, dD, x, dx, src, tgt, radial, dradial, g, C, gD,
                                          gradial, begin, end);
  else
    rotate_in_grad_edges_tangent_of<false>(D, dD, x, dx, src, tgt, radial, dradial, g, C, gD,
                                           gradial, begin, end);
}

// The tangent of rotate_in_grad_nodes along (dD, dradial): gx ([N, 9, C],
// zeroed), per node.
template <typename T>
UMA_VECTOR_CLONES void rotate_in_grad_nodes_tangent(
    const T* D, const T* dD, const T* radial, const T* dradial, Rows<const T> g,
    const int64_t* src_order, const int64_t* src_offsets, const int64_t* tgt_order,
    const int64_t* tgt_offsets, int64_t edges, int64_t C, T* gx, int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) {
    T* out = gx + n * 9 * C;
    for (int h = 0; h < 2; ++h) {
      const int64_t* order = h ? tgt_order : src_order;
      const int64_t* offsets = h ? tgt_offsets : src_offsets;
      for (int64_t p = offsets[n]; p < offsets[n + 1]; ++p) {
        const int64_t e = order[p];
        if (p + kPrefetchEdges < offsets[n + 1] && order[p + kPrefetchEdges] < edges)
          prefetch_edge_rows<T>({{D, radial}, {dD, dradial}}, g, order[p + kPrefetchEdges], C, h);
        if (e >= edges) continue;
        for (int j = 0; j < 9; ++j) {
          const auto v = rotate_in_grad_node_tangent_row(D, dD, radial, dradial, g, C, e, j, h);
          const int r = l_row(j);
          with_block_size(block_size(r), [&](auto K) UMA_INLINE_LAMBDA {
            rotate_in_grad_node_tangent_row_add<decltype(K)::value>(v, C, out + block_start(r) * C);
          });
        }
      }
    }
  }
}

// gx ([N, 9, C], accumulated) of rotate_in, per node: its edges as source
// (the first half of the channels), then as target (the second half).
template <typename T>
UMA_VECTOR_CLONES void rotate_in_grad_nodes(const T* D, const T* radial, Rows<const T> g,
                                            const int64_t* src_order, const int64_t* src_offsets,
                                            const int64_t* tgt_order, const int64_t* tgt_offsets,
                                            int64_t edges, int64_t C, T* gx, int64_t begin,
                                            int64_t end) {
  for (int64_t n = begin; n < end; ++n) {
    T* out = gx + n * 9 * C;
    for (int h = 0; h < 2; ++h) {
      const int64_t* order = h ? tgt_order : src_order;
      const int64_t* offsets = h ? tgt_offsets : src_offsets;
      for (int64_t p = offsets[n]; p < offsets[n + 1]; ++p) {
        const int64_t e = order[p];
        if (p + kPrefetchEdges < offsets[n + 1] && order[p + kPrefetchEdges] < edges)
          prefetch_edge_rows<T>({{D, radial}}, g, order[p + kPrefetchEdges], C, h);
        if (e >= edges) continue;
        for (int j = 0; j < 9; ++j) {
          const auto v = rotate_in_grad_node_row(D, radial, g, C, e, j, h);
          const int r = l_row(j);
          with_block_size(block_size(r), [&](auto K) UMA_INLINE_LAMBDA {
            rotate_in_grad_node_row_add<decltype(K)::value>(v, C, out + block_start(r) * C);
          });
        }
      }
    }
  }
}

template void rotate_in<float>(const float* D, const float* x, const int64_t* src,
                               const int64_t* tgt, const float* radial, Rows<float> out, int64_t C,
                               int64_t begin, int64_t end);
template void rotate_in<double>(const double* D, const double* x, const int64_t* src,
                                const int64_t* tgt, const double* radial, Rows<double> out,
                                int64_t C, int64_t begin, int64_t end);
template void rotate_in_tangent<float>(const float* D, const float* dD, const float* x,
                                       const float* dx, const int64_t* src, const int64_t* tgt,
                                       const float* radial, const float* dradial, Rows<float> out,
                                       int64_t C, int64_t begin, int64_t end);
template void rotate_in_tangent<double>(const double* D, const double* dD, const double* x,
                                        const double* dx, const int64_t* src, const int64_t* tgt,
                                        const double* radial, const double* dradial,
                                        Rows<double> out, int64_t C, int64_t begin, int64_t end);
template void rotate_in_grad_edges<float>(const float* D, const float* x, const int64_t* src,
                                          const int64_t* tgt, const float* radial,
                                          Rows<const float> g, int64_t C, float* gD, float* gradial,
                                          float* gx, int64_t begin, int64_t end);
template void rotate_in_grad_edges<double>(const double* D, const double* x, const int64_t* src,
                                           const int64_t* tgt, const double* radial,
                                           Rows<const double> g, int64_t C, double* gD,
                                           double* gradial, double* gx, int64_t begin, int64_t end);
template void rotate_in_grad_edges_tangent<float>(const float* D, const float* dD, const float* x,
                                                  const float* dx, const int64_t* src,
                                                  const int64_t* tgt, const float* radial,
                                                  const float* dradial, Rows<const float> g,
                                                  int64_t C, float* gD, float* gradial,
                                                  int64_t begin, int64_t end);
template void rotate_in_grad_edges_tangent<double>(const double* D, const double* dD,
                                                   const double* x, const double* dx,
                                                   const int64_t* src, const int64_t* tgt,
                                                   const double* radial, const double* dradial,
                                                   Rows<const double> g, int64_t C, double* gD,
                                                   double* gradial, int64_t begin, int64_t end);
template void rotate_in_grad_nodes_tangent<float>(
    const float* D, const float* dD, const float* radial, const float* dradial, Rows<const float> g,
    const int64_t* src_order, const int64_t* src_offsets, const int64_t* tgt_order,
    const int64_t* tgt_offsets, int64_t edges, int64_t C, float* gx, int64_t begin, int64_t end);
template void rotate_in_grad_nodes_tangent<double>(
    const double* D, const double* dD, const double* radial, const double* dradial,
    Rows<const double> g, const int64_t* src_order, const int64_t* src_offsets,
    const int64_t* tgt_order, const int64_t* tgt_offsets, int64_t edges, int64_t C, double* gx,
    int64_t begin, int64_t end);
template void rotate_in_grad_nodes<float>(const float* D, const float* radial, Rows<const float> g,
                                          const int64_t* src_order, const int64_t* src_offsets,
                                          const int64_t* tgt_order, const int64_t* tgt_offsets,
                                          int64_t edges, int64_t C, float* gx, int64_t begin,
                                          int64_t end);
template void rotate_in_grad_nodes<double>(const double* D, const double* radial,
                                           Rows<const double> g, const int64_t* src_order,
                                           const int64_t* src_offsets, const int64_t* tgt_order,
                                           const int64_t* tgt_offsets, int64_t edges, int64_t C,
                                           double* gx, int64_t begin, int64_t end);

}  // namespace uma::edges::kernels
