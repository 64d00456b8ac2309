// The lean edge kernels' gate family on the CPU: ranges of edges, each
// called from at::parallel_for (edges/lean_edges.cpp).  Compiled once per
// scalar type (the explicit instantiations at the end).
#include "edges/cpu/lean_kernels.h"

#include "edges/cpu/kernel_rows.h"
#include "edges/kernels/gate.h"

namespace uma::edges::kernels {

// Each launcher builds an edge's views once and runs the channel bodies of
// edges/kernels/gate.h over c in [0, H) as one vector loop.

template <typename T>
UMA_VECTOR_CLONES void gate(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig,
                            Rows<T> q, int64_t H, int64_t begin, int64_t end) {
  for (int64_t e = begin; e < end; ++e) {
    const auto in = gate_edge(y0, y0_stride, rows, sig, H, e);
    const auto out = gate_out(q, e);
#pragma omp simd
    for (int64_t c = 0; c < H; ++c) gate_at(in, out, c);
  }
}

template <typename T>
UMA_VECTOR_CLONES void gate_grad(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig,
                                 Rows<const T> gq, T* gy0, Rows<T> gy, int64_t H, int64_t begin,
                                 int64_t end) {
  for (int64_t e = begin; e < end; ++e) {
    const auto in = gate_edge(y0, y0_stride, rows, sig, H, e);
    const auto v = gate_grad_edge(gq, gy0, gy, H, e);
#pragma omp simd
    for (int64_t c = 0; c < H; ++c) gate_grad_at(in, v, c);
  }
}

template <typename T>
UMA_VECTOR_CLONES void gate_grad_grad(const T* y0, int64_t y0_stride, Rows<const T> rows,
                                      const T* sig, Rows<const T> gq, const T* a0, Rows<const T> a,
                                      Rows<T> dgq, T* dy0, Rows<T> dy, int64_t H, int64_t begin,
                                      int64_t end) {
  for (int64_t e = begin; e < end; ++e) {
    const auto in = gate_edge(y0, y0_stride, rows, sig, H, e);
    const auto v = gate_grad_grad_edge(gq, a0, a, dgq, dy0, dy, H, e);
#pragma omp simd
    for (int64_t c = 0; c < H; ++c) gate_grad_grad_at(in, v, c);
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

}  // namespace uma::edges::kernels
