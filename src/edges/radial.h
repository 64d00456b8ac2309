// Edge-distance features: Gaussian basis, polynomial envelope, radial MLP.
#pragma once

#include <vector>

#include <torch/torch.h>

namespace uma::edges {

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

// silu(layer_norm(x, weight, bias)) over the last dimension, keeping for
// the backward only x (the composition keeps the normalised rows too, for
// SiLU's backward): they are recomputed there.  The same values and first
// derivatives, bit for bit, as the composition; differentiable twice
// (training's forces).
torch::Tensor layer_norm_silu(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& bias, double eps);

// The radial MLPs' input, cat(basis, source_table[source_elements],
// target_table[target_elements]) ([E, K + 2 Ec]), kept in its parts: the
// two embeddings depend on the edge's elements alone.
struct RadialInput {
  torch::Tensor basis;                             // [E, K] Gaussians of the distance
  torch::Tensor source_elements, target_elements;  // [E] int64 atomic numbers
  torch::Tensor source_table, target_table;        // [Z, Ec] the element embeddings

  // Edges [0, n).
  RadialInput first(int64_t n) const;
};

// Linear -> LayerNorm -> SiLU -> ... -> Linear, parameters named net.{0,1,3,4,...};
// with frozen weights each LayerNorm -> SiLU as layer_norm_silu.
// The first layer's columns for the two embeddings are applied to their
// tables ([Z, Ec] -> [Z, out], once per call) and the rows gathered per edge,
// so that the per-edge product is over the K basis columns only (K = 64 of
// 320 at UMA-S's widths), forward and backward.
class RadialMLPImpl : public torch::nn::Module {
 public:
  explicit RadialMLPImpl(const std::vector<int64_t>& channels);
  torch::Tensor forward(const RadialInput& in);  // -> [E, channels.back()]

 private:
  torch::nn::Sequential net{nullptr};
};
TORCH_MODULE(RadialMLP);

}  // namespace uma::edges
