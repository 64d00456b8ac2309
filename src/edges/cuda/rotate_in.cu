// The lean edge kernels' rotate-in family on CUDA, through the bodies of
// edges/kernels/rotate_in.h that the CPU's vector loops run
// (edges/cpu/rotate_in.cpp).  The forward and its tangent: one warp per
// (edge, M row, half), which builds the row's view once; its lanes stride
// over the C channels, so that a warp reads consecutive channels of one row
// of x and writes one row of out.  The
// backward for the radial weights and D: one block per edge, one warp per
// radial row (its one or two M rows in order, so that the second adds to
// the first's gradient as on the CPU), a row's sums over the channels in the
// warp.  For x: one thread per (node, degree, channel), summing the node's
// edges as source, then as target, in their segments' order in registers.
// Deterministic, no atomics.
#include "edges/cuda/lean_kernels.h"

#include "edges/cuda/launch.cuh"
#include "edges/kernels/rotate_in.h"

namespace uma::edges::kernels::cuda {
namespace {

// Rows r = (e * 9 + j) * 2 + h: edge e, M row j, half h.
struct RotateInRowIndex {
  int64_t e;
  int j, h;
  __device__ explicit RotateInRowIndex(int64_t r) : e(r / 18) {
    const int jh = int(r - e * 18);
    j = jh >> 1;
    h = jh & 1;
  }
};

template <typename T>
__global__ void rotate_in_kernel(const T* D, const T* x, const int64_t* src, const int64_t* tgt,
                                 const T* radial, Rows<T> out, int64_t C, int64_t E) {
  for_each_row(E * 18, [&](int64_t r, int lane) {
    const RotateInRowIndex at(r);
    const auto v = rotate_in_row(D, x, src, tgt, radial, out, C, at.e, at.j, at.h);
    with_block_size(block_size(l_row(at.j)), [&](auto K) {
      for (int64_t c = lane; c < C; c += kWarp) rotate_in_at<decltype(K)::value>(v, C, c);
    });
  });
}

template <typename T>
__global__ void rotate_in_tangent_kernel(const T* D, const T* dD, const T* x, const T* dx,
                                         const int64_t* src, const int64_t* tgt, const T* radial,
                                         const T* dradial, Rows<T> out, int64_t C, int64_t E) {
  for_each_row(E * 18, [&](int64_t r, int lane) {
    const RotateInRowIndex at(r);
    const auto v =
        rotate_in_tangent_row(D, dD, x, dx, src, tgt, radial, dradial, out, C, at.e, at.j, at.h);
    with_block_size(block_size(l_row(at.j)), [&](auto K) {
      for (int64_t c = lane; c < C; c += kWarp) rotate_in_tangent_at<decltype(K)::value>(v, C, c);
    });
  });
}

// The backward (Tangent false) or its tangent (true) for the radial weights
// and D, as the edge kernel below calls it: a row's view, its radial
// gradient at c and its D terms at c.
template <bool Tangent, typename T>
struct RadialAndD {
  const T *D, *dD, *x, *dx;
  const int64_t *src, *tgt;
  const T *radial, *dradial;
  Rows<const T> g;
  T* gradial;
  int64_t C;

