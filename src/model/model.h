// UMA-S: backbone + energy head, loaded from / saved to a model file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/backbone.h"
#include "model/heads.h"
#include "model/model_config.h"

namespace uma {

// Per-dataset output scaling: E = raw * rmsd + mean + sum_atoms ref[Z];
// forces and stress scale with their task's rmsd (and mean).
struct DatasetOutputs {
  double energy_mean = 0, energy_rmsd = 1;
  double forces_mean = 0, forces_rmsd = 1;
  double stress_mean = 0, stress_rmsd = 1;
  torch::Tensor element_references;  // [max_num_elements] float64 or undefined
};

class UmaModelImpl : public torch::nn::Module {
 public:
  explicit UmaModelImpl(const ModelConfig& config);

  // Per-atom raw (normalised) energies [N]; with `node_scalars`, also the
  // energy head's input, the l = 0 node features [N, C].
  torch::Tensor atom_energies(const BatchTensors& in, const EdgeInput& edges,
                              const torch::Tensor& system_emb, const edges::MoleContext& ctx,
                              torch::Tensor* node_scalars = nullptr);

  const ModelConfig& config() const { return config_; }
  Backbone backbone() const { return backbone_; }
  const DatasetOutputs& outputs(const std::string& dataset) const;
  bool has_dataset(const std::string& dataset) const;
  void set_element_references(const std::string& dataset, const torch::Tensor& refs) {
    outputs_[dataset].element_references = refs;
  }

 private:
  ModelConfig config_;
  Backbone backbone_{nullptr};
  EnergyHead head_{nullptr};
  std::map<std::string, DatasetOutputs> outputs_;
};
TORCH_MODULE(UmaModel);

// Reads a model file; throws uma::Error with a clear message for a missing,
// truncated or foreign file, an unknown format version or mismatched tensors.
UmaModel load_model(const std::string& path);

// Writes the model (its current weights) in the model-file format, in the
// precision the weights are held in (float32, or float64 after fp64 training).
void save_model(const UmaModel& model, const std::string& path);

// Overwrites `to`'s weights with `from`'s (same architecture), in `to`'s
// precision and on its device; throws uma::Error where the two differ.
void copy_weights(const UmaModel& from, UmaModel& to);

}  // namespace uma
