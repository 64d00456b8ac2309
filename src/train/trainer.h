// One process's side of data-parallel UMA training: the model in training
// mode, its flat parameters, AdamW + EMA, the samples it may draw from, and a
// step that runs the conserving second-order backward without reading
// anything back from the device.
//
// The trainer has no forward pipeline of its own: every evaluation (a step,
// the error metrics, the committee's estimate, a sample's edge count) goes
// through an Engine made for training (EngineOptions::training), so the
// graph, the layout, the capacity policy and the conserving outputs are the
// engine's step plan's, as in MD.
//
// Zero host reads per step: every shape is known on the host before the step
// (each sample's edge count is measured once, when the sample is added, under
// the engine's capacity policy: never a truncated graph), the
// loss denominators come from the labels (host), the optimizer masks a
// non-finite step on the device, and statistics accumulate on the device
// until read_stats().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "engine/engine.h"
#include "model/model.h"
#include "edges/edge_backend.h"
#include "runtime/transfers.h"
#include "train/committee.h"
#include "train/loss.h"
#include "train/optimizer.h"
#include "io/training_data.h"

namespace uma::train {

struct TrainOptions {
  torch::Device device = torch::kCPU;
  torch::ScalarType dtype = torch::kFloat32;  // float64 for gradient checks
  LossOptions loss;
  OptimizerOptions optimizer;
  double routing_dropout = 0.0;  // fairchem moe_dropout (0 for parity runs)
  // The blocks' edge work (edges/edge_backend.h): the lean operators on the CPU,
  // whose second derivatives the step's backward runs through.
  edges::EdgeOps edge_ops = edges::EdgeOps::kLean;
  // > 0: the blocks' edge work runs in chunks of this many edges, recomputed
  // in both backward passes instead of stored (edges/edge_chunks.h): less memory
  // for large batches, 2.4-3.8x the step's time on the CPU (doc/benchmarks.md).
  // 0: stored.
  int64_t recompute_chunk = 0;
  // fairchem freezes the dataset embeddings unless dataset_emb_grad is set.
  bool train_dataset_embeddings = false;
  // Systems of a batch share one edge-block size (one batched MoLE GEMM) when
  // that pads the edges by at most this fraction; otherwise split views.
  double mole_padding = 0.25;
  uint64_t seed = 12345;  // dropout RNG, committee starting weights and resamples, samplers
  // Members of the uncertainty committee (0: none; else >= 2), trained with
  // the main model at every step (see committee.h).
  int64_t committee_members = 0;
  // LibTorch's deterministic algorithms, switched on for the duration of each
  // step() and uncertainty() only.  The step's own sums need no mode (segment
  // sums and one-hot products, edge_segments.h and table_rows.h); the mode
  // guards what LibTorch picks itself on CUDA, until a GPU shows the steps
  // repeat bit for bit without it.
  bool deterministic = true;
  // Data parallelism.  sum_host: element-wise in-place sum of host numbers
  // over processes (valid-sample counts, statistics); sum_gradients: in-place
  // sum of a device tensor over processes.  Unset: this process trains alone.
  std::function<void(std::vector<double>&)> sum_host;
  std::function<void(torch::Tensor&)> sum_gradients;
  // Where the processes meet before each collective of a step: called with
  // this process's failure (empty: none), returns on every process the
  // failure of the lowest-numbered process that failed (empty: none did).
  std::function<std::string(const std::string&)> first_failure;
};

// Averages since the last read_stats(), over all processes.
struct TrainStats {
  int64_t steps = 0;
  int64_t skipped = 0;              // total steps not applied (non-finite loss or gradient)
  double loss = 0;                  // mean total loss per step
  double energy_mae = 0;            // eV/atom  (NaN when no energy label was seen)
  double forces_mae = 0;            // eV/A per component
  double stress_mae = 0;            // eV/A^3 per component
  double grad_norm = 0;             // of the last step
  double lr = 0;                    // of the last step taken
  std::vector<double> task_losses;  // per task, mean per step
  double committee_loss = 0;        // mean per step (NaN without a committee)
};

// The committee's estimate on one frame: the spread of its members' per-atom
// energies, in eV.
struct Uncertainty {
  std::vector<double> per_atom;  // [N] eV
  double max = 0, mean = 0;      // over the atoms
};

class Trainer {
 public:
  Trainer(UmaModel model, TrainOptions options);

  // Checks the sample against the model, measures its edge count
  // (Engine::edge_counts: one counted host read per graph build; never during
  // a step) and keeps it.  Returns its index.
  int64_t add_sample(const Sample& sample);
  int64_t num_samples() const { return static_cast<int64_t>(samples_.size()); }
  const Sample& sample(int64_t i) const { return samples_[i]; }

