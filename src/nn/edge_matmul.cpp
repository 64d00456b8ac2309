#include "nn/edge_matmul.h"

#include <ATen/Parallel.h>

namespace uma::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

constexpr int64_t kGrain = 64;  // edges per parallel task

// Kernels over a range of edges, compiled for several instruction sets and
// picked at run time (target_clones); the loops over K vectorize.
template <typename T>
__attribute__((always_inline)) inline void matmul_range(const T* A, const T* x, T* y, int64_t begin,
                                                        int64_t end, int64_t R, int64_t S, int64_t K,
                                                        bool transpose) {
  for (int64_t e = begin; e < end; ++e) {
    const T* a = A + e * R * S;
    const T* xe = x + e * S * K;
    T* ye = y + e * R * K;
    for (int64_t i = 0; i < R; ++i) {
      T* __restrict__ out = ye + i * K;
      for (int64_t k = 0; k < K; ++k) out[k] = 0;
      for (int64_t j = 0; j < S; ++j) {
        const T w = transpose ? a[j * R + i] : a[i * S + j];
        if (w == 0) continue;
        const T* __restrict__ in = xe + j * K;
        for (int64_t k = 0; k < K; ++k) out[k] += w * in[k];
      }
    }
  }
}

template <typename T>
__attribute__((always_inline)) inline void outer_range(const T* u, const T* v, T* o, int64_t begin,
                                                       int64_t end, int64_t R, int64_t S, int64_t K) {
  for (int64_t e = begin; e < end; ++e) {
    const T* ue = u + e * R * K;
    const T* ve = v + e * S * K;
    T* oe = o + e * R * S;
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < S; ++j) {
        const T* __restrict__ a = ue + i * K;
        const T* __restrict__ b = ve + j * K;
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t k = 0; k < K; ++k) acc += a[k] * b[k];
        oe[i * S + j] = acc;
      }
  }
}

#define UMA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
UMA_CLONES void matmul_f32(const float* A, const float* x, float* y, int64_t b, int64_t e, int64_t R,
                           int64_t S, int64_t K, bool t) { matmul_range(A, x, y, b, e, R, S, K, t); }
UMA_CLONES void matmul_f64(const double* A, const double* x, double* y, int64_t b, int64_t e, int64_t R,
                           int64_t S, int64_t K, bool t) { matmul_range(A, x, y, b, e, R, S, K, t); }
UMA_CLONES void outer_f32(const float* u, const float* v, float* o, int64_t b, int64_t e, int64_t R,
                          int64_t S, int64_t K) { outer_range(u, v, o, b, e, R, S, K); }
UMA_CLONES void outer_f64(const double* u, const double* v, double* o, int64_t b, int64_t e, int64_t R,
                          int64_t S, int64_t K) { outer_range(u, v, o, b, e, R, S, K); }
#undef UMA_CLONES

void matmul_kernel(const float* A, const float* x, float* y, int64_t E, int64_t R, int64_t S, int64_t K,
                   bool t) {
  at::parallel_for(0, E, kGrain, [&](int64_t b, int64_t e) { matmul_f32(A, x, y, b, e, R, S, K, t); });
}
void matmul_kernel(const double* A, const double* x, double* y, int64_t E, int64_t R, int64_t S,
                   int64_t K, bool t) {
  at::parallel_for(0, E, kGrain, [&](int64_t b, int64_t e) { matmul_f64(A, x, y, b, e, R, S, K, t); });
}
void outer_kernel(const float* u, const float* v, float* o, int64_t E, int64_t R, int64_t S, int64_t K) {
  at::parallel_for(0, E, kGrain, [&](int64_t b, int64_t e) { outer_f32(u, v, o, b, e, R, S, K); });
}
void outer_kernel(const double* u, const double* v, double* o, int64_t E, int64_t R, int64_t S, int64_t K) {
  at::parallel_for(0, E, kGrain, [&](int64_t b, int64_t e) { outer_f64(u, v, o, b, e, R, S, K); });
}

torch::Tensor matmul_forward(const torch::Tensor& A_in, const torch::Tensor& x_in, bool transpose) {
  auto A = A_in.contiguous(), x = x_in.contiguous();
  const int64_t E = A.size(0), R = transpose ? A.size(2) : A.size(1), S = transpose ? A.size(1) : A.size(2);
  const int64_t K = x.size(2);
  TORCH_CHECK(x.size(0) == E && x.size(1) == S, "edge_matmul: shape mismatch");
  auto y = torch::empty({E, R, K}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "edge_matmul", [&] {
    matmul_kernel(A.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), E, R,
                            S, K, transpose);
  });
  return y;
}

