#include "edges/edge_matmul.h"

#include "edges/edge_segments.h"

namespace uma::edges {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// node: [2E], each edge's source, then each edge's target; N (x's rows) where
// the edge is left out (its rows are zeros, and it joins no sum into x's rows).

// x [N, S, C] -> [N + 1, S, C]: the zero row of the edges left out last.
torch::Tensor with_zero_row(const torch::Tensor& x) {
  auto zero = x.sizes().vec();
  zero[0] = 1;
  return torch::cat({x, torch::zeros(zero, x.options())});
}

// rows [2E, S, C] (sources', then targets') -> [E, S, 2C].
torch::Tensor pairs(const torch::Tensor& rows) { return torch::cat(rows.chunk(2, 0), 2); }

class EdgeGatherMatmul : public torch::autograd::Function<EdgeGatherMatmul> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& A, const torch::Tensor& x,
                               const torch::Tensor& node) {
    ctx->save_for_backward({A, x, node});
    torch::NoGradGuard no_grad;
    return torch::bmm(A, pairs(with_zero_row(x).index_select(0, node)));
  }
  // Built from differentiable ops whose own backward passes add no float
  // atomics where sums run in segments (a training step's second backward):
  // the gather's is a segment sum, the sum's a gather.
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &A = saved[0], &x = saved[1], &node = saved[2];
    const auto& g = grads[0];
    torch::Tensor gA, gx;
    if (ctx->needs_input_grad(0))
      gA = torch::bmm(g, pairs(gather_from_nodes(with_zero_row(x), node)).transpose(1, 2));
    if (ctx->needs_input_grad(1))
      gx = NodeSums(node, x.size(0))(torch::cat(torch::bmm(A.transpose(1, 2), g).chunk(2, 2), 0));
    return {gA, gx, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor edge_matmul(const torch::Tensor& A, const torch::Tensor& x, bool transpose) {
  return torch::bmm(transpose ? A.transpose(1, 2) : A, x);
}

torch::Tensor edge_gather_matmul(const torch::Tensor& A, const torch::Tensor& x,
                                 const torch::Tensor& src, const torch::Tensor& tgt,
                                 const torch::Tensor& valid) {
  const int64_t N = x.size(0);
  auto node = torch::cat({src, tgt});
  if (valid.defined()) node = leave_out(node, valid.repeat(2), N);
  return EdgeGatherMatmul::apply(A, x, node);
}

}  // namespace uma::edges