  // One optimizer step on this process's share of the global batch.
  void step(const std::vector<int64_t>& indices);

  // The flat gradient of the latest step() (the trainable parameters in
  // parameters() order) as the optimizer used it: summed over processes and
  // clipped (zero after a rejected step).
  const torch::Tensor& gradient() const { return flat_->grads(); }
  // Energy (eV/atom), force and stress (per component) MAEs on these samples
  // with the raw or averaged weights, this process only (counted host reads).
  struct Errors {
    double energy = 0, forces = 0, stress = 0;
  };
  Errors errors(const std::vector<int64_t>& indices, bool average);

  // The committee's uncertainty on a frame with the raw weights (one counted
  // host read; two when the frame's edges outgrow the graph's capacity).
  // Throws without a committee.
  Uncertainty uncertainty(const Sample& sample);
  bool has_committee() const { return !committee_.is_empty(); }

  // Reads the device statistics (counted host reads) and sums them over processes.
  TrainStats read_stats();

  // Copies the raw or averaged weights into another model of the same shape.
  void copy_weights(UmaModel& dst, bool average) const;
  // Writes the raw or averaged weights in the model-file format.
  void save_model(const std::string& path, bool average);
  // Optimizer state (moments, average, counters) for restarts.
  void save_state(const std::string& path) const;
  void load_state(const std::string& path);

  const UmaModel& model() const { return model_; }
  const std::vector<LossTask>& tasks() const { return tasks_; }
  // The blocks' edge operators of every step (chosen from TrainOptions::edge_ops).
  const edges::EdgeBackend& edge_backend() const { return *engine_->stats().edge_backend; }
  int64_t steps() const { return optimizer_->steps_taken(); }
  // Whether LibTorch's deterministic algorithms were on during the latest step().
  bool step_was_deterministic() const { return step_deterministic_; }
  // Hash of the raw weights' bytes (one counted read): equal on every process
  // that holds the same weights.
  uint64_t weights_hash() const;

 private:
  // Runs fn with the averaged weights in place (when `average` and there is
  // an average), then puts the raw ones back.
  void with_weights(bool average, const std::function<void()>& fn);
  // The engine's differentiable evaluation of a batch with the measured
  // edge capacities; a graph that overflowed them anyway is counted on the
  // device (overflows_) and refused at the next read.
  Predictions predict(const std::vector<const Sample*>& batch,
                      const std::vector<int64_t>& capacities, bool create_graph);
  // Throws if any evaluation's graph overflowed its measured capacities.
  void check_overflows(double count) const;
  // A batch ready to evaluate: its samples, edge capacities and targets, and
  // counts (per task the loss denominators, then the metric denominators),
  // which step() sums over processes before evaluate() uses them.
  struct Batch {
    std::vector<const Sample*> samples;
    std::vector<int64_t> capacities;
    std::vector<TaskTargets> targets;
    std::vector<double> counts;  // then, with a committee, each member's bootstrap total [K]
    std::vector<double> committee_weights;  // [K, B] bootstrap counts (host)
  };
  Batch prepare(const std::vector<int64_t>& indices);
  // The committee's loss on a predicted batch (features from predict) [].
  torch::Tensor committee_step_loss(const Predictions& pred, const Batch& batch);
  // Loss terms (gradient left in the flat buffer when `backward`; with a
  // committee also its loss and gradient).
  LossTerms evaluate(const Batch& batch, bool backward);
  // Throws uma::Error on every process if any process's step failed.
  void agree(const std::string& failure) const;

  UmaModel model_;
  TrainOptions options_;
  std::unique_ptr<Engine> engine_;  // training mode: raw outputs, per-expert weights
  std::vector<LossTask> tasks_;
  std::vector<Sample> samples_;
  std::vector<int64_t> edges_;   // per sample
  std::vector<bool> trainable_;  // per model parameter, in parameters() order
  std::unique_ptr<FlatParameters> flat_;
  std::unique_ptr<AdamW> optimizer_;
  Committee committee_{nullptr};
  std::unique_ptr<FlatParameters> committee_flat_;
  std::unique_ptr<AdamW> committee_optimizer_;
  torch::Tensor committee_loss_,
      committee_loss_sum_;  // [] the latest step's, and since the last read
  // Device accumulators since the last read.
  torch::Tensor loss_sum_, task_loss_sums_, error_sums_;
  torch::Tensor overflows_;  // [] double: systems whose graph overflowed (never expected)
  std::vector<double> error_counts_;  // host: per task, metric denominators
  int64_t stat_steps_ = 0;
  bool step_deterministic_ = false;
  bool fail_step_ =
      false;  // UMA_TEST_FAIL_TRAINING_STEP=1: every step fails (tests of the agreement)
};

}  // namespace uma::train
