#include "train/adamw_update.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>

namespace uma::train {
namespace {

// torch.lerp's two forms, so that a weight of 1 gives `to` exactly.
template <typename T>
inline T lerp(T from, T to, T weight) {
  return std::abs(weight) < T(0.5) ? from + weight * (to - from)
                                   : to - (to - from) * (T(1) - weight);
}

// A 0-dim CPU tensor's value, read in place as a kernel on a device would read
// device memory (not a transfer: the CPU is the device here).
template <typename T>
T value(const torch::Tensor& t) {
  const auto type = c10::CppTypeToScalarType<T>::value;
  return *t.to(type).template data_ptr<T>();  // host data
}

// The update's constants, each rounded to T as the tensor operations round it.
template <typename T>
struct Step {
  T scale, keep, m_weight, v_keep, v_weight, bias2_sqrt, eps, neg_step, ema_weight;
};

// Elements [begin, end) of the buffers (ema null: no average).  A function of
// its own, with everything by value: inside the OpenMP region that
// at::parallel_for opens, loops over a lambda's by-reference captures were
// not vectorised.
template <typename T>
void update_range(const Step<T> k, T* __restrict w, T* __restrict g, T* __restrict m,
                  T* __restrict v, T* __restrict ema, int64_t begin, int64_t end) {
  const bool clip = k.scale != T(1);
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const T gi = clip ? g[i] * k.scale : g[i];
    if (clip) g[i] = gi;
    const T mi = lerp(m[i], gi, k.m_weight);
    const T vi = v[i] * k.v_keep + k.v_weight * gi * gi;
    const T denom = (std::sqrt(vi) / k.bias2_sqrt + k.eps) / k.neg_step;
    w[i] = w[i] * k.keep + mi / denom;
    m[i] = mi;
    v[i] = vi;
  }
  if (!ema) return;
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) ema[i] = lerp(ema[i], w[i], k.ema_weight);
}

template <typename T>
void update_in_one_pass(AdamWBuffers& b, const AdamWUpdate& u) {
  const double t = std::max(value<double>(u.applied), 1.0);
  const Step<T> k{value<T>(u.scale),
                  T(1) - static_cast<T>(u.lr * u.weight_decay),
                  static_cast<T>(1.0 - u.beta1),
                  T(1) - static_cast<T>(1.0 - u.beta2),
                  static_cast<T>(1.0 - u.beta2),
                  static_cast<T>(std::sqrt(1.0 - std::pow(u.beta2, t))),
                  static_cast<T>(u.eps),
                  -static_cast<T>(u.lr / (1.0 - std::pow(u.beta1, t))),
                  static_cast<T>(u.ema_weight)};
  T* w = b.w.data_ptr<T>();                                  // host data
  T* g = b.g.data_ptr<T>();                                  // host data
  T* m = b.m.data_ptr<T>();                                  // host data
  T* v = b.v.data_ptr<T>();                                  // host data
  T* ema = b.ema.defined() ? b.ema.data_ptr<T>() : nullptr;  // host data
  // Memory-bound: the buffers are read and written once (the gradient only
  // when clipping changes it).
  at::parallel_for(0, b.w.numel(), 1 << 14, [=](int64_t begin, int64_t end) {
    update_range(k, w, g, m, v, ema, begin, end);
  });
}

}  // namespace

void adamw_update_by_tensor_ops(AdamWBuffers& b, const AdamWUpdate& u) {
  torch::NoGradGuard no_grad;
  auto okf = u.ok.to(b.w.scalar_type());
  // A rejected step's gradient becomes zero (masked, so NaN cannot leak through).
  b.g.mul_(u.scale).masked_fill_(u.ok.logical_not(), 0.0);
  b.w.mul_(1.0 - u.lr * u.weight_decay * okf);
  b.m.lerp_(b.g, (1.0 - u.beta1) * okf);
  b.v.mul_(1.0 - (1.0 - u.beta2) * okf).addcmul_(b.g, b.g, 1.0 - u.beta2);
  auto t = torch::clamp_min(u.applied, 1.0);
  auto step_size = (u.lr / (1.0 - torch::pow(u.beta1, t))) * okf;
  auto bias2_sqrt = torch::sqrt(1.0 - torch::pow(u.beta2, t));
  // w -= step_size * m / denom, as m / (denom / -step_size); a rejected step
  // divides by -0 and adds -0.
  auto denom = b.v.sqrt()
                   .div_(bias2_sqrt.to(b.w.scalar_type()))
                   .add_(u.eps)
                   .div_(-step_size.to(b.w.scalar_type()));
  b.w.addcdiv_(b.m, denom);
  if (b.ema.defined()) b.ema.lerp_(b.w, u.ema_weight * okf);
}

void adamw_update_in_one_pass(AdamWBuffers& b, const AdamWUpdate& u) {
  TORCH_CHECK(b.w.is_cpu() && b.w.is_contiguous(),
              "adamw_update_in_one_pass: contiguous CPU buffers");
  torch::NoGradGuard no_grad;
  if (!value<bool>(u.ok)) {
    b.g.zero_();
    return;
  }
  AT_DISPATCH_FLOATING_TYPES(b.w.scalar_type(), "adamw_update_in_one_pass",
                             [&] { update_in_one_pass<scalar_t>(b, u); });
}

}  // namespace uma::train
