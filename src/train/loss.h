// fairchem's multi-task loss (DDPMTLoss over the model's tasks):
//   energy  PerAtomMAE  |E_pred/N - E_target/N|          reduction mean
//   forces  L2 norm     |F_pred,i - F_target,i|_2 per atom  reduction mean or per_structure
//   stress  MAE         |S_pred,ij - S_target,ij|        reduction mean
// Predictions are the model's raw (normalised) outputs; targets are
// normalised on the host, (y - element references - mean) / rmsd.  A task
// only sees samples of its datasets whose label is present and finite (the
// mask).  Each loss is divided by its valid-sample count summed over all
// processes, so summing gradients over processes gives the global mean; the
// counts come from the labels, which the host holds, so computing a loss
// reads nothing back from the device.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/model.h"
#include "io/training_data.h"

namespace uma::train {

enum class Reduction { kMean, kPerStructure };

struct LossOptions {
  // Coefficients by property (fairchem's release conservative fine-tune).
  double energy_coefficient = 20.0;
  double forces_coefficient = 2.0;
  double stress_coefficient = 1.0;
  Reduction forces_reduction = Reduction::kMean;
};

// One term of the loss: a task of the model file.
struct LossTask {
  std::string name;  // e.g. omat_forces
  Property property = Property::kEnergy;
  std::vector<std::string> datasets;
  double mean = 0.0, rmsd = 1.0;
  double coefficient = 1.0;
  Reduction reduction = Reduction::kMean;
  torch::Tensor element_references;  // energy: [max_num_elements] float64, or undefined
};

std::vector<LossTask> loss_tasks(const UmaModel& model, const LossOptions& options);

// One task's targets for one batch, on the device.
struct TaskTargets {
  torch::Tensor target;  // energy [B] f64, forces [N, 3], stress [B, 9]; normalised, 0 where masked
  torch::Tensor mask;    // [B], [N] or [B, 9]; 1 valid, 0 not (prediction dtype)
  torch::Tensor
      free_atoms;     // per_structure only: [B] valid atoms per structure (natoms where none)
  int64_t count = 0;  // valid samples here (loss denominator: atoms, structures or stress elements)
  int64_t metric_count = 0;  // MAE denominator: structures, force components or stress elements
};

// Host labels -> device targets for every task.
std::vector<TaskTargets> make_targets(const std::vector<LossTask>& tasks,
                                      const std::vector<const Sample*>& batch,
                                      const torch::TensorOptions& float_options);

// Raw model outputs for a batch.
struct Predictions {
  torch::Tensor energy;    // [B] float64
  torch::Tensor forces;    // [N, 3]
  torch::Tensor stress;    // [B, 9] or undefined
  torch::Tensor natoms;    // [B] long
  torch::Tensor batch;     // [N] long
  torch::Tensor features;  // [N, C] l = 0 node features, detached (for a committee), or undefined
  torch::Tensor
      atom_energies;  // [N] raw per-atom energies, detached (the committee's target), or undefined
};

// Per-task losses [T] (float64, each times its coefficient) and absolute-error
// sums for metrics [T] (in eV, eV/A, eV/A^3: energy per atom, force and
// stress components).  `global_counts[t]` is task t's valid count summed over
// all processes.
struct LossTerms {
  torch::Tensor losses;
  torch::Tensor error_sums;
};
LossTerms compute_losses(const std::vector<LossTask>& tasks, const Predictions& pred,
                         const std::vector<TaskTargets>& targets,
                         const std::vector<int64_t>& global_counts);

}  // namespace uma::train
