#include "edges/edge_matmul.h"

namespace uma::edges {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

torch::Tensor gather_pair(const torch::Tensor& x, const torch::Tensor& src,
                          const torch::Tensor& tgt) {
  return torch::cat({x.index_select(0, src), x.index_select(0, tgt)}, 2);
}

class EdgeGatherMatmul : public torch::autograd::Function<EdgeGatherMatmul> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& A, const torch::Tensor& x,
                               const torch::Tensor& src, const torch::Tensor& tgt) {
    ctx->save_for_backward({A, x, src, tgt});
    torch::NoGradGuard no_grad;
    return torch::bmm(A, gather_pair(x, src, tgt));
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &A = saved[0], &x = saved[1], &src = saved[2], &tgt = saved[3];
    const auto& g = grads[0];
    torch::Tensor gA, gx;
    if (ctx->needs_input_grad(0)) gA = torch::bmm(g, gather_pair(x, src, tgt).transpose(1, 2));
    if (ctx->needs_input_grad(1)) {
      auto halves = torch::bmm(A.transpose(1, 2), g).chunk(2, 2);
      gx = torch::zeros_like(x).index_add(0, src, halves[0]).index_add(0, tgt, halves[1]);
    }
    return {gA, gx, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor edge_matmul(const torch::Tensor& A, const torch::Tensor& x, bool transpose) {
  return torch::bmm(transpose ? A.transpose(1, 2) : A, x);
}

torch::Tensor edge_gather_matmul(const torch::Tensor& A, const torch::Tensor& x,
                                 const torch::Tensor& src, const torch::Tensor& tgt) {
  return EdgeGatherMatmul::apply(A, x, src, tgt);
}

}  // namespace uma::edges
