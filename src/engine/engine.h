// The evaluation engine: a model, its neighbour graph and its step plans.
//
// evaluate() takes a step (a list of Atoms: atom.h) and leaves everything on
// the model's device.  It enters the step plan of the step's layout once
// (step_plan.h: built under one key, kept while the key holds) and runs it
// on the step's positions and cells.  In the steady state (same layout) it
// makes no counted host read and one counted upload: positions and cells,
// packed into one staging buffer.  read() is the one packed read per step:
// the graph's status plus the outputs the step was asked for.
// evaluate_on_host() is the convenience for callers that want everything on
// the host: it repeats the step while the edge capacity overflows.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/atoms.h"
#include "core/task_rules.h"
#include "engine/cuda_graph.h"
#include "engine/evaluation.h"
#include "engine/memory_plan.h"
#include "model/model.h"
#include "graph/radius_graph.h"
#include "engine/staged_backward.h"
#include "runtime/transfers.h"
#include "core/uma_error.h"

namespace uma {

struct Geometry;   // batch.h
struct StepPlan;   // step_plan.h
struct StepState;  // step_state.h

// Periodic cells whose lattice planes lie closer than this (Angstrom) along a
// periodic direction are refused: a 0.5 A spacing already means 25 images per
// direction within a 6 A cutoff.
constexpr double kMinPlaneSpacing = 0.5;

// A precision by the name users give it: "fp32", "fp64", or "tf32" (float32
// with TF32 matrix products on CUDA).  kPrecisions is the one place such
// names are mapped.
struct Precision {
  torch::ScalarType dtype = torch::kFloat32;
  bool tf32 = false;
};
struct PrecisionName {
  const char* name;
  Precision precision;
};
inline constexpr PrecisionName kPrecisions[] = {{"fp32", {torch::kFloat32, false}},
                                                {"fp64", {torch::kFloat64, false}},
                                                {"tf32", {torch::kFloat32, true}}};
// The names, in the table's order; `tf32`: false leaves out the TF32 ones
// (training runs in fp32 or fp64).
std::vector<std::string> precision_names(bool tf32 = true);
// The name of a precision without TF32 ("fp32" or "fp64").
std::string precision_name(torch::ScalarType dtype);
// Throws uma::Error naming the accepted names for any other.
Precision parse_precision(const std::string& name);

struct EngineOptions {
  torch::Device device = torch::kCPU;
  torch::ScalarType dtype = torch::kFloat32;
  // float32 matrix products on TF32 tensor cores (CUDA only; a process-wide
  // LibTorch setting).  Documented deviation: doc/benchmarks.md.
  bool tf32 = false;
  void set_precision(const Precision& p) {
    dtype = p.dtype;
    tf32 = p.tf32;
  }
  bool merge_mole = true;  // merge experts once per composition/charge/spin/task
  // Training (train/trainer.h): the same plan and pipeline, with what
  // training needs instead of what MD needs: the model stays in training
  // mode with the parameters' requires_grad as the caller set it, the experts
  // are never merged (per-expert weights, routing dropout), and the outputs
  // are the model's raw (normalised) ones: the plan's normalisers are the
  // identity (scale 1, shift 0; exact in floating point).
  bool training = false;
  // Ask glibc to keep freed memory for reuse (mallopt: no mmap'd blocks, no
  // trimming).  Large per-step tensors are then recycled instead of being
  // mapped, page-faulted and unmapped every evaluation, which on CPUs halves
  // the step time of big systems.  Process-wide; the environment variable
  // UMA_KEEP_MEMORY=0 turns it off.
  bool keep_host_memory = true;
  // Memory budget of one evaluation in bytes (memory_plan.h).  0: 80% of the
  // memory available on the device when the engine is made, divided by
  // memory_sharers (processes on this node sharing that memory); never more
  // than that share of what is available.
  double memory_budget = 0;
  int memory_sharers = 1;
  // -1: the memory plan picks the stored or the recomputed path; 0: always
  // stored; > 0: always recomputed in chunks of this many edges.
  int64_t recompute_chunk = -1;
  // The blocks' edge work (edges/edge_backend.h, edge_backend_for).
  using EdgeOps = edges::EdgeOps;
  EdgeOps edge_ops = EdgeOps::kLean;
  // Whole-system evaluations (evaluate()) on a CUDA device replay a CUDA
  // graph of the step once its key has held for two steps (replay_cache.h):
  // positions and cells are copied into the graph's inputs, and the results
  // are the graph's outputs, overwritten by the next evaluation.  Needs a
  // CUDA device and a build with the CUDA headers (the constructor refuses
  // otherwise).  A step that cannot be captured runs eager (stats().
  // graph_refusal).  Pieces always run eager: their collectives run between
  // the autograd passes.
  bool cuda_graph = false;
  // Captures kept at once (least recently used dropped first); together
  // they hold at most half the memory budget, the one in use always kept.
  int cuda_graph_cache = 4;
};

// What the engine has done so far, for logs, benchmarks and tests.
struct EngineStats {
  int64_t step_plans = 0;                // plans built (a new layout each)
  int64_t merges = 0;                    // expert merges
  int64_t memory_plans = 0;              // memory plans made (a new atom count or edge capacity)
  MemoryPlan memory_plan;                // the latest
  double memory_budget = 0;              // bytes, of one evaluation
  std::vector<int64_t> edge_capacities;  // per system of the latest step
  const edges::EdgeBackend* edge_backend = nullptr;  // chosen when the engine was made
  // CUDA-graph replay (EngineOptions::cuda_graph): captures made, replays
  // done, captures held now and their device memory in bytes, and why the
  // latest capture failed (empty: none did).
  int64_t graph_captures = 0, graph_replays = 0, graph_held = 0;
  double graph_held_bytes = 0;
  std::string graph_refusal;
  // The latest capture's nodes: the launches of one step run eagerly.
  CudaGraph::Nodes graph_nodes;
};

class Engine {
 public:
  Engine(UmaModel model, EngineOptions options = {});
  ~Engine();

