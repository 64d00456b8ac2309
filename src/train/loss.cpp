#include "train/loss.h"

#include <algorithm>
#include <cmath>

#include "edges/edge_segments.h"
#include "core/uma_error.h"
#include "runtime/transfers.h"

namespace uma::train {
namespace {

bool has_dataset(const LossTask& t, const std::string& dataset) {
  return std::find(t.datasets.begin(), t.datasets.end(), dataset) != t.datasets.end();
}

bool all_finite(const double* v, int n) {
  for (int i = 0; i < n; ++i)
    if (!std::isfinite(v[i])) return false;
  return true;
}

}  // namespace

std::vector<LossTask> loss_tasks(const UmaModel& model, const LossOptions& options) {
  std::vector<LossTask> tasks;
  for (const auto& t : model->config().tasks) {
    LossTask task{t.name, t.property, t.datasets, t.mean, t.rmsd};
    switch (t.property) {
      case Property::kEnergy:
        task.coefficient = options.energy_coefficient;
        if (!t.datasets.empty())
          task.element_references = model->outputs(t.datasets[0]).element_references;
        break;
      case Property::kForces:
        task.coefficient = options.forces_coefficient;
        task.reduction = options.forces_reduction;
        break;
      case Property::kStress:
        task.coefficient = options.stress_coefficient;
        break;
    }
    if (task.coefficient != 0.0) tasks.push_back(task);
  }
  if (tasks.empty()) throw Error("the model file lists no energy, forces or stress task to train");
  return tasks;
}

std::vector<TaskTargets> make_targets(const std::vector<LossTask>& tasks,
                                      const std::vector<const Sample*>& batch,
                                      const torch::TensorOptions& fopts) {
  const int64_t B = static_cast<int64_t>(batch.size());
  int64_t N = 0;
  for (const Sample* s : batch) N += static_cast<int64_t>(s->atoms.numbers.size());
  std::vector<TaskTargets> out;
  for (const auto& task : tasks) {
    TaskTargets tt;
    std::vector<double> target, mask, free_atoms;
    if (task.property == Property::kEnergy) {
      for (const Sample* sp : batch) {
        const Sample& s = *sp;
        double refs = 0;
        if (task.element_references.defined())
          for (int64_t z : s.atoms.numbers)
            refs += task.element_references.data_ptr<double>()[z];  // host data
        const bool ok = has_dataset(task, s.atoms.task) && s.labels.has_energy &&
                        std::isfinite(s.labels.energy);
        target.push_back(ok ? (s.labels.energy - refs - task.mean) / task.rmsd : 0.0);
        mask.push_back(ok);
        tt.count += ok;
        tt.metric_count += ok;
      }
      tt.target = upload(target, fopts.dtype(torch::kFloat64));
      tt.mask = upload(mask, fopts.dtype(torch::kFloat64));
    } else if (task.property == Property::kForces) {
      for (const Sample* sp : batch) {
        const Sample& s = *sp;
        const int64_t n = static_cast<int64_t>(s.atoms.numbers.size());
        const bool ds = has_dataset(task, s.atoms.task) && s.labels.has_forces;
        int64_t valid = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double* f = ds ? &s.labels.forces[3 * i] : nullptr;
          const bool ok = ds && all_finite(f, 3);
          for (int c = 0; c < 3; ++c) target.push_back(ok ? (f[c] - task.mean) / task.rmsd : 0.0);
          mask.push_back(ok);
          valid += ok;
        }
        tt.metric_count += 3 * valid;
        if (task.reduction == Reduction::kPerStructure) {
          free_atoms.push_back(valid > 0 ? valid : n);
          tt.count += valid > 0;
        } else {
          tt.count += valid;
        }
      }
      tt.target = upload(target, fopts).view({N, 3});
      tt.mask = upload(mask, fopts);
      if (task.reduction == Reduction::kPerStructure) tt.free_atoms = upload(free_atoms, fopts);
    } else {  // stress
      for (const Sample* sp : batch) {
        const Sample& s = *sp;
        const bool ds = has_dataset(task, s.atoms.task) && s.labels.has_stress;
        for (int k = 0; k < 9; ++k) {
          const double v = s.labels.stress[k];
          const bool ok = ds && std::isfinite(v);
          target.push_back(ok ? (v - task.mean) / task.rmsd : 0.0);
          mask.push_back(ok);
          tt.count += ok;
          tt.metric_count += ok;
        }
      }
      tt.target = upload(target, fopts).view({B, 9});
      tt.mask = upload(mask, fopts).view({B, 9});
    }
    out.push_back(tt);
  }
  return out;
}

LossTerms compute_losses(const std::vector<LossTask>& tasks, const Predictions& pred,
                         const std::vector<TaskTargets>& targets,
                         const std::vector<int64_t>& global_counts) {
  std::vector<torch::Tensor> losses, errors;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const auto& task = tasks[t];
    const auto& tt = targets[t];
    const double denom = static_cast<double>(std::max<int64_t>(global_counts[t], 1));
    torch::Tensor loss_sum, error_sum;
    if (task.property == Property::kEnergy) {
      auto n = pred.natoms.to(torch::kFloat64);
      auto err = (pred.energy / n - tt.target / n).abs() * tt.mask;  // [B]
      loss_sum = err.sum();
      error_sum = loss_sum * task.rmsd;
    } else if (task.property == Property::kForces) {
      auto diff = pred.forces - tt.target;                                // [N, 3]
      auto per_atom = torch::linalg_vector_norm(diff, 2, {1}) * tt.mask;  // [N]
      if (task.reduction == Reduction::kPerStructure) {
        auto per_structure = edges::sum_into_nodes(per_atom, pred.batch, pred.natoms.size(0));
        loss_sum = (per_structure / tt.free_atoms).sum();
      } else {
        loss_sum = per_atom.sum();
      }
      error_sum = (diff.detach().abs().sum(1) * tt.mask).sum() * task.rmsd;
    } else {
      if (!pred.stress.defined()) throw Error("internal: stress task without stress predictions");
      auto err = (pred.stress - tt.target).abs() * tt.mask;  // [B, 9]
      loss_sum = err.sum();
      error_sum = loss_sum * task.rmsd;
    }
    losses.push_back((loss_sum * (task.coefficient / denom)).to(torch::kFloat64));
    errors.push_back(error_sum.detach().to(torch::kFloat64));
  }
  return {torch::stack(losses), torch::stack(errors)};
}

}  // namespace uma::train
