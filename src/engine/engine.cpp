#include "engine/engine.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "edges/edge_segments.h"
#include "graph/batch.h"
#include "runtime/device.h"
#include "engine/outputs.h"
#include "engine/packed_read.h"
#include "engine/step_plan.h"
#include "engine/step_state.h"
#include "runtime/transfers.h"
#include "core/choices.h"
#include "core/uma_error.h"

namespace uma {
namespace {

// One system's padding slots are the end of its block.  A backend on the CPU
// (EdgeBackend::skips_padding) runs over the edges found only (the count is
// host memory there), as layer pruning runs over a prefix.  An overflowed
// build keeps every slot: its result is discarded.
void skip_padding_slots(const RadiusGraph& graph, int64_t blocks, EdgeInput& edges) {
  const int64_t slots = graph.src.size(0);
  const int64_t found =
      std::max<int64_t>(1, std::min(slots, graph.counts.data_ptr<int64_t>()[0]));  // host data
  if (found == slots) return;
  if (edges.layer_edges.empty()) edges.layer_edges.assign(static_cast<size_t>(blocks), found);
  for (auto& n : edges.layer_edges) n = std::min(n, found);
}

// The graph's status in a read: [B] edges found, the close-atoms record
// [flag, i, j, distance] and the non-finite flag.
void add_graph_status(PackedRead& packed, const torch::Tensor& edge_counts,
                      const torch::Tensor& close_atoms, const torch::Tensor& nonfinite) {
  packed.add("edge_counts", edge_counts);
  packed.add("close_atoms", close_atoms);
  packed.add("nonfinite", nonfinite);
}

// The one check of that status (read and edge_counts): throws on non-finite
// positions and on two atoms closer than kMinAtomDistance; false, after
// growing the builder's capacities, where a system overflowed its own.
// `counts`: the edges found per system.
bool graph_status_ok(const PackedRead& packed, const std::vector<int64_t>& capacities,
                     const torch::Tensor& sizes, RadiusGraphBuilder& builder,
                     std::vector<int64_t>& counts) {
  const auto found = packed.vector("edge_counts");
  counts.assign(found.begin(), found.end());
  if (packed.scalar("nonfinite") > 0) throw Error("positions contain NaN or infinite values");
  bool overflow = false;
  for (size_t b = 0; b < counts.size(); ++b) overflow |= counts[b] > capacities[b];
  if (overflow) {
    builder.grow(counts, sizes);
    return false;
  }
  const auto close = packed.vector("close_atoms");
  if (close[0] > 0)
    throw CloseAtomsError(static_cast<int64_t>(close[1]), static_cast<int64_t>(close[2]), close[3],
                          kMinAtomDistance);
  return true;
}

}  // namespace

Engine::Engine(UmaModel model, EngineOptions options)
    : model_(std::move(model)),
      options_(options),
      graph_(model_->config().backbone.cutoff, model_->config().backbone.max_neighbors) {
  const char* keep = std::getenv("UMA_KEEP_MEMORY");
  if (options_.keep_host_memory && !(keep && std::string(keep) == "0")) {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  }
  if (options_.tf32) {
    if (!options_.device.is_cuda() || options_.dtype != torch::kFloat32)
      throw Error(
          "precision tf32 needs a CUDA device (TF32 is a GPU tensor-core format of float32)");
    at::globalContext().setAllowTF32CuBLAS(true);
    at::globalContext().setAllowTF32CuDNN(true);
  }
  if (options_.cuda_graph && !options_.device.is_cuda())
    throw Error("CUDA-graph replay needs a CUDA device; the model runs on " +
                options_.device.str());
  if (options_.cuda_graph && !cuda_graphs_built())
    throw Error(
        "CUDA-graph replay is not in this build of the engine (compiled without the CUDA headers)");
  configure_cublas_workspace(options_.device);  // before any GEMM: a later fix uma/train needs it
  make_current(options_.device);                // before anything is allocated there
  model_->to(options_.device, options_.dtype);  // bulk transfer
  if (options_.training) {
    if (options_.cuda_graph) throw Error("internal: CUDA-graph replay of training evaluations");
    options_.merge_mole = false;  // per-expert weights: their gradients are trained
    model_->train();
  } else {
    model_->eval();
    for (auto& p : model_->parameters()) p.requires_grad_(false);
  }
  edge_backend_ = &edges::edge_backend_for(options_.edge_ops, options_.device);
  memory_model_ =
      memory_model(model_->config().backbone, options_.dtype, *edge_backend_, options_.training);
  if (options_.memory_budget < 0) throw Error("the memory budget must be positive");
  budget_ = evaluation_budget(
      options_.memory_budget, [&] { return available_memory(options_.device); },
      options_.memory_sharers);
  // The graph is built before the model runs, and its temporaries are freed
  // before the model allocates: a quarter of the budget for them keeps the
  // build, with its outputs (counted by the plan), inside the budget too.
  graph_.set_memory_limit(0.25 * budget_);
  if (options_.cuda_graph_cache < 1) throw Error("a CUDA-graph cache holds at least one capture");
  stats_.memory_budget = budget_;
  stats_.edge_backend = edge_backend_;
}

Engine::~Engine() = default;

StepPlan& Engine::plan_for(const std::vector<Atoms>& step) {
  auto key = plan_key(step, model_->config());
  if (plan_ && plan_->key == key) return *plan_;
  auto plan = build_plan(model_, step, std::move(key), options_.device, plan_.get(),
                         options_.training ? Normalisers::kIdentity : Normalisers::kModel);
  plan->replays.set_limits(static_cast<size_t>(options_.cuda_graph_cache), 0.5 * budget_);
  if (plan_) {  // the counters of its captures live on in the engine's
    stats_.graph_captures += plan_->replays.captures();
    stats_.graph_replays += plan_->replays.replays();
  }
  plan_ = std::move(plan);
  ++stats_.step_plans;
  return *plan_;
}

Evaluation Engine::evaluate(const std::vector<Atoms>& step, const Request& what) {
  validate(step);
  const auto fopts = torch::TensorOptions().dtype(options_.dtype).device(options_.device);
  StepPlan& plan = plan_for(step);
  const Geometry geo = upload_geometry(geometry_of(step), fopts, staging_);
  const Atoms& first = step[0];
  if (!first.piece.defined())
    return options_.cuda_graph ? run_or_replay(plan, geo, what) : run(plan, geo, what);

  // A piece: this step's collectives and message targets (host values).
  connect_collectives(plan.in, first.piece);
  const bool empty = atom_count(first) == 0;  // runs on a placeholder atom (step_plan.h)
  std::vector<int64_t> layer_targets = first.piece.layer_targets;
  if (empty && !layer_targets.empty())
    layer_targets.assign(model_->config().backbone.num_layers, 1);
  Evaluation ev = run(plan, geo, what, layer_targets);
  if (empty) {  // drop the placeholder
    ev.atom_energy = ev.atom_energy.narrow(0, 0, 0);
    ev.forces = ev.forces.narrow(0, 0, 0);
    if (ev.atom_virial.defined()) ev.atom_virial = ev.atom_virial.narrow(0, 0, 0);
  }
  return ev;
}

void Engine::connect_collectives(BatchTensors& in, const Piece& piece) {
  in.reduce = in.exchange = nullptr;
  in.share = nullptr;
  if (piece.sum_over_processes) {
    in.reduce = [this, sum = piece.sum_over_processes](const torch::Tensor& x) {
      return stages_.cut(x, sum,
                         sum);  // the gradient of a sum over processes is the sum of the gradients
    };
  }
  if (piece.exchange_ghosts) {
    in.exchange = [this, ex = piece.exchange_ghosts](const torch::Tensor& x) {
      return stages_.cut(x, ex.owners_to_ghosts, ex.ghosts_to_owners);
    };
  }
  if (in.reduce || in.exchange)
    in.share = [this](const std::vector<torch::Tensor>& x) { return stages_.share(x); };
}

edges::MoleContext Engine::mole_context(StepPlan& plan, const torch::Tensor& system_emb,
                                        const std::vector<int64_t>& edge_rows,
                                        double routing_dropout) {
  edges::MoleContext ctx;
  auto backbone = model_->backbone();
  if (backbone->config().num_experts == 0) return ctx;
  ctx.row_offsets = edge_rows;
  if (!options_.merge_mole || plan.merge_key.empty()) {
    ctx.coefficients = backbone->expert_coefficients(plan.composition, system_emb, routing_dropout);
    return ctx;
  }
  if (!plan.merged) {
    torch::NoGradGuard no_grad;
    auto coeff = backbone->expert_coefficients(plan.composition, system_emb)[0];
    plan.merged = std::make_shared<edges::MergedExperts>(backbone->mole_layers(), coeff);
    ++stats_.merges;
  }
  ctx.merged = plan.merged.get();
  return ctx;
}

// An evaluation in four stages: the graph, what it sizes, the backbone, the outputs.
Evaluation Engine::run(StepPlan& plan, const Geometry& geo, const Request& what,
                       const std::vector<int64_t>& layer_targets) {
  stages_.clear();  // cuts of an evaluation that failed half-way
  StepState step = build_graph(geo, what);
  size_step(plan, step, layer_targets);
  run_backbone(plan, step, what);
  return assemble_outputs(plan, step, geo, what, stages_);
}

// Stage "graph": the neighbour graph (with the capacities a training step
// measured, if any) and the edge vectors, the leaves the energy is
// differentiated by: forces and virials both follow from dE/dr_edge.
StepState Engine::build_graph(const Geometry& geo, const Request& what) {
  StepState step;
  step.systems = static_cast<int64_t>(geo.graph.size());
  step.nodes = geo.positions.size(0);
  std::vector<GraphCapacity> measured;  // Request::edge_capacities
  for (int64_t edges : what.edge_capacities) measured.push_back({edges, 0, 0, 0});
  step.graph = measured.empty() ? graph_.build(geo.positions, geo.cells, geo.graph)
                                : graph_.build_with(geo.positions, geo.cells, geo.graph, measured);
  const RadiusGraph& graph = step.graph;
  step.vec = edge_vectors(geo.positions, graph, geo.cells);
  step.vec.requires_grad_(true);
  step.edges = {graph.src, graph.tgt,         graph.valid, graph.edge_system,
                step.vec,  graph.row_offsets, {}};
  return step;
}

// Stage "plan": what the graph's capacities size (the edge blocks and the
// memory plan, kept in the plan while they hold) and each block's edges.
void Engine::size_step(StepPlan& plan, StepState& step, const std::vector<int64_t>& layer_targets) {
  const RadiusGraph& graph = step.graph;
  GraphSized& sized = plan.sized;
  if (graph.row_offsets != sized.edge_rows) {  // the capacities changed: new block lengths
    std::vector<int64_t> lengths;
    for (int64_t b = 0; b < step.systems; ++b)
      lengths.push_back(graph.row_offsets[b + 1] - graph.row_offsets[b]);
    sized.edge_block_lengths =
        upload(lengths, torch::TensorOptions().dtype(torch::kLong).device(options_.device));
    sized.edge_rows = graph.row_offsets;
  }
  const int64_t edge_slots = graph.src.size(0);
  if (!sized.planned || sized.memory.nodes != step.nodes || sized.memory.edges != edge_slots) {
    sized.memory =
        plan_memory(memory_model_, step.nodes, edge_slots, budget_, options_.recompute_chunk);
    if (options_.memory_budget > budget_) sized.memory.asked_bytes = options_.memory_budget;
    sized.planned = true;
    ++stats_.memory_plans;
  }
  EdgeInput& edges = step.edges;
  edges.recompute_chunk = sized.memory.recompute ? sized.memory.chunk_edges : 0;
  edges.backend = edge_backend_;
  if (!layer_targets.empty()) {
    // Edges are ordered by target: those into atoms [0, t) are a prefix.
    // One counted read of L numbers sizes the per-block edge sets.
    std::vector<torch::Tensor> counts;
    for (int64_t t : layer_targets) counts.push_back((graph.valid & (graph.tgt < t)).sum());
    auto host = to_host(torch::stack(counts));
    const int64_t* found = host.data_ptr<int64_t>();  // host data
    edges.layer_edges.assign(found, found + host.numel());
    // Never an empty edge set: an extra edge into an atom past the prefix
    // only changes features nothing reads afterwards.
    for (auto& n : edges.layer_edges) n = std::max<int64_t>(n, 1);
  }
  if (edge_backend_->skips_padding() && step.systems == 1 && !plan.in.exchange)
    skip_padding_slots(graph, model_->config().backbone.num_layers, edges);
}

// Stage "backbone": each atom's energy in the model's units, and their sums.
void Engine::run_backbone(StepPlan& plan, StepState& step, const Request& what) {
  const BatchTensors& in = plan.in;
  auto backbone = model_->backbone();
  auto system_emb = backbone->system_embedding(in);
  auto ctx = mole_context(plan, system_emb, step.graph.row_offsets, what.routing_dropout);
  auto raw_atom = model_
                      ->atom_energies(in, step.edges, system_emb, ctx,
                                      what.features ? &step.features : nullptr)
                      .to(torch::kFloat64);  // [N]
  if (in.owned >= 0)                         // ghosts carry no energy of their own
    raw_atom = torch::cat({raw_atom.narrow(0, 0, in.owned),
                           torch::zeros({step.nodes - in.owned}, raw_atom.options())});
  step.raw_atom = raw_atom;
  step.raw_energy = system_sum(raw_atom, in.atom_offsets, in.natoms, what.create_graph);
}

// What a capture depends on besides the positions and cells, within the
// plan: what is sized by the graph (never returns once it changes) and
// whether the experts are merged yet.
std::vector<int64_t> Engine::replay_epoch(const StepPlan& plan) const {
  std::vector<int64_t> epoch{plan.merged ? 1 : 0,
                             plan.sized.memory.recompute ? plan.sized.memory.chunk_edges : 0};
  for (const auto& c : graph_.graph_capacities())
    epoch.insert(epoch.end(), {c.edges, c.candidates, c.neighbors, c.free_bins});
  return epoch;
}

// Per key: what the step computes and the graph's bin plan for this cell
// (may alternate within an epoch).
std::vector<int64_t> Engine::replay_key(const Geometry& geo, const Request& what) const {
  std::vector<int64_t> key{int64_t(what.atom_virial)};
  const auto bins = graph_.plan_key(geo.graph);
  key.insert(key.end(), bins.begin(), bins.end());
  return key;
}

Evaluation Engine::run_or_replay(StepPlan& plan, const Geometry& geo, const Request& what) {
  switch (plan.replays.next(replay_epoch(plan), replay_key(geo, what))) {
    case ReplayCache<Replay>::Action::kEager: {
      Evaluation ev = run(plan, geo, what);
      plan.replays.settled(replay_epoch(plan), replay_key(geo, what));
      return ev;
    }
    case ReplayCache<Replay>::Action::kReplay: {
      Replay& r = plan.replays.current();
      torch::NoGradGuard no_grad;              // the step's inputs into the graph's, on the device
      r.geo.positions.copy_(geo.positions);    // same device
      r.geo.cells.copy_(geo.cells);            // same device
      r.geo.inv_volume.copy_(geo.inv_volume);  // same device
      r.geo.nonfinite.copy_(geo.nonfinite);    // same device
      r.graph->replay();
      Evaluation ev = r.ev;
      ev.request = what;
      return ev;
    }
    case ReplayCache<Replay>::Action::kCapture:
      break;
  }
  auto r = std::make_unique<Replay>();
  r->geo = geo;  // the graph reads its own copies of the step's device inputs
  r->geo.positions = geo.positions.clone();
  r->geo.cells = geo.cells.clone();
  r->geo.inv_volume = geo.inv_volume.clone();
  r->geo.nonfinite = geo.nonfinite.clone();
  try {
    r->graph = CudaGraph::capture(options_.device, [&] { r->ev = run(plan, r->geo, what); });
  } catch (const Error& e) {
    plan.replays.refused(e.what());
    stats_.graph_refusal = e.what();
    return run(plan, geo, what);
  }
  stats_.graph_nodes = r->graph->nodes();
  r->graph_tables = graph_.device_tables();
  r->edge_block_lengths = plan.sized.edge_block_lengths;
  const double bytes = r->graph->pool_bytes();
  Replay& held = plan.replays.captured(std::move(r), bytes);
  held.graph->replay();
  return held.ev;
}

void Engine::update_weights(const std::function<void(UmaModel&)>& copy) {
  copy(model_);
  if (plan_) {
    plan_->merged.reset();
    plan_->replays.invalidate();
  }
}

EngineStats Engine::stats() const {
  EngineStats s = stats_;
  if (plan_) {
    s.memory_plan = plan_->sized.memory;
    s.graph_captures += plan_->replays.captures();
    s.graph_replays += plan_->replays.replays();
    s.graph_held = static_cast<int64_t>(plan_->replays.held());
    s.graph_held_bytes = plan_->replays.held_bytes();
  }
  s.edge_capacities = graph_.capacities();
  return s;
}

bool Engine::read(const Evaluation& ev, HostEvaluation& out, const torch::Tensor& extra) {
  const Request& what = ev.request;
  PackedRead packed;
  if (extra.defined()) packed.add("extra", extra);
  add_graph_status(packed, ev.edge_counts, ev.close_atoms, ev.nonfinite);
  if (what.energy) packed.add("energy", ev.energy);
  if (what.forces) packed.add("forces", ev.forces);
  if (what.atom_energy) packed.add("atom_energy", ev.atom_energy);
  if (what.stress) packed.add("stress", ev.stress);
  if (what.virial) packed.add("virial", ev.virial);
  if (what.atom_virial) packed.add("atom_virial", ev.atom_virial);
  packed.read();

  std::vector<int64_t> counts;
  if (!graph_status_ok(packed, ev.capacities, ev.graph_sizes, graph_, counts)) return false;
  out = HostEvaluation();
  out.edges = counts;
  if (packed.has("energy")) out.energy = packed.vector("energy");
  auto take = [&](const char* name, torch::Tensor& field) {
    if (packed.has(name)) field = packed.tensor(name);
  };
  take("forces", out.forces);
  take("atom_energy", out.atom_energy);
  take("stress", out.stress);
  take("virial", out.virial);
  take("atom_virial", out.atom_virial);
  if (packed.has("extra")) out.extra = packed.vector("extra");
  return true;
}

std::vector<int64_t> Engine::edge_counts(const std::vector<Atoms>& step) {
  validate(step);
  const auto fopts = torch::TensorOptions().dtype(options_.dtype).device(options_.device);
  const Geometry geo = upload_geometry(geometry_of(step), fopts, staging_);
  std::vector<int64_t> counts;
  until_capacity_fits([&] {
    RadiusGraph graph = graph_.build(geo.positions, geo.cells, geo.graph);
    PackedRead packed;
    add_graph_status(packed, graph.counts, graph.close_atoms, geo.nonfinite);
    packed.read();
    std::vector<int64_t> capacities;
    for (const auto& c : graph.capacity) capacities.push_back(c.edges);
    return graph_status_ok(packed, capacities, graph.sizes, graph_, counts);
  });
  return counts;
}

std::vector<std::string> precision_names(bool tf32) {
  std::vector<std::string> names;
  for (const auto& p : kPrecisions)
    if (tf32 || !p.precision.tf32) names.push_back(p.name);
  return names;
}

std::string precision_name(torch::ScalarType dtype) {
  for (const auto& p : kPrecisions)
    if (p.precision.dtype == dtype && !p.precision.tf32) return p.name;
  throw Error("internal: no precision named for " + std::string(c10::toString(dtype)));
}

Precision parse_precision(const std::string& name) {
  for (const auto& p : kPrecisions)
    if (name == p.name) return p.precision;
  throw Error("precision must be " + one_of(precision_names()) + ", got '" + name + "'");
}

Error capacity_exhausted() {
  return Error(
      "the neighbour graph still overflowed its capacity after " +
      std::to_string(kCapacityAttempts) +
      " builds, each grown to what the previous one found: the atoms' neighbour counts keep "
      "jumping "
      "(atoms collapsing onto each other, or a cell shrinking fast); no result was computed");
}

HostEvaluation evaluate_on_host(Engine& engine, const std::vector<Atoms>& step,
                                const Request& what) {
  HostEvaluation out;
  until_capacity_fits([&] { return engine.read(engine.evaluate(step, what), out); });
  return out;
}

}  // namespace uma
