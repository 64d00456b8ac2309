// The eSCN-MD backbone with Mixture of Linear Experts (UMA-S).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/model_config.h"
#include "model/nn/block.h"
#include "edges/mole.h"
#include "edges/radial.h"
#include "model/nn/so3.h"

namespace uma {

// A batch of systems on the model's device.
struct BatchTensors {
  torch::Tensor numbers;              // [N] long, atomic numbers
  torch::Tensor batch;                // [N] long, system of each atom
  torch::Tensor natoms;               // [B] long
  torch::Tensor charge;               // [B] long
  torch::Tensor spin;                 // [B] long
  std::vector<std::string> datasets;  // [B] dataset (task) names
  std::vector<int64_t> atom_offsets;  // [B + 1] host
  // Spatial decomposition (one process's share of one system): nodes
  // [0, owned) are owned, the rest are ghosts; natoms counts the whole system
  // and `reduce` sums a tensor over all processes, differentiably.
  int64_t owned = -1;  // -1: every node is owned
  std::function<torch::Tensor(const torch::Tensor&)> reduce;
  // Halo exchange: returns node features [N, 9, C] whose ghost rows hold
  // their owners' rows (differentiably).  Called after the edge-degree
  // embedding and after every block but the last.  Unset: no exchange.
  std::function<torch::Tensor(const torch::Tensor&)> exchange;
  // Set with reduce or exchange: returns tensors that every block reads (the
  // edge frame) as new leaves of the graph, whose gradients the caller hands
  // on (staged_backward.h).
  std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)> share;
};

// Edge list in the form the backbone consumes.
struct EdgeInput {
  torch::Tensor src, tgt, valid, edge_system;  // see RadiusGraph
  torch::Tensor vec;  // [E, 3] r_src - r_tgt (+ image shift); grads flow to the caller
  std::vector<int64_t> row_offsets;  // [B + 1] host
  // Block i uses only the first layer_edges[i] edges (those into the nodes
  // whose features still matter after it; edges are ordered by target).
  // Empty: every block uses every edge.
  std::vector<int64_t> layer_edges;
  // > 0: every block's edge work (and the edge frame) runs in chunks of this
  // many edges and is recomputed in the backward pass instead of stored
  // (edges/edge_chunks.h); first and second derivatives.  0: stored, one pass.
  int64_t recompute_chunk = 0;
  // How the blocks' edge work is computed (edges/edge_backend.h).
  const edges::EdgeBackend* backend = &edges::reference_edges();
};

// Holder for nested parameter names such as charge_embedding.rand_emb.
class NamedModuleImpl : public torch::nn::Module {
 public:
  template <typename M>
  M add(const std::string& name, M module) {
    return register_module(name, module);
  }
};
TORCH_MODULE(NamedModule);

class BackboneImpl : public torch::nn::Module {
 public:
  explicit BackboneImpl(const BackboneConfig& config);

  // [B, C] charge/spin/dataset system embedding.
  torch::Tensor system_embedding(const BatchTensors& in);
  // [B, X] expert mixing coefficients (softmax + 0.005); training may drop
  // routing logits out with probability routing_dropout (fairchem's moe_dropout).
  torch::Tensor expert_coefficients(const BatchTensors& in, const torch::Tensor& system_emb,
                                    double routing_dropout = 0.0);

  // Node embeddings [N, 9, C] after the final norm.
  torch::Tensor forward(const BatchTensors& in, const EdgeInput& edges,
                        const torch::Tensor& system_emb, const edges::MoleContext& ctx);

  std::vector<edges::MoleLinear> mole_layers() const;
  const BackboneConfig& config() const { return config_; }

 private:
  torch::Tensor balance_channels(const torch::Tensor& x, const BatchTensors& in);
  // block->after_edges(x, summed), for the owned rows only under a halo exchange.
  torch::Tensor after_edges(nn::Block& block, const torch::Tensor& x, const torch::Tensor& summed,
                            const BatchTensors& in) const;
  // x after in.exchange, when a later block reads it (`done` blocks have run).
  torch::Tensor exchanged(const torch::Tensor& x, const BatchTensors& in, size_t done) const;
  // Per-edge block inputs of edges [begin, begin + vec.size(0)); vec holds
  // their edge vectors.
  edges::EdgeFrame edge_frame(const BatchTensors& in, const EdgeInput& e, const torch::Tensor& vec,
                              int64_t begin);
  // [N, 9, C] edge-degree embedding of the frame's edges, summed into targets.
  torch::Tensor edge_degree(const edges::EdgeFrame& frame, int64_t nodes);

  BackboneConfig config_;
  edges::GaussianBasis gaussian_;
  torch::nn::Embedding sphere_embedding{nullptr}, source_embedding{nullptr},
      target_embedding{nullptr}, composition_embedding{nullptr};
  torch::nn::Embedding charge_table{nullptr}, spin_table{nullptr};
  torch::nn::ModuleDict dataset_emb_dict{nullptr};
  torch::nn::Linear mix_csd{nullptr};
  edges::RadialMLP edge_degree_rad{nullptr};
  std::vector<nn::Block> blocks_;
  nn::RMSNormSH norm{nullptr};
  torch::nn::Sequential routing_mlp{nullptr};
};
TORCH_MODULE(Backbone);

}  // namespace uma
