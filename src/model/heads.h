// Energy head: a 3-layer MLP on the l = 0 node features, either one MLP for
// all datasets or one per dataset (a one-hot mixture of experts, shared bias).
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/model_config.h"
#include "edges/mole.h"

namespace uma {

class EnergyBlockImpl : public torch::nn::Module {
 public:
  EnergyBlockImpl(int64_t num_experts, int64_t sphere_channels, int64_t hidden_channels);
  torch::Tensor forward(const torch::Tensor& x, const edges::MoleContext& ctx);

 private:
  edges::MoleLinear l0{nullptr}, l2{nullptr}, l4{nullptr};
};
TORCH_MODULE(EnergyBlock);

class EnergyHeadImpl : public torch::nn::Module {
 public:
  EnergyHeadImpl(const HeadConfig& config, int64_t sphere_channels, int64_t hidden_channels);

  // node_embedding [N, 9, C] -> per-atom raw energies [N].
  torch::Tensor forward(const torch::Tensor& node_embedding,
                        const std::vector<std::string>& datasets,
                        const std::vector<int64_t>& atom_offsets);

 private:
  HeadConfig config_;
  EnergyBlock energy_block{nullptr};
  std::vector<std::string> onehot_datasets_;  // what onehot_ was built for
  torch::Tensor onehot_;                      // [B, D] dataset one-hot on the model's device
};
TORCH_MODULE(EnergyHead);

}  // namespace uma