  // One step: several whole systems, or one piece (B = 1 in the results).
  // Validates first (validate) and throws before any collective if the
  // input is bad.
  Evaluation evaluate(const std::vector<Atoms>& step, const Request& what = {});

  // One packed, counted host read: the graph's status and what the step was
  // asked for.  Returns false, after growing the edge capacities, if a
  // system overflowed them: the step must then be repeated (`out` is left
  // alone).  Throws uma::Error on non-finite positions, uma::CloseAtomsError
  // on two atoms closer than kMinAtomDistance.
  // `extra` (optional, any device tensor computed from the evaluation) joins
  // the same read, as HostEvaluation::extra.
  bool read(const Evaluation& ev, HostEvaluation& out, const torch::Tensor& extra = {});

  // Each system's edge count, found under the one capacity policy (the graph
  // grown and built again while it overflows, kCapacityAttempts builds at
  // most): what a training step's graph is then built with
  // (Request::edge_capacities), so that the step reads nothing.  One counted
  // read per build.  Throws as read() does on bad positions.
  std::vector<int64_t> edge_counts(const std::vector<Atoms>& step);

  // Throws uma::Error describing the first problem with the step, host
  // positions of pieces included (NaN or infinite values); it calls no
  // collective, so processes can agree on its outcome before evaluate()
  // enters the model's collectives.
  void validate(const std::vector<Atoms>& step) const;

  const UmaModel& model() const { return model_; }
  const EngineOptions& options() const { return options_; }
  // Lets `copy` overwrite the model's weights (a trainer's); the experts are
  // merged again at the next evaluation.
  void update_weights(const std::function<void(UmaModel&)>& copy);
  EngineStats stats() const;

 private:
  // The plan of this step's layout: the current one if its key holds.
  StepPlan& plan_for(const std::vector<Atoms>& step);
  // A piece's collectives, cut out of the autograd graph (stages_).
  void connect_collectives(BatchTensors& in, const Piece& piece);
  edges::MoleContext mole_context(StepPlan& plan, const torch::Tensor& system_emb,
                                  const std::vector<int64_t>& edge_rows, double routing_dropout);
  // One evaluation, as named stages (engine.cpp): build_graph, size_step,
  // run_backbone, then assemble_outputs (outputs.h).  `layer_targets`: a
  // piece's (see Piece).
  Evaluation run(StepPlan& plan, const Geometry& geo, const Request& what,
                 const std::vector<int64_t>& layer_targets = {});
  StepState build_graph(const Geometry& geo, const Request& what);
  void size_step(StepPlan& plan, StepState& step, const std::vector<int64_t>& layer_targets);
  void run_backbone(StepPlan& plan, StepState& step, const Request& what);
  // run(), or its CUDA graph (EngineOptions::cuda_graph).
  Evaluation run_or_replay(StepPlan& plan, const Geometry& geo, const Request& what);
  // What the plan's captures depend on (replay_cache.h's epoch).
  std::vector<int64_t> replay_epoch(const StepPlan& plan) const;
  // Its key for this step: what it computes and the graph's bin plan.
  std::vector<int64_t> replay_key(const Geometry& geo, const Request& what) const;

  UmaModel model_;
  EngineOptions options_;
  RadiusGraphBuilder graph_;
  std::shared_ptr<StepPlan> plan_;
  StagingBuffer staging_;
  StagedBackward stages_;  // this evaluation's collectives (pieces)
  const edges::EdgeBackend* edge_backend_ = nullptr;
  MemoryModel memory_model_;
  double budget_ = 0;
  EngineStats stats_;  // counters of plans, merges and memory plans; captures of earlier plans
};

// Evaluates `step` and reads what it asks for back, growing the graph's
// capacity and repeating while it overflows (until_capacity_fits).
HostEvaluation evaluate_on_host(Engine& engine, const std::vector<Atoms>& step,
                                const Request& what = Request::all_but_atom_virial());

// Throws uma::Error describing the first problem with whole systems (the
// model-independent checks; Engine::validate adds pieces and device atoms).
void validate_systems(const UmaModel& model, const std::vector<Atoms>& systems);

// The one capacity policy of the neighbour graph, used by the pair styles,
// their agreement over ranks and the trainer: an evaluation whose graph
// overflowed its capacity grows the capacity (to what the build found, with
// headroom) and runs again, at most this many times in all.  A graph that
// still overflows is an error, never a truncated result.
constexpr int kCapacityAttempts = 4;

// The error after kCapacityAttempts overflowing builds.
Error capacity_exhausted();

// Calls `attempt` (one graph build, its evaluation and the read that tells
// whether the graph fitted; false after it grew the capacity) until it
// returns true; throws capacity_exhausted() if it never does.
template <class Attempt>
void until_capacity_fits(Attempt&& attempt) {
  for (int i = 0; i < kCapacityAttempts; ++i)
    if (attempt()) return;
  throw capacity_exhausted();
}

}  // namespace uma
