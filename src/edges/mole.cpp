#include "edges/mole.h"

#include <algorithm>

#include "edges/system_blocks.h"
#include "core/uma_error.h"

namespace uma::edges {

MoleLinearImpl::MoleLinearImpl(int64_t num_experts, int64_t in, int64_t out, bool bias)
    : num_experts_(num_experts), in_(in), out_(out) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  if (num_experts > 0)
    weights_ =
        register_parameter("weights", torch::empty({num_experts, out, in}).uniform_(-bound, bound));
  else
    weights_ = register_parameter("weight", torch::empty({out, in}).uniform_(-bound, bound));
  if (bias) bias_ = register_parameter("bias", torch::empty({out}).uniform_(-bound, bound));
}

torch::Tensor MoleLinearImpl::mixed_weights(const torch::Tensor& coefficients) const {
  // [B, X] @ [X, out*in] -> [B, out, in]; one contiguous GEMM.
  return coefficients.matmul(weights_.view({num_experts_, -1})).view({-1, out_, in_});
}

MergedExperts::MergedExperts(const std::vector<MoleLinear>& layers,
                             const torch::Tensor& coefficients_row) {
  torch::NoGradGuard no_grad;
  for (const auto& layer : layers)
    layers_[layer.get()].weight =
        layer->mixed_weights(coefficients_row.view({1, -1}))[0].contiguous();
}

MergedExperts::Merged& MergedExperts::at(const MoleLinearImpl* layer) {
  auto it = layers_.find(layer);
  if (it == layers_.end()) throw Error("internal: a MoLE layer without merged experts");
  return it->second;
}

const torch::Tensor& MergedExperts::weight(const MoleLinearImpl* layer) const {
  return const_cast<MergedExperts*>(this)->at(layer).weight;
}

const torch::Tensor& MergedExperts::transformed(const MoleLinearImpl* layer,
                                                MoleLinearImpl::WeightTransform transform) {
  Merged& m = at(layer);
  if (!m.transformed.defined() || m.transformed_by != transform) {
    torch::NoGradGuard no_grad;
    m.transformed = transform(m.weight).contiguous();
    m.transformed_by = transform;
  }
  return m.transformed;
}

torch::Tensor MoleLinearImpl::forward_transformed(const torch::Tensor& x, const MoleContext& ctx,
                                                  WeightTransform transform) {
  TORCH_CHECK(!bias_.defined(), "forward_transformed: layers with a bias are not supported");
  torch::Tensor w;
  if (num_experts_ == 0) {
    w = transform(weights_);
  } else if (ctx.merged) {
    w = ctx.merged->transformed(this, transform);
  } else {
    return per_system_linear(x, transform(mixed_weights(ctx.coefficients)), torch::Tensor(),
                             ctx.row_offsets);
  }
  return folded_linear(x, w, torch::Tensor());
}

torch::Tensor per_system_linear(const torch::Tensor& x, const torch::Tensor& w,
                                const torch::Tensor& bias,
                                const std::vector<int64_t>& row_offsets) {
  const int64_t systems = w.size(0);
  if (systems == 1) return folded_linear(x, w[0], bias);
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < systems; ++b) lengths.push_back(row_offsets[b + 1] - row_offsets[b]);
  if (std::all_of(lengths.begin(), lengths.end(), [&](int64_t n) { return n == lengths[0]; })) {
    // Equal blocks: one batched GEMM, [B, rows * ..., in] x [B, in, out].
    auto sizes = x.sizes().vec();
    sizes.back() = w.size(1);
    auto y = torch::bmm(x.reshape({systems, -1, x.size(-1)}), w.transpose(1, 2));
    if (bias.defined()) y = y + bias;
    return y.view(sizes);
  }
  // Unequal blocks: one GEMM per block of rows, no padding.
  auto sizes = x.sizes().vec();
  sizes.back() = w.size(1);
  int64_t per_row = 1;  // 2-D rows per row of x
  for (int64_t d = 1; d + 1 < x.dim(); ++d) per_row *= x.size(d);
  auto offsets = row_offsets;
  for (auto& o : offsets) o *= per_row;
  auto y = system_blocks_linear(x.reshape({-1, x.size(-1)}), w, offsets);
  if (bias.defined()) y = y + bias;
  return y.view(sizes);
}

torch::Tensor folded_linear(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias) {
  // One 2-D GEMM whatever the leading dims and strides of x (a strided 3-D
  // input would otherwise become a bmm against a batch-expanded weight).
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return torch::linear(x.reshape({-1, x.size(-1)}), weight, bias).view(sizes);
}

torch::Tensor MoleLinearImpl::forward(const torch::Tensor& x, const MoleContext& ctx) {
  if (num_experts_ == 0) return folded_linear(x, weights_, bias_);
  if (ctx.merged) return folded_linear(x, ctx.merged->weight(this), bias_);
  return per_system_linear(x, mixed_weights(ctx.coefficients), bias_, ctx.row_offsets);
}

}  // namespace uma::edges
