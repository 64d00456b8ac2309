// The lean edge kernels' rotate-in family on CUDA: one thread per (edge, M
// row, channel of the two halves), each running the body of
// edges/kernels/rotate_in.h that the CPU's vector loops run
// (edges/cpu/rotate_in.cpp).  Channels are fastest, so a warp reads
// consecutive channels of one row of x and writes one row of out.
#include "edges/cuda/lean_kernels.h"

#include "edges/cuda/launch.cuh"
#include "edges/kernels/rotate_in.h"

namespace uma::nn::kernels::cuda {
namespace {

template <typename T>
__global__ void rotate_in_kernel(const T* D, const T* x, const int64_t* src, const int64_t* tgt,
                                 const T* radial, Rows<T> out, int64_t C, int64_t E) {
  for_each_element(E * 9, 2 * C, [&](int64_t ej, int64_t c2) {
    const int64_t e = ej / 9, c = c2 < C ? c2 : c2 - C;
    const int j = int(ej - e * 9), h = c2 < C ? 0 : 1;
    const auto v = rotate_in_row(D, x, src, tgt, radial, out, C, e, j, h);
    with_block_size(block_size(l_row(j)),
                    [&](auto K) { rotate_in_at<decltype(K)::value>(v, C, c); });
  });
}

template <typename T>
__global__ void rotate_in_tangent_kernel(const T* D, const T* dD, const T* x, const T* dx,
                                         const int64_t* src, const int64_t* tgt, const T* radial,
                                         const T* dradial, Rows<T> out, int64_t C, int64_t E) {
  for_each_element(E * 9, 2 * C, [&](int64_t ej, int64_t c2) {
    const int64_t e = ej / 9, c = c2 < C ? c2 : c2 - C;
    const int j = int(ej - e * 9), h = c2 < C ? 0 : 1;
    const auto v = rotate_in_tangent_row(D, dD, x, dx, src, tgt, radial, dradial, out, C, e, j, h);
    with_block_size(block_size(l_row(j)),
                    [&](auto K) { rotate_in_tangent_at<decltype(K)::value>(v, C, c); });
  });
}

}  // namespace

template <typename T>
void rotate_in(const T* D, const T* x, const int64_t* src, const int64_t* tgt, const T* radial,
               Rows<T> out, int64_t C, int64_t E, void* stream) {
  if (E * C == 0) return;
  rotate_in_kernel<T><<<blocks_for(E * 18 * C), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      D, x, src, tgt, radial, out, C, E);
  check_launch("rotate_in");
}

template <typename T>
void rotate_in_tangent(const T* D, const T* dD, const T* x, const T* dx, const int64_t* src,
                       const int64_t* tgt, const T* radial, const T* dradial, Rows<T> out,
                       int64_t C, int64_t E, void* stream) {
  if (E * C == 0) return;
  rotate_in_tangent_kernel<T>
      <<<blocks_for(E * 18 * C), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          D, dD, x, dx, src, tgt, radial, dradial, out, C, E);
  check_launch("rotate_in_tangent");
}

#define UMA_ROTATE_IN_LAUNCHERS(T)                                                           \
  template void rotate_in<T>(const T*, const T*, const int64_t*, const int64_t*, const T*,   \
                             Rows<T>, int64_t, int64_t, void*);                              \
  template void rotate_in_tangent<T>(const T*, const T*, const T*, const T*, const int64_t*, \
                                     const int64_t*, const T*, const T*, Rows<T>, int64_t,   \
                                     int64_t, void*);
UMA_ROTATE_IN_LAUNCHERS(float)
UMA_ROTATE_IN_LAUNCHERS(double)
#undef UMA_ROTATE_IN_LAUNCHERS

}  // namespace uma::nn::kernels::cuda
