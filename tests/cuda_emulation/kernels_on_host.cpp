// The CUDA launchers' entry points (edges/cuda/lean_kernels.h) emulated on
// the host: each runs the CPU launcher's kernel over the whole range at once,
// with the same arguments (the stream is ignored); and the engine's CUDA
// launchers (edges/cuda/launchers.cpp) compiled against them, here, so that
// uma_launcher_tests tests on the CPU the plumbing from tensors to kernel
// arguments that the GPU runs.  The kernels themselves are compared with the
// CPU's on a GPU (tests/cuda/kernels_check.cu).
#include "edges/cpu/lean_kernels.h"
#include "edges/cuda/lean_kernels.h"

namespace uma::edges::kernels::cuda {

template <typename T>
void rotate_in(const T* D, const T* x, const int64_t* src, const int64_t* tgt, const T* radial,
               Rows<T> out, int64_t C, int64_t E, void*) {
  kernels::rotate_in(D, x, src, tgt, radial, out, C, 0, E);
}

template <typename T>
void rotate_in_tangent(const T* D, const T* dD, const T* x, const T* dx, const int64_t* src,
                       const int64_t* tgt, const T* radial, const T* dradial, Rows<T> out,
                       int64_t C, int64_t E, void*) {
  kernels::rotate_in_tangent(D, dD, x, dx, src, tgt, radial, dradial, out, C, 0, E);
}

template <typename T>
void rotate_in_grad_edges(const T* D, const T* x, const int64_t* src, const int64_t* tgt,
                          const T* radial, Rows<const T> g, int64_t C, T* gD, T* gradial, int64_t E,
                          void*) {
  kernels::rotate_in_grad_edges(D, x, src, tgt, radial, g, C, gD, gradial, static_cast<T*>(nullptr),
                                0, E);
}

template <typename T>
void rotate_in_grad_nodes(const T* D, const T* radial, Rows<const T> g, const int64_t* src_order,
                          const int64_t* src_offsets, const int64_t* tgt_order,
                          const int64_t* tgt_offsets, int64_t edges, int64_t C, T* gx, int64_t N,
                          void*) {
  kernels::rotate_in_grad_nodes(D, radial, g, src_order, src_offsets, tgt_order, tgt_offsets, edges,
                                C, gx, 0, N);
}

template <typename T>
void rotate_in_grad_edges_tangent(const T* D, const T* dD, const T* x, const T* dx,
                                  const int64_t* src, const int64_t* tgt, const T* radial,
                                  const T* dradial, Rows<const T> g, int64_t C, T* gD, T* gradial,
                                  int64_t E, void*) {
  kernels::rotate_in_grad_edges_tangent(D, dD, x, dx, src, tgt, radial, dradial, g, C, gD, gradial,
                                        0, E);
}

template <typename T>
void rotate_in_grad_nodes_tangent(const T* D, const T* dD, const T* radial, const T* dradial,
                                  Rows<const T> g, const int64_t* src_order,
                                  const int64_t* src_offsets, const int64_t* tgt_order,
                                  const int64_t* tgt_offsets, int64_t edges, int64_t C, T* gx,
                                  int64_t N, void*) {
  kernels::rotate_in_grad_nodes_tangent(D, dD, radial, dradial, g, src_order, src_offsets,
                                        tgt_order, tgt_offsets, edges, C, gx, 0, N);
}

template <typename T>
void rotate_out(const T* D, const T* envelope, Rows<const T> y, int rows, const int64_t* order,
                const int64_t* offsets, int64_t edges, int64_t C, T* out, int64_t N, void*) {
  kernels::rotate_out(D, envelope, y, rows, order, offsets, edges, C, out, 0, N);
}

template <typename T>
void rotate_out_grad(const T* D, const T* envelope, Rows<const T> y, int rows, const int64_t* tgt,
                     const T* gout, int64_t C, Rows<T> gy, T* gD, T* genvelope, int64_t E, void*) {
  kernels::rotate_out_grad(D, envelope, y, rows, tgt, gout, C, gy, gD, genvelope, 0, E);
}

template <typename T>
void rotate_out_tangent(const T* D, const T* dD, const T* envelope, const T* denvelope,
                        Rows<const T> y, Rows<const T> dy, int rows, const int64_t* order,
                        const int64_t* offsets, int64_t edges, int64_t C, T* out, int64_t N,
                        void*) {
  kernels::rotate_out_tangent(D, dD, envelope, denvelope, y, dy, rows, order, offsets, edges, C,
                              out, 0, N);
}

template <typename T>
void rotate_out_grad_tangent(const T* D, const T* dD, const T* envelope, const T* denvelope,
                             Rows<const T> y, Rows<const T> dy, int rows, const int64_t* tgt,
                             const T* gout, int64_t C, Rows<T> gy2, T* gD2, T* genvelope2,
                             int64_t E, void*) {
  kernels::rotate_out_grad_tangent(D, dD, envelope, denvelope, y, dy, rows, tgt, gout, C, gy2, gD2,
                                   genvelope2, 0, E);
}

template <typename T>
void gate(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig, Rows<T> q, int64_t H,
          int64_t E, void*) {
  kernels::gate(y0, y0_stride, rows, sig, q, H, 0, E);
}

template <typename T>
void gate_grad(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig, Rows<const T> gq,
               T* gy0, Rows<T> gy, int64_t H, int64_t E, void*) {
  kernels::gate_grad(y0, y0_stride, rows, sig, gq, gy0, gy, H, 0, E);
}

template <typename T>
void gate_grad_grad(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig,
                    Rows<const T> gq, const T* a0, Rows<const T> a, Rows<T> dgq, T* dy0, Rows<T> dy,
                    int64_t H, int64_t E, void*) {
  kernels::gate_grad_grad(y0, y0_stride, rows, sig, gq, a0, a, dgq, dy0, dy, H, 0, E);
}

}  // namespace uma::edges::kernels::cuda

// The launchers' source, whose calls instantiate the templates above.
#include "edges/cuda/launchers.cpp"  // NOLINT(bugprone-suspicious-include)
