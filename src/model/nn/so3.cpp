#include "model/nn/so3.h"

#include "edges/gate_activation.h"
#include "edges/mole.h"
#include "runtime/transfers.h"

namespace uma::nn {

SO3LinearImpl::SO3LinearImpl(int64_t in, int64_t out) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight = register_parameter("weight", torch::empty({3, out, in}).uniform_(-bound, bound));
  bias = register_parameter("bias", torch::zeros({out}));
}

torch::Tensor SO3LinearImpl::forward(const torch::Tensor& x) {
  auto by_l = x.split_with_sizes({1, 3, 5}, 1);
  auto w = weight.unbind(0);
  return torch::cat({edges::folded_linear(by_l[0], w[0], bias),
                     edges::folded_linear(by_l[1], w[1], torch::Tensor()),
                     edges::folded_linear(by_l[2], w[2], torch::Tensor())},
                    1);
}

RMSNormSHImpl::RMSNormSHImpl(int64_t channels) {
  affine_weight = register_parameter("affine_weight", torch::ones({3, channels}));
  affine_bias = register_parameter("affine_bias", torch::zeros({channels}));
  // Per row: its share of the mean square, 1 / (3 (2l + 1) C); whether it is l = 0.
  const double c = static_cast<double>(channels);
  const double w[3] = {1 / (3 * c), 1 / (9 * c), 1 / (15 * c)};
  row_constants_host_ = {w[0], w[1], w[1], w[1], w[2], w[2], w[2], w[2], w[2],
                         1.0,  0.0,  0.0,  0.0,  0.0,  0.0,  0.0,  0.0,  0.0};
}

torch::Tensor RMSNormSHImpl::forward(const torch::Tensor& x) {
  // x: [N, 9, C].  The l = 0 row centred over the channels, then all nine
  // rows as one tensor: 12 operators (kernels on a GPU) where the per-degree
  // form took 22, and about half as many in the backward.
  auto& rows = row_constants_;
  if (!rows.defined() || rows.device() != x.device() || rows.scalar_type() != x.scalar_type())
    rows = upload(row_constants_host_, x.options()).view({2, 9});  // once per device and precision
  const auto row_weights = rows[0].view({1, 9, 1}), row_zero = rows[1].view({1, 9, 1});
  auto xc = x - row_zero * x.narrow(1, 0, 1).mean(2, true);
  auto scale = ((xc * xc * row_weights).sum({1, 2}, true) + 1e-5).rsqrt();  // [N, 1, 1]
  const int64_t C = affine_weight.size(1);
  auto w = torch::cat({affine_weight.narrow(0, 0, 1), affine_weight.narrow(0, 1, 1).expand({3, C}),
                       affine_weight.narrow(0, 2, 1).expand({5, C})});  // [9, C]
  return torch::addcmul(row_zero * affine_bias, xc, scale * w);
}

SpectralAtomwiseImpl::SpectralAtomwiseImpl(int64_t sphere_channels, int64_t hidden_channels) {
  scalar_mlp = register_module(
      "scalar_mlp", torch::nn::Sequential(torch::nn::Linear(sphere_channels, 2 * hidden_channels),
                                          torch::nn::SiLU()));
  so3_linear_1 = register_module("so3_linear_1", SO3Linear(sphere_channels, hidden_channels));
  so3_linear_2 = register_module("so3_linear_2", SO3Linear(hidden_channels, sphere_channels));
}

torch::Tensor SpectralAtomwiseImpl::forward(const torch::Tensor& x) {
  auto gates = scalar_mlp->forward(x.select(1, 0));
  auto h = so3_linear_1->forward(x);
  h = edges::gate_activation(gates, h, edges::Layout::kL);
  return so3_linear_2->forward(h);
}

}  // namespace uma::nn
