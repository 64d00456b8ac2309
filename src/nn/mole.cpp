#include "nn/mole.h"

#include "error.h"

namespace uma::nn {

MoleLinearImpl::MoleLinearImpl(int64_t num_experts, int64_t in, int64_t out, bool bias)
    : num_experts_(num_experts), in_(in), out_(out) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  if (num_experts > 0)
    weights_ = register_parameter("weights", torch::empty({num_experts, out, in}).uniform_(-bound, bound));
  else
    weights_ = register_parameter("weight", torch::empty({out, in}).uniform_(-bound, bound));
  if (bias) bias_ = register_parameter("bias", torch::empty({out}).uniform_(-bound, bound));
}

torch::Tensor MoleLinearImpl::mixed_weights(const torch::Tensor& coefficients) const {
  // [B, X] @ [X, out*in] -> [B, out, in]; one contiguous GEMM.
  return coefficients.matmul(weights_.view({num_experts_, -1})).view({-1, out_, in_});
}

void MoleLinearImpl::set_merged(const torch::Tensor& coefficients_row) {
  torch::NoGradGuard no_grad;
  merged_ = mixed_weights(coefficients_row.view({1, -1}))[0].contiguous();
}

torch::Tensor MoleLinearImpl::forward(const torch::Tensor& x, const MoleContext& ctx) {
  if (num_experts_ == 0) return torch::linear(x, weights_, bias_);
  if (ctx.use_merged) {
    if (!merged_.defined()) throw Error("internal: MoLE layer used merged before merging");
    return torch::linear(x, merged_, bias_);
  }
  auto w = mixed_weights(ctx.coefficients);
  const int64_t systems = w.size(0);
  if (systems == 1) return torch::linear(x, w[0], bias_);
  std::vector<torch::Tensor> parts;
  parts.reserve(systems);
  for (int64_t b = 0; b < systems; ++b) {
    const int64_t begin = ctx.row_offsets[b], len = ctx.row_offsets[b + 1] - begin;
    parts.push_back(torch::linear(x.narrow(0, begin, len), w[b], bias_));
  }
  return torch::cat(parts, 0);
}

}  // namespace uma::nn
