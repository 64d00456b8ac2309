#include "nn/so2_conv.h"

namespace uma::nn {

SO2mConvImpl::SO2mConvImpl(int64_t m, int64_t in_channels, int64_t out_channels,
                           int64_t num_experts)
    : num_l_(2 - m + 1), out_(out_channels) {
  fc = register_module(
      "fc", MoleLinear(num_experts, num_l_ * in_channels, 2 * num_l_ * out_channels, false));
}

std::pair<torch::Tensor, torch::Tensor> SO2mConvImpl::forward(const torch::Tensor& x,
                                                              const MoleContext& ctx) {
  const int64_t edges = x.size(0);
  const int64_t half = num_l_ * out_;
  // [E, 2, 2*half] -> rows: W_re x_re, W_im x_re, W_re x_im, W_im x_im
  auto y = fc->forward(x, ctx).reshape({edges, 4, half});
  auto re = y.select(1, 0) - y.select(1, 3);
  auto im = y.select(1, 2) + y.select(1, 1);
  return {re.view({edges, num_l_, out_}), im.view({edges, num_l_, out_})};
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

std::pair<torch::Tensor, torch::Tensor> SO2ConvImpl::forward(const torch::Tensor& x,
                                                             const torch::Tensor& x_edge,
                                                             const MoleContext& ctx) {
  const int64_t edges = x.size(0);
  torch::Tensor w0, w1, w2;
  if (rad_func) {
    auto w = rad_func->forward(x_edge);
    w0 = w.narrow(1, 0, 3 * in_);
    w1 = w.narrow(1, 3 * in_, 2 * in_);
    w2 = w.narrow(1, 5 * in_, in_);
  }
  auto x0 = x.narrow(1, 0, 3).reshape({edges, 3 * in_});
  if (w0.defined()) x0 = x0 * w0;
  auto y0 = fc_m0->forward(x0, ctx);
  torch::Tensor gating;
  if (extra_ > 0) {
    gating = y0.narrow(1, 0, extra_);
    y0 = y0.narrow(1, extra_, 3 * out_);
  }
  auto x1 = x.narrow(1, 3, 4).reshape({edges, 2, 2 * in_});
  if (w1.defined()) x1 = x1 * w1.unsqueeze(1);
  auto x2 = x.narrow(1, 7, 2).reshape({edges, 2, in_});
  if (w2.defined()) x2 = x2 * w2.unsqueeze(1);
  auto [re1, im1] = m_convs_[0]->forward(x1, ctx);
  auto [re2, im2] = m_convs_[1]->forward(x2, ctx);
  auto out = torch::cat({y0.reshape({edges, 3, out_}), re1, im1, re2, im2}, 1);
  return {out, gating};
}

std::vector<MoleLinear> SO2ConvImpl::mole_layers() const {
  return {fc_m0, m_convs_[0]->fc, m_convs_[1]->fc};
}

}  // namespace uma::nn
