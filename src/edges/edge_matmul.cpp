#include "edges/edge_matmul.h"

#include "edges/edge_segments.h"

namespace uma::edges {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// node: [2E], each edge's source, then each edge's target; N (x's rows) where
// the edge is left out (its rows are zeros, and it joins no sum into x's rows).

// x [N, S, C] -> [E, S, 2C]: the pair of each edge's rows.
torch::Tensor pair_rows(const torch::Tensor& x, const torch::Tensor& node) {
  auto zero = x.sizes().vec();
  zero[0] = 1;
  auto rows = torch::cat({x, torch::zeros(zero, x.options())}).index_select(0, node);
  return torch::cat(rows.chunk(2, 0), 2);
}

class PairSum;

// pair_rows, whose backward is PairSum.
class PairGather : public torch::autograd::Function<PairGather> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& node) {
    ctx->save_for_backward({node});
    ctx->saved_data["nodes"] = x.size(0);
    return pair_rows(x, node);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads);
};

// g [E, S, 2C] -> [N, S, C]: each node's rows as source, then as target, in
// edge order (NodeSums), edges left out joining no sum.  Its backward is
// PairGather.
class PairSum : public torch::autograd::Function<PairSum> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& g,
                               const torch::Tensor& node, int64_t nodes) {
    ctx->save_for_backward({node});
    return NodeSums(node, nodes)(torch::cat(g.chunk(2, 2), 0));
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    return {PairGather::apply(grads[0], ctx->get_saved_variables()[0]), {}, {}};
  }
};

tensor_list PairGather::backward(AutogradContext* ctx, tensor_list grads) {
  const auto nodes = ctx->saved_data["nodes"].toInt();
  return {PairSum::apply(grads[0], ctx->get_saved_variables()[0], nodes), {}};
}

class EdgeGatherMatmul : public torch::autograd::Function<EdgeGatherMatmul> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& A, const torch::Tensor& x,
                               const torch::Tensor& node) {
    ctx->save_for_backward({A, x, node});
    torch::NoGradGuard no_grad;
    return torch::bmm(A, pair_rows(x, node));
  }
  // Built from differentiable functions whose own backward passes add no
  // float atomics either (a training step's second backward).
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &A = saved[0], &x = saved[1], &node = saved[2];
    const auto& g = grads[0];
    torch::Tensor gA, gx;
    if (ctx->needs_input_grad(0)) gA = torch::bmm(g, PairGather::apply(x, node).transpose(1, 2));
    if (ctx->needs_input_grad(1))
      gx = PairSum::apply(torch::bmm(A.transpose(1, 2), g), node, x.size(0));
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
