// What the lean operators' autograd functions share (edges/lean_rotate_in.cpp,
// lean_gate.cpp, lean_rotate_out.cpp): each calls its kernels' ops
// (edges/kernels/*_ops.h) through the one launch template (edges/launch/).
#pragma once

#include <ATen/record_function.h>
#include <torch/torch.h>

#include <initializer_list>
#include <string>

#include "core/uma_error.h"
#include "edges/kernel_args.h"
#include "edges/kernels/ops.h"
#include "edges/launch/launch.h"
#include "edges/lean_edges.h"

namespace uma::edges::lean {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Each operator's forward and backward is a RecordFunction scope
// "uma::lean::NAME" (tools/op_profile.h times them; free when nothing listens).
#define UMA_LEAN_SCOPE(name) RECORD_FUNCTION("uma::lean::" name, c10::ArrayRef<const c10::IValue>{})

// The double backwards are plain kernels: a third derivative is refused.
inline void refuse_third_order(const char* op) {
  if (torch::GradMode::is_enabled())
    throw Error(std::string("internal: ") + op + " has no third derivative");
}

inline MPieces new_pieces(int64_t edges, int64_t channels, const torch::TensorOptions& opts) {
  return {torch::empty({edges, 3, channels}, opts), torch::empty({edges, 4, channels}, opts),
          torch::empty({edges, 2, channels}, opts)};
}

inline MPieces contiguous(const variable_list& g, size_t first) {
  return {g[first].contiguous(), g[first + 1].contiguous(), g[first + 2].contiguous()};
}

// An adjoint of an output that was not computed (empty) counts as zero.
inline torch::Tensor or_zeros(const torch::Tensor& a, const torch::Tensor& like) {
  return a.defined() && a.numel() == like.numel() ? a.contiguous() : torch::zeros_like(like);
}

inline torch::Tensor nothing(const torch::Tensor& like) {
  return torch::empty({0}, like.options());
}

// The operators' tensors on one device, with launches there.
inline void check_device(const torch::Tensor& t, std::initializer_list<torch::Tensor> others,
                         const char* op) {
  launch::require_lean_kernels(t.device());
  for (const auto& o : others)
    if (o.defined() && o.numel() > 0 && o.device() != t.device())
      throw Error(std::string("internal: ") + op + "'s tensors are on " + t.device().str() +
                  " and " + o.device().str());
}

}  // namespace uma::edges::lean
