// The lean edge kernels on the CPU (edges/lean_edges.h's operators), by
// family: the rotation into the edge frame (rotate_in.cpp), the rotation back
// with the sum into atoms (rotate_out.cpp), the gate (gate.cpp); each defined
// for float and double, with one copy per vector width where the compiler
// can (kernel_rows.h).  Ranges [b, e) of edges or nodes.
#pragma once

#include <cstdint>

#include "edges/kernels/rows.h"

namespace uma::edges::kernels {

// Ranges of edges or nodes; each is called from at::parallel_for.
template <typename T>
void rotate_in(const T* D, const T* x, const int64_t* src, const int64_t* tgt, const T* radial,
               Rows<T> out, int64_t C, int64_t begin, int64_t end);

// rotate_in is linear in each of D, x and radial: its tangent along (dD, dx,
// dradial) is the gradient of the incoming gradient in rotate_in's double
// backward.
template <typename T>
void rotate_in_tangent(const T* D, const T* dD, const T* x, const T* dx, const int64_t* src,
                       const int64_t* tgt, const T* radial, const T* dradial, Rows<T> out,
                       int64_t C, int64_t begin, int64_t end);

// rotate_in_grad_edges_of; gD null: no gD; gx null: no gx.
template <typename T>
void rotate_in_grad_edges(const T* D, const T* x, const int64_t* src, const int64_t* tgt,
                          const T* radial, Rows<const T> g, int64_t C, T* gD, T* gradial, T* gx,
                          int64_t begin, int64_t end);

// rotate_in_grad_edges_tangent_of; gD null: gradial only.
template <typename T>
void rotate_in_grad_edges_tangent(const T* D, const T* dD, const T* x, const T* dx,
                                  const int64_t* src, const int64_t* tgt, const T* radial,
                                  const T* dradial, Rows<const T> g, int64_t C, T* gD, T* gradial,
                                  int64_t begin, int64_t end);

// The tangent of rotate_in_grad_nodes along (dD, dradial): gx ([N, 9, C],
// zeroed), per node.
template <typename T>
void rotate_in_grad_nodes_tangent(const T* D, const T* dD, const T* radial, const T* dradial,
                                  Rows<const T> g, const int64_t* src_order,
                                  const int64_t* src_offsets, const int64_t* tgt_order,
                                  const int64_t* tgt_offsets, int64_t edges, int64_t C, T* gx,
                                  int64_t begin, int64_t end);

// gx ([N, 9, C], accumulated) of rotate_in, per node: its edges as source
// (the first half of the channels), then as target (the second half).
template <typename T>
void rotate_in_grad_nodes(const T* D, const T* radial, Rows<const T> g, const int64_t* src_order,
                          const int64_t* src_offsets, const int64_t* tgt_order,
                          const int64_t* tgt_offsets, int64_t edges, int64_t C, T* gx,
                          int64_t begin, int64_t end);

// out ([N, 9, C], accumulated) += rotate_to_nodes_summed, per node; rows: 3 or 9.
template <typename T>
void rotate_out(const T* D, const T* envelope, Rows<const T> y, int rows, const int64_t* order,
                const int64_t* offsets, int64_t edges, int64_t C, T* out, int64_t begin,
                int64_t end);

// rotate_out_grad_edges, gy written where it has a base, gD and genvelope
// where not null (both or neither).
template <typename T>
void rotate_out_grad(const T* D, const T* envelope, Rows<const T> y, int rows, const int64_t* tgt,
                     const T* gout, int64_t C, Rows<T> gy, T* gD, T* genvelope, int64_t begin,
                     int64_t end);

// The double backward of rotate_out, per node: out ([N, 9, C], zeroed) +=
// over edges e into n of M1[e]^T y[e] + s[e] D[e]^T dy[e], where
// M1 = s dD + ds D (the tangent of the product s D).
template <typename T>
void rotate_out_tangent(const T* D, const T* dD, const T* envelope, const T* denvelope,
                        Rows<const T> y, Rows<const T> dy, int rows, const int64_t* order,
                        const int64_t* offsets, int64_t edges, int64_t C, T* out, int64_t begin,
                        int64_t end);

// rotate_out_grad_tangent_of; gD2 null: gy2 only.
template <typename T>
void rotate_out_grad_tangent(const T* D, const T* dD, const T* envelope, const T* denvelope,
                             Rows<const T> y, Rows<const T> dy, int rows, const int64_t* tgt,
                             const T* gout, int64_t C, Rows<T> gy2, T* gD2, T* genvelope2,
                             int64_t begin, int64_t end);

// The gate between the convolutions: silu on l0m0, sigmoid(logit_l) on every
// other row of degree l.
template <typename T>
void gate(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig, Rows<T> q, int64_t H,
          int64_t begin, int64_t end);

// gy0 ([E, 5H] contiguous) and gy (pieces 1 and 2) of gate.
template <typename T>
void gate_grad(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig, Rows<const T> gq,
               T* gy0, Rows<T> gy, int64_t H, int64_t begin, int64_t end);

// The double backward of gate: given the adjoints a of gate_grad's outputs
// (a0: [E, 5H] like gy0, pieces 1 and 2 like gy), the gradients of
// <a, gate_grad(y, gq)> with respect to gq (dgq, pieces 0..2) and to y (dy0
// [E, 5H] contiguous, dy pieces 1 and 2).  With s = sigmoid: s' = s(1 - s),
// s'' = s'(1 - 2s); silu'(y) = s(1 + y(1 - s)), silu''(y) = s'(2 + y(1 - 2s)).
template <typename T>
void gate_grad_grad(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig,
                    Rows<const T> gq, const T* a0, Rows<const T> a, Rows<T> dgq, T* dy0, Rows<T> dy,
                    int64_t H, int64_t begin, int64_t end);

}  // namespace uma::edges::kernels
