#include "edges/system_blocks.h"

namespace uma::edges {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows [offsets[b], offsets[b+1]) of t.
torch::Tensor rows(const torch::Tensor& t, const std::vector<int64_t>& offsets, size_t b) {
  return t.narrow(0, offsets[b], offsets[b + 1] - offsets[b]);
}

// Both functions keep their two inputs and the offsets for the backward.
void save(AutogradContext* ctx, const torch::Tensor& a, const torch::Tensor& b,
          const std::vector<int64_t>& offsets) {
  ctx->save_for_backward({a, b});
  ctx->saved_data["offsets"] = offsets;
}

std::pair<variable_list, std::vector<int64_t>> saved_of(AutogradContext* ctx) {
  return {ctx->get_saved_variables(), ctx->saved_data["offsets"].toIntVector()};
}

// The derivatives, with dy the incoming gradient:
//   y = L(x, w):  dx = L(dy, w^T),  dw = O(dy, x)
//   g = O(a, c):  da = L(c, dg),    dc = L(a, dg^T)
// each again L or O, so a create_graph backward records these two only.
class BlocksLinear : public torch::autograd::Function<BlocksLinear> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               std::vector<int64_t> offsets) {
    auto y = torch::empty({x.size(0), w.size(1)}, x.options());
    for (size_t b = 0; b + 1 < offsets.size(); ++b) {
      auto out = rows(y, offsets, b);
      at::mm_out(out, rows(x, offsets, b), w[b].t());
    }
    save(ctx, x, w, offsets);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto [saved, offsets] = saved_of(ctx);
    const auto& dy = grads[0];
    torch::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) dx = system_blocks_linear(dy, saved[1].transpose(1, 2), offsets);
    if (ctx->needs_input_grad(1)) dw = system_blocks_outer(dy, saved[0], offsets);
    return {dx, dw, torch::Tensor()};
  }
};

class BlocksOuter : public torch::autograd::Function<BlocksOuter> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& a, const torch::Tensor& c,
                               std::vector<int64_t> offsets) {
    const int64_t systems = static_cast<int64_t>(offsets.size()) - 1;
    auto g = torch::empty({systems, a.size(1), c.size(1)}, a.options());
    for (int64_t b = 0; b < systems; ++b) {
      auto out = g[b];
      at::mm_out(out, rows(a, offsets, b).t(), rows(c, offsets, b));
    }
    save(ctx, a, c, offsets);
    return g;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto [saved, offsets] = saved_of(ctx);
    const auto& dg = grads[0];
    torch::Tensor da, dc;
    if (ctx->needs_input_grad(0)) da = system_blocks_linear(saved[1], dg, offsets);
    if (ctx->needs_input_grad(1)) dc = system_blocks_linear(saved[0], dg.transpose(1, 2), offsets);
    return {da, dc, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor system_blocks_linear(const torch::Tensor& x, const torch::Tensor& w,
                                   const std::vector<int64_t>& row_offsets) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 3 && x.size(1) == w.size(2) &&
                  w.size(0) + 1 == static_cast<int64_t>(row_offsets.size()) &&
                  row_offsets.front() == 0 && row_offsets.back() == x.size(0),
              "system_blocks_linear: x [N, in], w [B, out, in] and B + 1 offsets from 0 to N");
  return BlocksLinear::apply(x, w, row_offsets);
}

torch::Tensor system_blocks_outer(const torch::Tensor& a, const torch::Tensor& c,
                                  const std::vector<int64_t>& row_offsets) {
  TORCH_CHECK(a.dim() == 2 && c.dim() == 2 && a.size(0) == c.size(0) && row_offsets.front() == 0 &&
                  row_offsets.back() == a.size(0),
              "system_blocks_outer: a [N, p], c [N, q] and offsets from 0 to N");
  return BlocksOuter::apply(a, c, row_offsets);
}

}  // namespace uma::edges
