// A step plan: everything an evaluation derives from its layout, built once
// under one key and kept while the key holds.
//
// The key (plan_key) is the step's layout: its systems, their atoms (atomic
// numbers, or the caller's layout id for atoms on the device), charge, spin,
// task and periodicity, and for a piece its owned count and the whole
// system's composition.  Positions and cells are not in it, nor which atoms
// receive messages (host numbers that upload nothing).  The plan owns:
//  - the device integers and normalisers (two uploads when it is built),
//  - the merged expert weights (made at its first step),
//  - what is sized by the neighbour graph's capacities: the edge blocks,
//    the memory plan (stored or recomputed path),
//  - the CUDA-graph captures of its steps (keyed within the plan by what the
//    step computes and the graph's bin plan; see replay_cache.h).
// A new plan takes the previous one's merged weights when their
// composition, charge, spin and task agree, and what the graph sized (each
// step checks it against the graph's capacities), so neither is made again
// needlessly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/atoms.h"
#include "model/backbone.h"
#include "graph/batch.h"
#include "engine/cuda_graph.h"
#include "engine/evaluation.h"
#include "engine/memory_plan.h"
#include "model/model.h"
#include "edges/mole.h"
#include "engine/replay_cache.h"

namespace uma {

// A captured step: its device inputs (copied into on every replay), the
// outputs it leaves, and what its kernels read that a later eager step may
// replace (the graph's bin tables, the edge block lengths).
struct Replay {
  Geometry geo;
  Evaluation ev;
  std::unique_ptr<CudaGraph> graph;
  std::shared_ptr<const void> graph_tables;
  torch::Tensor edge_block_lengths;
};

// What the neighbour graph's edge capacities size: kept from step to step and
// made again only when the capacities or the atom count change.
struct GraphSized {
  std::vector<int64_t> edge_rows;    // [B + 1] host: each system's block of edge slots
  torch::Tensor edge_block_lengths;  // [B] long on the device
  MemoryPlan memory;
  bool planned = false;  // memory holds a plan
};

struct StepPlan {
  std::vector<int64_t> key;
  BatchTensors in;           // device integers of the atoms; a piece's collectives are set per step
  BatchTensors composition;  // what the expert routing sees (a piece: the whole system)
  // [B] energy_scale, energy_shift, force_scale, stress_scale, stress_shift;
  // [N] atom_shift (each atom's share of the energy shift; ghosts: 0).
  torch::Tensor energy_scale, energy_shift, force_scale, stress_scale, stress_shift, atom_shift;
  // Whether they are the identity (Normalisers::kIdentity: training's raw outputs), which
  // the run then skips rather than multiplying by one in the second-order backward.
  bool identity = false;
  // Composition, charge, spin and task, when every system has the same
  // (their experts merge into one set of weights); empty otherwise.
  std::vector<int64_t> merge_key;
  std::shared_ptr<edges::MergedExperts> merged;
  GraphSized sized;  // checked against the graph at every step (Engine::run's stage "plan")
  ReplayCache<Replay> replays;
};

// The key of a step's layout.  `systems` must be valid.
std::vector<int64_t> plan_key(const std::vector<Atoms>& systems, const ModelConfig& config);

// What the plan's normalisers hold: the model's per-task scales and shifts
// (physical outputs: eV, eV/A, eV/A^3), or the identity (scale 1, shift 0:
// the model's raw, normalised outputs, which training's loss compares).
enum class Normalisers { kModel, kIdentity };

// The plan of a valid step, under `key` (plan_key(systems)), on `device`.
// Two counted uploads (integers, normalisers) and, for atoms on the device
// that are a whole system, one counted read (their composition).  Takes
// what `previous` (may be null) shares with it (see above).
std::shared_ptr<StepPlan> build_plan(const UmaModel& model, const std::vector<Atoms>& systems,
                                     std::vector<int64_t> key, const torch::Device& device,
                                     const StepPlan* previous,
                                     Normalisers normalisers = Normalisers::kModel);

}  // namespace uma
