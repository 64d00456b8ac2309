// AdamW, gradient-norm clipping and an exponential moving average over one
// flat buffer holding every parameter of a module, as torch.optim.AdamW,
// clip_grad_norm_ and AveragedModel (get_ema_multi_avg_fn) define them, with
// fairchem's cosine learning-rate schedule.  Each update is one fused pass on
// the CPU or a handful of whole-buffer operations elsewhere (adamw_update.h)
// and reads nothing back: a step whose loss or gradient norm is not finite
// leaves the weights, moments and average untouched (device-side mask) and is
// counted.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace uma::train {

struct OptimizerOptions {
  double lr = 4e-4;
  double weight_decay = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double clip_norm = 100.0;  // 0: no clipping (the norm is still computed)
  double ema_decay = 0.999;  // 0: no moving average
  // fairchem CosineLRLambda: warm-up from warmup_factor over warmup_steps,
  // cosine from step 0 to total_steps, then lr_min_factor.
  int64_t warmup_steps = 0;
  double warmup_factor = 0.2;
  int64_t total_steps = 10000;
  double lr_min_factor = 0.01;
};

// Learning-rate factor of optimizer step `step` (0-based).
double cosine_lr_factor(const OptimizerOptions& o, int64_t step);

// Every parameter of a module re-seated as a view of one contiguous buffer,
// with gradients accumulated in place into a second buffer.
class FlatParameters {
 public:
  explicit FlatParameters(const std::vector<torch::Tensor>& parameters);
  torch::Tensor& values() { return values_; }  // [P]
  torch::Tensor& grads() { return grads_; }    // [P]
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }
  int64_t numel() const { return values_.numel(); }

 private:
  std::vector<torch::Tensor> parameters_;
  torch::Tensor values_, grads_;
};

class AdamW {
 public:
  AdamW(FlatParameters& params, OptimizerOptions options);

  // Clips the gradient, updates the weights and the average if `loss` and
  // the gradient norm are finite.  `step` counts calls (the schedule's step).
  void step(const torch::Tensor& loss);

  const torch::Tensor& grad_norm() const { return grad_norm_; }  // [] of the last step
  const torch::Tensor& skipped() const { return skipped_; }      // [] steps not applied
  const torch::Tensor& average() const { return ema_; }          // [P] or undefined
  int64_t steps_taken() const { return steps_; }
  double current_lr() const;  // of the next step
  double last_lr() const;     // of the step just taken (the first step's before any)
  const OptimizerOptions& options() const { return options_; }

  // The optimizer's state for checkpoints, by name (the names are the
  // tensors' names in a state file).
  struct State {
    torch::Tensor exp_avg, exp_avg_sq;  // [P] Adam moments
    torch::Tensor applied, skipped;     // [1] float64 update counts
    torch::Tensor ema;                  // [P] moving average, undefined without one
    // Each field with its name, for writers and readers of state files.
    std::vector<std::pair<const char*, torch::Tensor*>> fields() {
      return {{"exp_avg", &exp_avg},
              {"exp_avg_sq", &exp_avg_sq},
              {"applied", &applied},
              {"skipped", &skipped},
              {"ema", &ema}};
    }
  };
  State state() const;
  // Throws uma::Error when `state` does not fit this model and settings.
  void load_state(const State& state, int64_t steps);

 private:
  FlatParameters& params_;
  OptimizerOptions options_;
  torch::Tensor exp_avg_, exp_avg_sq_, ema_;
  torch::Tensor applied_;  // [] float64 updates applied (AdamW's bias-correction step)
  torch::Tensor skipped_;  // [] float64
  torch::Tensor grad_norm_;
  int64_t steps_ = 0;
};

}  // namespace uma::train
