#include "model/heads.h"

#include <algorithm>

#include "core/uma_error.h"
#include "runtime/transfers.h"

namespace uma {

EnergyBlockImpl::EnergyBlockImpl(int64_t experts, int64_t C, int64_t H) {
  l0 = register_module("0", edges::MoleLinear(experts, C, H, true));
  l2 = register_module("2", edges::MoleLinear(experts, H, H, true));
  l4 = register_module("4", edges::MoleLinear(experts, H, 1, true));
}

torch::Tensor EnergyBlockImpl::forward(const torch::Tensor& x, const edges::MoleContext& ctx) {
  auto h = torch::silu(l0->forward(x, ctx));
  h = torch::silu(l2->forward(h, ctx));
  return l4->forward(h, ctx);
}

EnergyHeadImpl::EnergyHeadImpl(const HeadConfig& config, int64_t C, int64_t H) : config_(config) {
  const int64_t experts =
      config.kind == HeadKind::kDatasetMoE ? static_cast<int64_t>(config.datasets.size()) : 0;
  energy_block = register_module("energy_block", EnergyBlock(experts, C, H));
}

torch::Tensor EnergyHeadImpl::forward(const torch::Tensor& node_embedding,
                                      const std::vector<std::string>& datasets,
                                      const std::vector<int64_t>& atom_offsets) {
  auto scalars = node_embedding.select(1, 0);
  edges::MoleContext ctx;
  if (config_.kind == HeadKind::kDatasetMoE) {
    // The one-hot dataset rows stay on the device while the datasets do.
    if (datasets != onehot_datasets_ || !onehot_.defined() ||
        onehot_.device() != scalars.device() || onehot_.scalar_type() != scalars.scalar_type()) {
      const int64_t B = static_cast<int64_t>(datasets.size());
      const int64_t D = static_cast<int64_t>(config_.datasets.size());
      std::vector<double> onehot(B * D, 0.0);
      for (int64_t b = 0; b < B; ++b) {
        auto it = std::find(config_.datasets.begin(), config_.datasets.end(), datasets[b]);
        if (it == config_.datasets.end())
          throw Error("the energy head has no dataset '" + datasets[b] + "'");
        onehot[b * D + (it - config_.datasets.begin())] = 1.0;
      }
      onehot_ = upload(onehot, scalars.options()).view({B, D});
      onehot_datasets_ = datasets;
    }
    ctx.coefficients = onehot_;
    ctx.row_offsets = atom_offsets;
  }
  return energy_block->forward(scalars, ctx).view({-1});
}

}  // namespace uma