  __device__ auto row(int64_t e, int j) const {
    if constexpr (Tangent)
      return rotate_in_grad_tangent_row(D, dD, x, dx, src, tgt, radial, dradial, g, gradial, C, e,
                                        j);
    else
      return rotate_in_grad_row(D, x, src, tgt, radial, g, gradial, C, e, j);
  }
  template <int K, bool Accumulate, typename V>
  __device__ void radial_at(const V& v, int64_t c) const {
    if constexpr (Tangent)
      rotate_in_grad_tangent_radial_at<K, Accumulate>(v, C, c);
    else
      rotate_in_grad_radial_at<K, Accumulate>(v, C, c);
  }
  template <int K, typename V>
  __device__ void D_terms_at(const V& v, int64_t c, T& a0, T& a1, T& a2, T& a3, T& a4) const {
    if constexpr (Tangent)
      rotate_in_grad_tangent_D_terms_at<K>(v, C, c, a0, a1, a2, a3, a4);
    else
      rotate_in_grad_D_terms_at<K>(v, C, c, a0, a1, a2, a3, a4);
  }
};

// Block: 6 warps, warp rr for radial row rr; grid: one block per edge.
template <bool WantD, typename Op, typename T>
__global__ void radial_and_D_kernel(Op op, T* gD, int64_t E) {
  const int rr = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  for (int64_t e = blockIdx.x; e < E; e += gridDim.x)
    for (int i = 0; i < rows_of_radial(rr); ++i) {
      const int j = row_of_radial(rr, i), r = l_row(j);
      const auto v = op.row(e, j);
      with_block_size(block_size(r), [&](auto Kc) {
        constexpr int K = decltype(Kc)::value;
        [[maybe_unused]] T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0;
        for (int64_t c = lane; c < op.C; c += kWarp) {
          if (i == 0)
            op.template radial_at<K, false>(v, c);
          else
            op.template radial_at<K, true>(v, c);
          if constexpr (WantD) op.template D_terms_at<K>(v, c, a0, a1, a2, a3, a4);
        }
        if constexpr (WantD) {
          const T a[5] = {warp_sum(a0), warp_sum(a1), warp_sum(a2), warp_sum(a3), warp_sum(a4)};
          if (lane == 0) {
            T* gd = gD + e * 81 + r * 9 + block_start(r);
#pragma unroll
            for (int k = 0; k < K; ++k) gd[k] += a[k];
          }
        }
      });
    }
}

template <bool Tangent, typename T>
void launch_radial_and_D(const RadialAndD<Tangent, T>& op, T* gD, int64_t E, void* stream,
                         const char* name) {
  if (E == 0) return;
  const unsigned int blocks = static_cast<unsigned int>(E < (1 << 30) ? E : (1 << 30));
  const auto s = static_cast<cudaStream_t>(stream);
  if (gD)
    radial_and_D_kernel<true><<<blocks, 6 * kWarp, 0, s>>>(op, gD, E);
  else
    radial_and_D_kernel<false><<<blocks, 6 * kWarp, 0, s>>>(op, gD, E);
  check_launch(name);
}

// The backward (Tangent false) or its tangent for x, per node: a row's view
// for an endpoint, and its contribution at c.
template <bool Tangent, typename T>
struct NodeRows {
  const T *D, *dD, *radial, *dradial;
  Rows<const T> g;
  int64_t C;

  __device__ auto row(int64_t e, int j, int h) const {
    if constexpr (Tangent)
      return rotate_in_grad_node_tangent_row(D, dD, radial, dradial, g, C, e, j, h);
    else
      return rotate_in_grad_node_row(D, radial, g, C, e, j, h);
  }
  template <int K, typename V>
  __device__ void add_at(const V& v, int64_t c, T* acc) const {
    if constexpr (Tangent)
      rotate_in_grad_node_tangent_at<K>(v, c, acc, 1);
    else
      rotate_in_grad_node_at<K>(v, c, acc, 1);
  }
};

// One thread per (node, degree, channel).
template <typename Op, typename T>
__global__ void nodes_kernel(Op op, const int64_t* src_order, const int64_t* src_offsets,
                             const int64_t* tgt_order, const int64_t* tgt_offsets, int64_t edges,
                             T* gx, int64_t N) {
  const int64_t C = op.C;
  for_each_element(N * 3, C, [&](int64_t nl, int64_t c) {
    const int64_t n = nl / 3;
    with_degree(int(nl - n * 3), [&](auto L) {
      constexpr int l = decltype(L)::value, K = 2 * l + 1;
      T acc[K];
#pragma unroll
      for (int k = 0; k < K; ++k) acc[k] = 0;
      for (int h = 0; h < 2; ++h) {
        const int64_t* order = h ? tgt_order : src_order;
        const int64_t* offsets = h ? tgt_offsets : src_offsets;
        for (int64_t p = offsets[n], last = offsets[n + 1]; p < last; ++p) {
          const int64_t e = order[p];
          if (e >= edges) continue;
#pragma unroll
          for (int i = 0; i < 2 * l + 1; ++i)
            op.template add_at<K>(op.row(e, row_of_degree(l, i), h), c, acc);
        }
      }
      T* o = gx + (n * 9 + l * l) * C + c;
#pragma unroll
      for (int k = 0; k < K; ++k) o[k * C] += acc[k];
    });
  });
}

template <bool Tangent, typename T>
void launch_nodes(const NodeRows<Tangent, T>& op, const int64_t* src_order,
                  const int64_t* src_offsets, const int64_t* tgt_order, const int64_t* tgt_offsets,
                  int64_t edges, T* gx, int64_t N, void* stream, const char* name) {
  if (N * op.C == 0) return;
  nodes_kernel<<<blocks_for(N * 3 * op.C), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      op, src_order, src_offsets, tgt_order, tgt_offsets, edges, gx, N);
  check_launch(name);
}

}  // namespace

