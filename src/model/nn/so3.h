// Node-level layers on L-layout features [N, 9, C] (rows l^2 + l + m).
#pragma once

#include <vector>

#include <torch/torch.h>

namespace uma::nn {

// Per-degree linear map: out[n, i, o] = sum_c x[n, i, c] W[l(i), o, c] (+ bias on l = 0).
class SO3LinearImpl : public torch::nn::Module {
 public:
  SO3LinearImpl(int64_t in, int64_t out);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor weight;  // [3, out, in]
  torch::Tensor bias;    // [out]
};
TORCH_MODULE(SO3Linear);

// Equivariant RMS norm with l = 0 centring and degree-balanced mean squares:
// out = xc * s * w[l] (+ bias on l = 0), xc = x with its l = 0 row centred
// over the channels, s = (mean over the channels and the three degrees of
// each degree's mean square over its 2l + 1 rows + 1e-5)^(-1/2).
class RMSNormSHImpl : public torch::nn::Module {
 public:
  explicit RMSNormSHImpl(int64_t channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor affine_weight;              // [3, C]
  torch::Tensor affine_bias;                // [C]
  std::vector<double> row_constants_host_;  // [2 x 9]: row weights, the l = 0 indicator
  torch::Tensor row_constants_;             // the same on the device and precision in use
};
TORCH_MODULE(RMSNormSH);

// Feed-forward: gated SO3 linear -> SO3 linear, gates from the l = 0 row.
class SpectralAtomwiseImpl : public torch::nn::Module {
 public:
  SpectralAtomwiseImpl(int64_t sphere_channels, int64_t hidden_channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Sequential scalar_mlp{nullptr};
  SO3Linear so3_linear_1{nullptr}, so3_linear_2{nullptr};
};
TORCH_MODULE(SpectralAtomwise);

}  // namespace uma::nn
