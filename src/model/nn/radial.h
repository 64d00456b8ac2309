// Edge-distance features: Gaussian basis, polynomial envelope, radial MLP.
#pragma once

#include <vector>

#include <torch/torch.h>

namespace uma::nn {

// K Gaussians centred on linspace(0, cutoff, K), width 2 * spacing, no
// prefactor: g_k(d) = exp(coeff * (d - mu_k)^2), coeff = -0.5 / (2 spacing)^2.
// Centres and spacing are computed in the working precision, as fairchem
// builds them in its base dtype.
class GaussianBasis {
 public:
  GaussianBasis(double cutoff, int num_basis);
  torch::Tensor operator()(const torch::Tensor& distance) const;  // [E] -> [E, K]

 private:
  torch::Tensor offsets32_, offsets64_;        // [K] on the host
  mutable torch::Tensor device32_, device64_;  // the same on the device in use
  double coeff32_, coeff64_;
};

// 1 - 21 x^5 + 35 x^6 - 15 x^7 for x = d / cutoff < 1, else 0.
torch::Tensor polynomial_envelope(const torch::Tensor& scaled_distance);

// Linear -> LayerNorm -> SiLU -> ... -> Linear, parameters named net.{0,1,3,4,...}.
class RadialMLPImpl : public torch::nn::Module {
 public:
  explicit RadialMLPImpl(const std::vector<int64_t>& channels);
  torch::Tensor forward(const torch::Tensor& x) { return net->forward(x); }

 private:
  torch::nn::Sequential net{nullptr};
};
TORCH_MODULE(RadialMLP);

}  // namespace uma::nn
