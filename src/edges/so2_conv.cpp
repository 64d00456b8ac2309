#include "edges/so2_conv.h"

namespace uma::edges {

SO2mConvImpl::SO2mConvImpl(int64_t m, int64_t in_channels, int64_t out_channels,
                           int64_t num_experts)
    : num_l_(2 - m + 1), out_(out_channels) {
  fc = register_module(
      "fc", MoleLinear(num_experts, num_l_ * in_channels, 2 * num_l_ * out_channels, false));
}

torch::Tensor complex_block(const torch::Tensor& w) {
  // w: [..., 2h, in] = [W_re; W_im] -> [..., 2h, 2in] = [[W_re, -W_im], [W_im, W_re]]
  auto parts = w.chunk(2, -2);
  return torch::cat({torch::cat({parts[0], -parts[1]}, -1), torch::cat({parts[1], parts[0]}, -1)},
                    -2);
}

torch::Tensor SO2mConvImpl::forward(const torch::Tensor& x, const MoleContext& ctx) {
  const int64_t edges = x.size(0);
  auto flat = x.reshape({edges, -1});  // [x_re | x_im]
  return fc->forward_transformed(flat, ctx, complex_block).view({edges, 2 * num_l_, out_});
}

SO2ConvImpl::SO2ConvImpl(int64_t in_channels, int64_t out_channels, int64_t extra_m0_out,
                         const std::vector<int64_t>& radial_channels, int64_t num_experts)
    : in_(in_channels), out_(out_channels), extra_(extra_m0_out) {
  fc_m0 = register_module(
      "fc_m0", MoleLinear(num_experts, 3 * in_channels, 3 * out_channels + extra_m0_out, true));
  so2_m_conv = register_module("so2_m_conv", torch::nn::ModuleList());
  for (int64_t m = 1; m <= 2; ++m) {
    m_convs_.emplace_back(m, in_channels, out_channels, num_experts);
    so2_m_conv->push_back(m_convs_.back());
  }
  if (!radial_channels.empty()) {
    auto channels = radial_channels;
    channels.push_back(3 * in_channels + 2 * in_channels + in_channels);
    rad_func = register_module("rad_func", RadialMLP(channels));
  }
}

torch::Tensor SO2ConvImpl::radial_weights(const RadialInput& radial) {
  return rad_func ? rad_func->forward(radial) : torch::Tensor();
}

std::array<torch::Tensor, 3> SO2ConvImpl::convolve(const torch::Tensor& x0, const torch::Tensor& x1,
                                                   const torch::Tensor& x2,
                                                   const MoleContext& ctx) {
  return {fc_m0->forward(x0, ctx), m_convs_[0]->forward(x1, ctx), m_convs_[1]->forward(x2, ctx)};
}

std::pair<torch::Tensor, torch::Tensor> SO2ConvImpl::forward(const torch::Tensor& x,
                                                             const RadialInput* radial,
                                                             const MoleContext& ctx) {
  const int64_t edges = x.size(0);
  // split (not narrow): its backward is one concatenation, not a zero-filled
  // full-size buffer per slice
  auto by_m = x.split_with_sizes({3, 4, 2}, 1);
  auto x0 = by_m[0].reshape({edges, 3 * in_});
  auto x1 = by_m[1].reshape({edges, 2, 2 * in_});
  auto x2 = by_m[2].reshape({edges, 2, in_});
  if (rad_func) {
    TORCH_CHECK(radial, "SO2Conv: a radially modulated convolution needs the radial input");
    auto w = radial_weights(*radial).split_with_sizes({3 * in_, 2 * in_, in_}, 1);
    x0 = x0 * w[0];
    x1 = x1 * w[1].unsqueeze(1);
    x2 = x2 * w[2].unsqueeze(1);
  }
  auto [y0, y1, y2] = convolve(x0, x1, x2, ctx);
  torch::Tensor gating;
  if (extra_ > 0) {
    auto parts = y0.split_with_sizes({extra_, 3 * out_}, 1);
    gating = parts[0];
    y0 = parts[1];
  }
  auto out = torch::cat({y0.reshape({edges, 3, out_}), y1, y2}, 1);
  return {out, gating};
}

std::vector<MoleLinear> SO2ConvImpl::mole_layers() const {
  return {fc_m0, m_convs_[0]->fc, m_convs_[1]->fc};
}

}  // namespace uma::edges