template <typename T>
void rotate_in(const T* D, const T* x, const int64_t* src, const int64_t* tgt, const T* radial,
               Rows<T> out, int64_t C, int64_t E, void* stream) {
  if (E * C == 0) return;
  rotate_in_kernel<T>
      <<<blocks_for(E * 18 * kWarp), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          D, x, src, tgt, radial, out, C, E);
  check_launch("rotate_in");
}

template <typename T>
void rotate_in_tangent(const T* D, const T* dD, const T* x, const T* dx, const int64_t* src,
                       const int64_t* tgt, const T* radial, const T* dradial, Rows<T> out,
                       int64_t C, int64_t E, void* stream) {
  if (E * C == 0) return;
  rotate_in_tangent_kernel<T>
      <<<blocks_for(E * 18 * kWarp), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          D, dD, x, dx, src, tgt, radial, dradial, out, C, E);
  check_launch("rotate_in_tangent");
}

template <typename T>
void rotate_in_grad_edges(const T* D, const T* x, const int64_t* src, const int64_t* tgt,
                          const T* radial, Rows<const T> g, int64_t C, T* gD, T* gradial, int64_t E,
                          void* stream) {
  const RadialAndD<false, T> op{D, nullptr, x, nullptr, src, tgt, radial, nullptr, g, gradial, C};
  launch_radial_and_D(op, gD, E, stream, "rotate_in_grad_edges");
}

template <typename T>
void rotate_in_grad_edges_tangent(const T* D, const T* dD, const T* x, const T* dx,
                                  const int64_t* src, const int64_t* tgt, const T* radial,
                                  const T* dradial, Rows<const T> g, int64_t C, T* gD, T* gradial,
                                  int64_t E, void* stream) {
  const RadialAndD<true, T> op{D, dD, x, dx, src, tgt, radial, dradial, g, gradial, C};
  launch_radial_and_D(op, gD, E, stream, "rotate_in_grad_edges_tangent");
}

template <typename T>
void rotate_in_grad_nodes(const T* D, const T* radial, Rows<const T> g, const int64_t* src_order,
                          const int64_t* src_offsets, const int64_t* tgt_order,
                          const int64_t* tgt_offsets, int64_t edges, int64_t C, T* gx, int64_t N,
                          void* stream) {
  launch_nodes(NodeRows<false, T>{D, nullptr, radial, nullptr, g, C}, src_order, src_offsets,
               tgt_order, tgt_offsets, edges, gx, N, stream, "rotate_in_grad_nodes");
}

template <typename T>
void rotate_in_grad_nodes_tangent(const T* D, const T* dD, const T* radial, const T* dradial,
                                  Rows<const T> g, const int64_t* src_order,
                                  const int64_t* src_offsets, const int64_t* tgt_order,
                                  const int64_t* tgt_offsets, int64_t edges, int64_t C, T* gx,
                                  int64_t N, void* stream) {
  launch_nodes(NodeRows<true, T>{D, dD, radial, dradial, g, C}, src_order, src_offsets, tgt_order,
               tgt_offsets, edges, gx, N, stream, "rotate_in_grad_nodes_tangent");
}

#define UMA_ROTATE_IN_LAUNCHERS(T)                                                                 \
  template void rotate_in<T>(const T*, const T*, const int64_t*, const int64_t*, const T*,         \
                             Rows<T>, int64_t, int64_t, void*);                                    \
  template void rotate_in_tangent<T>(const T*, const T*, const T*, const T*, const int64_t*,       \
                                     const int64_t*, const T*, const T*, Rows<T>, int64_t,         \
                                     int64_t, void*);                                              \
  template void rotate_in_grad_edges<T>(const T*, const T*, const int64_t*, const int64_t*,        \
                                        const T*, Rows<const T>, int64_t, T*, T*, int64_t, void*); \
  template void rotate_in_grad_nodes<T>(const T*, const T*, Rows<const T>, const int64_t*,         \
                                        const int64_t*, const int64_t*, const int64_t*, int64_t,   \
                                        int64_t, T*, int64_t, void*);                              \
  template void rotate_in_grad_edges_tangent<T>(                                                   \
      const T*, const T*, const T*, const T*, const int64_t*, const int64_t*, const T*, const T*,  \
      Rows<const T>, int64_t, T*, T*, int64_t, void*);                                             \
  template void rotate_in_grad_nodes_tangent<T>(                                                   \
      const T*, const T*, const T*, const T*, Rows<const T>, const int64_t*, const int64_t*,       \
      const int64_t*, const int64_t*, int64_t, int64_t, T*, int64_t, void*);
UMA_ROTATE_IN_LAUNCHERS(float)
UMA_ROTATE_IN_LAUNCHERS(double)
#undef UMA_ROTATE_IN_LAUNCHERS

}  // namespace uma::edges::kernels::cuda
