// The lean edge kernels' CUDA launchers (edges/cuda/*.cu): the same families
// and arguments as the CPU's (edges/cpu/lean_kernels.h), over all E edges at
// once, enqueued on `stream` (a cudaStream_t) and asynchronous.  The
// per-element work is the bodies of edges/kernels/, shared with the CPU.
// Free of CUDA and torch headers, so that host code can call them.
#pragma once

#include <cstdint>

#include "edges/kernels/rows.h"

namespace uma::edges::kernels::cuda {

// The rotation into the edge frame and its tangent (edges/kernels/rotate_in.h).
template <typename T>
void rotate_in(const T* D, const T* x, const int64_t* src, const int64_t* tgt, const T* radial,
               Rows<T> out, int64_t C, int64_t E, void* stream);

template <typename T>
void rotate_in_tangent(const T* D, const T* dD, const T* x, const T* dx, const int64_t* src,
                       const int64_t* tgt, const T* radial, const T* dradial, Rows<T> out,
                       int64_t C, int64_t E, void* stream);

// rotate_in's backward for the radial weights (gradial, written) and D (gD
// where not null, accumulated); x's gradient comes from the node pass below.
template <typename T>
void rotate_in_grad_edges(const T* D, const T* x, const int64_t* src, const int64_t* tgt,
                          const T* radial, Rows<const T> g, int64_t C, T* gD, T* gradial, int64_t E,
                          void* stream);

// rotate_in's backward for x: gx ([N, 9, C], accumulated), per node, its
// edges as source, then as target, in their segments' order.
template <typename T>
void rotate_in_grad_nodes(const T* D, const T* radial, Rows<const T> g, const int64_t* src_order,
                          const int64_t* src_offsets, const int64_t* tgt_order,
                          const int64_t* tgt_offsets, int64_t edges, int64_t C, T* gx, int64_t N,
                          void* stream);

// The tangents of those two along (dD, dx, dradial): the double backward's.
template <typename T>
void rotate_in_grad_edges_tangent(const T* D, const T* dD, const T* x, const T* dx,
                                  const int64_t* src, const int64_t* tgt, const T* radial,
                                  const T* dradial, Rows<const T> g, int64_t C, T* gD, T* gradial,
                                  int64_t E, void* stream);

template <typename T>
void rotate_in_grad_nodes_tangent(const T* D, const T* dD, const T* radial, const T* dradial,
                                  Rows<const T> g, const int64_t* src_order,
                                  const int64_t* src_offsets, const int64_t* tgt_order,
                                  const int64_t* tgt_offsets, int64_t edges, int64_t C, T* gx,
                                  int64_t N, void* stream);

// The rotation back with the envelope, summed into each edge's target
// (edges/kernels/rotate_out.h): out ([N, 9, C]) accumulated; each entry's
// sum one thread's, in the segment's order.
template <typename T>
void rotate_out(const T* D, const T* envelope, Rows<const T> y, int rows, const int64_t* order,
                const int64_t* offsets, int64_t edges, int64_t C, T* out, int64_t N, void* stream);

// Its backward: gy written where it has a base, gD (zeroed outside the
// l-blocks by the caller) and genvelope where gD is not null.
template <typename T>
void rotate_out_grad(const T* D, const T* envelope, Rows<const T> y, int rows, const int64_t* tgt,
                     const T* gout, int64_t C, Rows<T> gy, T* gD, T* genvelope, int64_t E,
                     void* stream);

// The tangents of those two along (dD, denvelope, dy): out accumulated; gy2
// written, gD2 (zeroed outside the l-blocks by the caller) and genvelope2
// where gD2 is not null.
template <typename T>
void rotate_out_tangent(const T* D, const T* dD, const T* envelope, const T* denvelope,
                        Rows<const T> y, Rows<const T> dy, int rows, const int64_t* order,
                        const int64_t* offsets, int64_t edges, int64_t C, T* out, int64_t N,
                        void* stream);

template <typename T>
void rotate_out_grad_tangent(const T* D, const T* dD, const T* envelope, const T* denvelope,
                             Rows<const T> y, Rows<const T> dy, int rows, const int64_t* tgt,
                             const T* gout, int64_t C, Rows<T> gy2, T* gD2, T* genvelope2,
                             int64_t E, void* stream);

// The gate between the convolutions (edges/kernels/gate.h).
template <typename T>
void gate(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig, Rows<T> q, int64_t H,
          int64_t E, void* stream);

template <typename T>
void gate_grad(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig, Rows<const T> gq,
               T* gy0, Rows<T> gy, int64_t H, int64_t E, void* stream);

template <typename T>
void gate_grad_grad(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig,
                    Rows<const T> gq, const T* a0, Rows<const T> a, Rows<T> dgq, T* dy0, Rows<T> dy,
                    int64_t H, int64_t E, void* stream);

}  // namespace uma::edges::kernels::cuda
