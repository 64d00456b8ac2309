// SO(2) convolution in the edge frame (M-layout, lmax = mmax = 2).
//
// Input rows (M-layout): [l0m0, l1m0, l2m0 | l1+1, l2+1 | l1-1, l2-1 | l2+2 | l2-2].
// m = 0 is a real linear map; m = 1, 2 act as complex-linear maps
// (W_re + i W_im) on the (+m, -m) pairs.
#pragma once

#include <array>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "edges/mole.h"
#include "edges/radial.h"

namespace uma::edges {

// One m > 0 block: parameter "fc" = [W_re; W_im] with 2 * num_l * out rows.
// It maps (x_re, x_im) to (W_re x_re - W_im x_im, W_im x_re + W_re x_im) as one
// GEMM with the real block matrix [[W_re, -W_im], [W_im, W_re]].
class SO2mConvImpl : public torch::nn::Module {
 public:
  SO2mConvImpl(int64_t m, int64_t in_channels, int64_t out_channels, int64_t num_experts);
  // x: [E, 2, num_l * in] (row 0 = +m, row 1 = -m) -> [E, 2 * num_l, out]
  // (rows: +m of each l, then -m of each l, as in the M-layout)
  torch::Tensor forward(const torch::Tensor& x, const MoleContext& ctx);
  MoleLinear fc{nullptr};

 private:
  int64_t num_l_, out_;
};
TORCH_MODULE(SO2mConv);

class SO2ConvImpl : public torch::nn::Module {
 public:
  // radial_channels empty: internal weights (no radial modulation).
  SO2ConvImpl(int64_t in_channels, int64_t out_channels, int64_t extra_m0_out,
              const std::vector<int64_t>& radial_channels, int64_t num_experts);

  // x: [E, 9, in] M-layout, radial: the radial MLP's input (null without
  // radial modulation).  Returns ([E, 9, out], gating [E, extra_m0_out] or undefined).
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const RadialInput* radial,
                                                  const MoleContext& ctx);

  // The same in steps, for the lean pipeline (edges/lean_edges.h), which applies
  // the radial weights itself and keeps the m-pieces apart:
  // radial_weights: [E, 6 * in], rows (l0m0, l1m0, l2m0, l1 m=+-1, l2 m=+-1,
  // l2 m=+-2) of `in` channels, or undefined without radial modulation.
  torch::Tensor radial_weights(const RadialInput& radial);
  // x0: [E, 3 * in], x1: [E, 2, 2 * in] (+m row, -m row), x2: [E, 2, in] ->
  // (y0 [E, extra + 3 * out] with the gating first, y1 [E, 4, out], y2 [E, 2, out]).
  std::array<torch::Tensor, 3> convolve(const torch::Tensor& x0, const torch::Tensor& x1,
                                        const torch::Tensor& x2, const MoleContext& ctx);

  std::vector<MoleLinear> mole_layers() const;

 private:
  int64_t in_, out_, extra_;
  MoleLinear fc_m0{nullptr};
  torch::nn::ModuleList so2_m_conv{nullptr};
  std::vector<SO2mConv> m_convs_;
  RadialMLP rad_func{nullptr};
};
TORCH_MODULE(SO2Conv);

}  // namespace uma::edges