torch::Tensor outer_forward(const torch::Tensor& u_in, const torch::Tensor& v_in) {
  auto u = u_in.contiguous(), v = v_in.contiguous();
  const int64_t E = u.size(0), R = u.size(1), S = v.size(1), K = u.size(2);
  TORCH_CHECK(v.size(0) == E && v.size(2) == K, "edge_outer: shape mismatch");
  auto o = torch::empty({E, R, S}, u.options());
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "edge_outer", [&] {
    outer_kernel(u.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(), o.data_ptr<scalar_t>(), E, R, S, K);
  });
  return o;
}

class EdgeMatmul : public torch::autograd::Function<EdgeMatmul> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& A, const torch::Tensor& x,
                               bool transpose) {
    ctx->save_for_backward({A, x});
    ctx->saved_data["transpose"] = transpose;
    return matmul_forward(A, x, transpose);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const bool transpose = ctx->saved_data["transpose"].toBool();
    const auto& A = saved[0];
    const auto& x = saved[1];
    const auto& g = grads[0];
    torch::Tensor gA, gx;
    if (ctx->needs_input_grad(0)) gA = transpose ? edge_outer(x, g) : edge_outer(g, x);
    if (ctx->needs_input_grad(1)) gx = edge_matmul(A, g, !transpose);
    return {gA, gx, torch::Tensor()};
  }
};

class EdgeOuter : public torch::autograd::Function<EdgeOuter> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& u, const torch::Tensor& v) {
    ctx->save_for_backward({u, v});
    return outer_forward(u, v);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& G = grads[0];
    torch::Tensor gu, gv;
    if (ctx->needs_input_grad(0)) gu = edge_matmul(G, saved[1], false);
    if (ctx->needs_input_grad(1)) gv = edge_matmul(G, saved[0], true);
    return {gu, gv};
  }
};

torch::Tensor gather_pair(const torch::Tensor& x, const torch::Tensor& src, const torch::Tensor& tgt) {
  return torch::cat({x.index_select(0, src), x.index_select(0, tgt)}, 2);
}

class EdgeGatherMatmul : public torch::autograd::Function<EdgeGatherMatmul> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& A, const torch::Tensor& x,
                               const torch::Tensor& src, const torch::Tensor& tgt) {
    ctx->save_for_backward({A, x, src, tgt});
    torch::NoGradGuard no_grad;
    return matmul_forward(A, gather_pair(x, src, tgt), false);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &A = saved[0], &x = saved[1], &src = saved[2], &tgt = saved[3];
    const auto& g = grads[0];
    torch::Tensor gA, gx;
    if (ctx->needs_input_grad(0)) gA = edge_outer(g, gather_pair(x, src, tgt));
    if (ctx->needs_input_grad(1)) {
      auto halves = edge_matmul(A, g, true).chunk(2, 2);
      gx = torch::zeros_like(x).index_add(0, src, halves[0]).index_add(0, tgt, halves[1]);
    }
    return {gA, gx, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor edge_gather_matmul(const torch::Tensor& A, const torch::Tensor& x, const torch::Tensor& src,
                                 const torch::Tensor& tgt) {
  if (!A.device().is_cpu() || A.scalar_type() != x.scalar_type())
    return torch::bmm(A, gather_pair(x, src, tgt));
  return EdgeGatherMatmul::apply(A, x, src, tgt);
}

torch::Tensor edge_matmul(const torch::Tensor& A, const torch::Tensor& x, bool transpose) {
  if (!A.device().is_cpu() || A.scalar_type() != x.scalar_type())
    return torch::bmm(transpose ? A.transpose(1, 2) : A, x);
  return EdgeMatmul::apply(A, x, transpose);
}

torch::Tensor edge_outer(const torch::Tensor& u, const torch::Tensor& v) {
  if (!u.device().is_cpu() || u.scalar_type() != v.scalar_type()) return torch::bmm(u, v.transpose(1, 2));
  return EdgeOuter::apply(u, v);
}

}  // namespace uma::nn
