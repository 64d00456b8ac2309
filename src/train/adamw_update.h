// One AdamW update (torch.optim.AdamW with clip_grad_norm_ and AveragedModel's
// moving average) of the flat buffers every parameter lives in, in two
// implementations of the same arithmetic: whole-buffer tensor operations
// (any device; a dozen passes over the buffers) and, on the CPU, one fused
// pass.  Neither reads anything back to the host: the step's verdict, clip
// scale and update count are 0-dim tensors on the buffers' device.
#pragma once

#include <torch/torch.h>

namespace uma::train {

struct AdamWBuffers {
  torch::Tensor w, g;  // [P] weights; gradient (clipped in place, zero when rejected)
  torch::Tensor m, v;  // [P] first and second moments
  torch::Tensor ema;   // [P] moving average of w, or undefined
};

struct AdamWUpdate {
  torch::Tensor ok;       // [] bool: apply this step
  torch::Tensor scale;    // [] w's dtype: clip_grad_norm_'s factor
  torch::Tensor applied;  // [] float64: updates applied, this one included
  double lr = 0, weight_decay = 0, beta1 = 0, beta2 = 0, eps = 0;
  double ema_weight = 0;  // lerp weight of the average (1 copies w)
};

// A rejected step zeroes the gradient and leaves w, m, v and ema as they were.
void adamw_update_by_tensor_ops(AdamWBuffers& b, const AdamWUpdate& u);
void adamw_update_in_one_pass(AdamWBuffers& b, const AdamWUpdate& u);  // CPU buffers only

// The one-pass update on the CPU, the tensor operations elsewhere.
inline void adamw_update(AdamWBuffers& b, const AdamWUpdate& u) {
  if (b.w.is_cpu())
    adamw_update_in_one_pass(b, u);
  else
    adamw_update_by_tensor_ops(b, u);
}

}  // namespace uma::train
