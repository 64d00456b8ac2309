#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "train/adamw_update.h"
#include "core/uma_error.h"

namespace uma::train {

double cosine_lr_factor(const OptimizerOptions& o, int64_t step) {
  const double s = static_cast<double>(step);
  const double warmup = static_cast<double>(std::max<int64_t>(o.warmup_steps, 1));
  if (s <= warmup) {  // as fairchem: even warmup 0 scales step 0 by warmup_factor
    const double alpha = s / warmup;
    return o.warmup_factor * (1.0 - alpha) + alpha;
  }
  if (step >= o.total_steps) return o.lr_min_factor;
  return o.lr_min_factor +
         0.5 * (1.0 - o.lr_min_factor) * (1.0 + std::cos(M_PI * s / o.total_steps));
}

FlatParameters::FlatParameters(const std::vector<torch::Tensor>& parameters)
    : parameters_(parameters) {
  if (parameters_.empty()) throw Error("internal: no parameters to train");
  int64_t total = 0;
  for (const auto& p : parameters_) total += p.numel();
  const auto opts = parameters_[0].options().requires_grad(false);
  values_ = torch::empty({total}, opts);
  grads_ = torch::zeros({total}, opts);
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& p : parameters_) {
    const int64_t n = p.numel();
    auto slot = values_.narrow(0, offset, n);
    slot.copy_(p.reshape({-1}));       // same device
    p.set_data(slot.view(p.sizes()));  // same device
    p.mutable_grad() = grads_.narrow(0, offset, n).view(p.sizes());
    offset += n;
  }
}

AdamW::AdamW(FlatParameters& params, OptimizerOptions options)
    : params_(params), options_(options) {
  const auto& v = params_.values();
  exp_avg_ = torch::zeros_like(v);
  exp_avg_sq_ = torch::zeros_like(v);
  if (options_.ema_decay > 0) ema_ = v.clone();
  const auto dopts = v.options().dtype(torch::kFloat64);
  applied_ = torch::zeros({}, dopts);
  skipped_ = torch::zeros({}, dopts);
  grad_norm_ = torch::zeros({}, v.options());
}

double AdamW::current_lr() const { return options_.lr * cosine_lr_factor(options_, steps_); }

double AdamW::last_lr() const {
  return options_.lr * cosine_lr_factor(options_, std::max<int64_t>(steps_ - 1, 0));
}

void AdamW::step(const torch::Tensor& loss) {
  torch::NoGradGuard no_grad;
  auto& w = params_.values();
  auto& g = params_.grads();
  const double lr = current_lr();
  ++steps_;

  grad_norm_ = torch::linalg_vector_norm(g, 2);
  auto ok = torch::isfinite(loss) & torch::isfinite(grad_norm_);
  skipped_ += 1.0 - ok.to(torch::kFloat64);
  applied_ += ok.to(torch::kFloat64);
  // clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
  auto scale = options_.clip_norm > 0
                   ? torch::clamp_max(options_.clip_norm / (grad_norm_ + 1e-6), 1.0)
                   : torch::ones_like(grad_norm_);
  AdamWBuffers buffers{w, g, exp_avg_, exp_avg_sq_, ema_};
  AdamWUpdate update{ok, scale, applied_, lr, options_.weight_decay, options_.beta1, options_.beta2,
                     options_.eps,
                     // AveragedModel: the first update copies, then ema += (1 - decay)(w - ema).
                     steps_ == 1 ? 1.0 : 1.0 - options_.ema_decay};
  adamw_update(buffers, update);
}

AdamW::State AdamW::state() const {
  return {exp_avg_, exp_avg_sq_, applied_.view({1}), skipped_.view({1}), ema_};
}

void AdamW::load_state(const State& s, int64_t steps) {
  auto fits = [](const torch::Tensor& t, const torch::Tensor& like) {
    return t.defined() && t.numel() == like.numel();
  };
  if (!fits(s.exp_avg, exp_avg_) || !fits(s.exp_avg_sq, exp_avg_sq_) ||
      !fits(s.applied, applied_.view({1})) || !fits(s.skipped, skipped_.view({1})) ||
      s.ema.defined() != ema_.defined() || (ema_.defined() && !fits(s.ema, ema_)))
    throw Error("the optimizer state does not match this model and these settings");
  torch::NoGradGuard no_grad;
  exp_avg_.copy_(s.exp_avg);              // same device
  exp_avg_sq_.copy_(s.exp_avg_sq);        // same device
  applied_.copy_(s.applied[0]);           // same device
  skipped_.copy_(s.skipped[0]);           // same device
  if (ema_.defined()) ema_.copy_(s.ema);  // same device
  steps_ = steps;
}

}  // namespace uma::train
