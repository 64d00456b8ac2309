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

template <typename T>
void update_in_one_pass(AdamWBuffers& b, const AdamWUpdate& u) {
  const double t = std::max(value<double>(u.applied), 1.0);
  // Each constant rounded to T as the tensor operations round it.
  const T scale = value<T>(u.scale);
  const T keep = T(1) - static_cast<T>(u.lr * u.weight_decay);
  const T m_weight = static_cast<T>(1.0 - u.beta1);
  const T v_keep = T(1) - static_cast<T>(1.0 - u.beta2);
  const T v_weight = static_cast<T>(1.0 - u.beta2);
  const T bias2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(u.beta2, t)));
  const T eps = static_cast<T>(u.eps);
  const T neg_step = -static_cast<T>(u.lr / (1.0 - std::pow(u.beta1, t)));
  const T ema_weight = static_cast<T>(u.ema_weight);
  T* w = b.w.data_ptr<T>();                                  // host data
  T* g = b.g.data_ptr<T>();                                  // host data
  T* m = b.m.data_ptr<T>();                                  // host data
  T* v = b.v.data_ptr<T>();                                  // host data
  T* ema = b.ema.defined() ? b.ema.data_ptr<T>() : nullptr;  // host data
  // Memory-bound: the buffers are read and written once (the gradient only
  // when clipping changes it).
  auto update = [&](int64_t i, T gi) {
    const T mi = lerp(m[i], gi, m_weight);
    const T vi = v[i] * v_keep + v_weight * gi * gi;
    const T denom = (std::sqrt(vi) / bias2_sqrt + eps) / neg_step;
    w[i] = w[i] * keep + mi / denom;
    m[i] = mi;
    v[i] = vi;
  };
  at::parallel_for(0, b.w.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    if (scale == T(1)) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) update(i, g[i]);
    } else {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) {
        g[i] *= scale;
        update(i, g[i]);
      }
    }
    if (!ema) return;
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) ema[i] = lerp(ema[i], w[i], ema_weight);
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
