// Mixture of Linear Experts: a linear layer whose weight is a per-system
// mixture of expert weights, W_b = sum_e coeff[b, e] * W_e.
#pragma once

#include <map>
#include <vector>

#include <torch/torch.h>

namespace uma::edges {

class MoleLinearImpl;
class MergedExperts;

// How the rows of a MoLE input map to systems.
struct MoleContext {
  torch::Tensor coefficients;        // [B, X]
  std::vector<int64_t> row_offsets;  // B + 1 host offsets of each system's rows
  MergedExperts* merged = nullptr;   // set: every system has these merged weights
};

// y = x W^T + b as one 2-D GEMM over all leading dimensions of x.
torch::Tensor folded_linear(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias);

// Rows [row_offsets[b], row_offsets[b+1]) of x times w[b]^T (+ bias): one
// batched GEMM when the blocks are equal, else one GEMM per block of rows
// (edges/system_blocks.h).
torch::Tensor per_system_linear(const torch::Tensor& x, const torch::Tensor& w,
                                const torch::Tensor& bias, const std::vector<int64_t>& row_offsets);

class MoleLinearImpl : public torch::nn::Module {
 public:
  // num_experts == 0 gives a plain linear layer (parameter "weight").
  MoleLinearImpl(int64_t num_experts, int64_t in, int64_t out, bool bias);

  // x: [rows, ..., in] -> [rows, ..., out]
  torch::Tensor forward(const torch::Tensor& x, const MoleContext& ctx);

  // The same with the (mixed or merged) weight passed through `transform`
  // first, e.g. to build a block matrix; merged weights are transformed once.
  using WeightTransform = torch::Tensor (*)(const torch::Tensor&);
  torch::Tensor forward_transformed(const torch::Tensor& x, const MoleContext& ctx,
                                    WeightTransform transform);

  // Mixed weights for every system: [B, out, in].
  torch::Tensor mixed_weights(const torch::Tensor& coefficients) const;

  int64_t num_experts() const { return num_experts_; }

 private:
  int64_t num_experts_, in_, out_;
  torch::Tensor weights_;  // [X, out, in] or [out, in] when X == 0
  torch::Tensor bias_;     // [out] or undefined
};
TORCH_MODULE(MoleLinear);

// The experts of every MoLE layer merged for one composition, charge, spin
// and task (W = sum_e coeff[e] W_e, no autograd), owned by whoever keys them
// (the engine's step plan), never by the layers.
class MergedExperts {
 public:
  // coefficients_row: [X], the routing of the one system.
  MergedExperts(const std::vector<MoleLinear>& layers, const torch::Tensor& coefficients_row);
  // [out, in]
  const torch::Tensor& weight(const MoleLinearImpl* layer) const;
  // transform(weight), made at the first call and kept.
  const torch::Tensor& transformed(const MoleLinearImpl* layer,
                                   MoleLinearImpl::WeightTransform transform);

 private:
  struct Merged {
    torch::Tensor weight, transformed;
    MoleLinearImpl::WeightTransform transformed_by = nullptr;
  };
  Merged& at(const MoleLinearImpl* layer);
  std::map<const MoleLinearImpl*, Merged> layers_;
};

}  // namespace uma::edges
