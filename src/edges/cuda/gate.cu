// The lean edge kernels' gate family on CUDA: one thread per (edge,
// channel), each running the body of edges/kernels/gate.h that the CPU's
// vector loops run (edges/cpu/gate.cpp).
#include "edges/cuda/lean_kernels.h"

#include "edges/cuda/launch.cuh"
#include "edges/kernels/gate.h"

namespace uma::edges::kernels::cuda {
namespace {

template <typename T>
__global__ void gate_kernel(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig,
                            Rows<T> q, int64_t H, int64_t E) {
  for_each_element(E, H, [&](int64_t e, int64_t c) {
    gate_at(gate_edge(y0, y0_stride, rows, sig, H, e), gate_out(q, e), c);
  });
}

template <typename T>
__global__ void gate_grad_kernel(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig,
                                 Rows<const T> gq, T* gy0, Rows<T> gy, int64_t H, int64_t E) {
  for_each_element(E, H, [&](int64_t e, int64_t c) {
    gate_grad_at(gate_edge(y0, y0_stride, rows, sig, H, e), gate_grad_edge(gq, gy0, gy, H, e), c);
  });
}

template <typename T>
__global__ void gate_grad_grad_kernel(const T* y0, int64_t y0_stride, Rows<const T> rows,
                                      const T* sig, Rows<const T> gq, const T* a0, Rows<const T> a,
                                      Rows<T> dgq, T* dy0, Rows<T> dy, int64_t H, int64_t E) {
  for_each_element(E, H, [&](int64_t e, int64_t c) {
    gate_grad_grad_at(gate_edge(y0, y0_stride, rows, sig, H, e),
                      gate_grad_grad_edge(gq, a0, a, dgq, dy0, dy, H, e), c);
  });
}

}  // namespace

template <typename T>
void gate(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig, Rows<T> q, int64_t H,
          int64_t E, void* stream) {
  if (E * H == 0) return;
  gate_kernel<T><<<blocks_for(E * H), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      y0, y0_stride, rows, sig, q, H, E);
  check_launch("gate");
}

template <typename T>
void gate_grad(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig, Rows<const T> gq,
               T* gy0, Rows<T> gy, int64_t H, int64_t E, void* stream) {
  if (E * H == 0) return;
  gate_grad_kernel<T><<<blocks_for(E * H), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      y0, y0_stride, rows, sig, gq, gy0, gy, H, E);
  check_launch("gate_grad");
}

template <typename T>
void gate_grad_grad(const T* y0, int64_t y0_stride, Rows<const T> rows, const T* sig,
                    Rows<const T> gq, const T* a0, Rows<const T> a, Rows<T> dgq, T* dy0, Rows<T> dy,
                    int64_t H, int64_t E, void* stream) {
  if (E * H == 0) return;
  gate_grad_grad_kernel<T><<<blocks_for(E * H), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      y0, y0_stride, rows, sig, gq, a0, a, dgq, dy0, dy, H, E);
  check_launch("gate_grad_grad");
}

#define UMA_GATE_LAUNCHERS(T)                                                                      \
  template void gate<T>(const T*, int64_t, Rows<const T>, const T*, Rows<T>, int64_t, int64_t,     \
                        void*);                                                                    \
  template void gate_grad<T>(const T*, int64_t, Rows<const T>, const T*, Rows<const T>, T*,        \
                             Rows<T>, int64_t, int64_t, void*);                                    \
  template void gate_grad_grad<T>(const T*, int64_t, Rows<const T>, const T*, Rows<const T>,       \
                                  const T*, Rows<const T>, Rows<T>, T*, Rows<T>, int64_t, int64_t, \
                                  void*);
UMA_GATE_LAUNCHERS(float)
UMA_GATE_LAUNCHERS(double)
#undef UMA_GATE_LAUNCHERS

}  // namespace uma::edges::kernels::cuda
