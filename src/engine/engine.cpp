#include "engine/engine.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "edges/edge_segments.h"
#include "graph/batch.h"
#include "runtime/device.h"
#include "engine/packed_read.h"
#include "engine/step_plan.h"
#include "runtime/transfers.h"
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

// Sums rows of `x` into B systems whose rows are contiguous blocks of the
// given host lengths: deterministic on every device (no atomics).  One sum
// per block with `twice` (a training step's second-order backward, which
// segment_reduce's backward is not) and off the CPU (where segment_reduce
// adds a block's rows one after another in one thread per column).
torch::Tensor system_sum(const torch::Tensor& x, const std::vector<int64_t>& offsets,
                         const torch::Tensor& lengths, bool twice) {
  const int64_t B = static_cast<int64_t>(offsets.size()) - 1;
  if (B == 1) return x.narrow(0, 0, offsets[1]).sum(0, /*keepdim=*/true);
  if (twice || !x.device().is_cpu()) {
    std::vector<torch::Tensor> sums;
    for (int64_t b = 0; b < B; ++b)
      sums.push_back(x.narrow(0, offsets[b], offsets[b + 1] - offsets[b]).sum(0, true));
    return torch::cat(sums);
  }
  return torch::segment_reduce(x, "sum", lengths, /*indices=*/{}, /*offsets=*/{}, /*axis=*/0,
                               /*unsafe=*/true, /*initial=*/0);
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
  edge_backend_ = &nn::edge_backend_for(options_.edge_ops, options_.device);
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
  plan.layer_targets = first.piece.layer_targets;
  if (empty && !plan.layer_targets.empty())
    plan.layer_targets.assign(model_->config().backbone.num_layers, 1);
  Evaluation ev = run(plan, geo, what);
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

nn::MoleContext Engine::mole_context(StepPlan& plan, const torch::Tensor& system_emb,
                                     const std::vector<int64_t>& edge_rows,
                                     double routing_dropout) {
  nn::MoleContext ctx;
  auto backbone = model_->backbone();
  if (backbone->config().num_experts == 0) return ctx;
  ctx.row_offsets = edge_rows;
  if (!options_.merge_mole || plan.merge_key.empty()) {
    ctx.coefficients =
        backbone->expert_coefficients(plan.composition, system_emb, routing_dropout);
    return ctx;
  }
  if (!plan.merged) {
    torch::NoGradGuard no_grad;
    auto coeff = backbone->expert_coefficients(plan.composition, system_emb)[0];
    plan.merged = std::make_shared<nn::MergedExperts>(backbone->mole_layers(), coeff);
    ++stats_.merges;
  }
  ctx.merged = plan.merged.get();
  return ctx;
}

Evaluation Engine::run(StepPlan& plan, const Geometry& geo, const Request& what) {
  const auto dopts = torch::TensorOptions().dtype(torch::kFloat64).device(options_.device);
  const BatchTensors& in = plan.in;
  const auto& pos = geo.positions;
  const int64_t B = static_cast<int64_t>(geo.graph.size());
  const int64_t N = pos.size(0);

  stages_.clear();  // cuts of an evaluation that failed half-way
  std::vector<GraphCapacity> measured;  // Request::edge_capacities
  for (int64_t edges : what.edge_capacities) measured.push_back({edges, 0, 0, 0});
  RadiusGraph graph = measured.empty() ? graph_.build(pos, geo.cells, geo.graph)
                                       : graph_.build_with(pos, geo.cells, geo.graph, measured);
  if (graph.row_offsets != plan.edge_rows) {  // the capacities changed: new block lengths
    std::vector<int64_t> lengths;
    for (int64_t b = 0; b < B; ++b)
      lengths.push_back(graph.row_offsets[b + 1] - graph.row_offsets[b]);
    plan.edge_block_lengths = upload(lengths, dopts.dtype(torch::kLong));
    plan.edge_rows = graph.row_offsets;
  }
  // The edge vectors are the leaves the energy is differentiated by: forces
  // and virials both follow from dE/dr_edge.
  torch::Tensor vec = edge_vectors(pos, graph, geo.cells);
  vec.requires_grad_(true);
  EdgeInput edges{graph.src, graph.tgt, graph.valid, graph.edge_system, vec, graph.row_offsets, {}};
  const int64_t edge_slots = graph.src.size(0);
  if (!plan.planned || plan.memory.nodes != N || plan.memory.edges != edge_slots) {
    plan.memory = plan_memory(memory_model_, N, edge_slots, budget_, options_.recompute_chunk);
    if (options_.memory_budget > budget_) plan.memory.asked_bytes = options_.memory_budget;
    plan.planned = true;
    ++stats_.memory_plans;
  }
  edges.recompute_chunk = plan.memory.recompute ? plan.memory.chunk_edges : 0;
  edges.backend = edge_backend_;
  if (!plan.layer_targets.empty()) {
    // Edges are ordered by target: those into atoms [0, t) are a prefix.
    // One counted read of L numbers sizes the per-block edge sets.
    std::vector<torch::Tensor> counts;
    for (int64_t t : plan.layer_targets) counts.push_back((graph.valid & (graph.tgt < t)).sum());
    auto host = to_host(torch::stack(counts));
    const int64_t* found = host.data_ptr<int64_t>();  // host data
    edges.layer_edges.assign(found, found + host.numel());
    // Never an empty edge set: an extra edge into an atom past the prefix
    // only changes features nothing reads afterwards.
    for (auto& n : edges.layer_edges) n = std::max<int64_t>(n, 1);
  }
  if (edge_backend_->skips_padding() && B == 1 && !in.exchange)
    skip_padding_slots(graph, model_->config().backbone.num_layers, edges);

  auto backbone = model_->backbone();
  auto system_emb = backbone->system_embedding(in);
  auto ctx = mole_context(plan, system_emb, graph.row_offsets, what.routing_dropout);
  torch::Tensor features;
  auto raw_atom =
      model_->atom_energies(in, edges, system_emb, ctx, what.features ? &features : nullptr)
          .to(torch::kFloat64);  // [N]
  if (in.owned >= 0)  // ghosts carry no energy of their own
    raw_atom = torch::cat({raw_atom.narrow(0, 0, in.owned), torch::zeros({N - in.owned}, dopts)});
  const bool twice = what.create_graph;
  auto raw_energy = system_sum(raw_atom, in.atom_offsets, in.natoms, twice);

  Evaluation ev;
  ev.request = what;
  const auto& escale = plan.energy_scale;
  const bool raw = plan.identity;  // training: the raw outputs, no scale or shift to apply
  ev.energy = raw ? raw_energy : raw_energy * escale + plan.energy_shift;
  ev.atom_energy =
      raw ? raw_atom
          : raw_atom * (B == 1 ? escale : escale.index_select(0, in.batch)) + plan.atom_shift;
  if (features.defined()) ev.features = features.detach();
  ev.natoms = in.natoms;
  ev.batch = in.batch;
  ev.edge_counts = graph.counts;
  ev.close_atoms = graph.close_atoms;
  ev.nonfinite = geo.nonfinite;
  ev.graph_sizes = graph.sizes;
  ev.capacities.clear();
  for (const auto& c : graph.capacity) ev.capacities.push_back(c.edges);
  if (!what.gradients) return ev;

  // [E, 3] dE/dr_edge; stage by stage where the model called collectives,
  // which then run here, on this thread (staged_backward.h).  A training
  // step keeps its graph for the second-order backward (whole systems: no
  // collectives).
  auto g = twice ? torch::autograd::grad({raw_energy.sum()}, {vec}, {}, /*retain_graph=*/true,
                                         /*create_graph=*/true)[0]
                 : stages_.grad(raw_energy.sum(), {vec})[0];
  const auto& fscale = plan.force_scale;
  torch::Tensor pair_force = g;
  if (!raw) {
    auto edge_fscale = B == 1 ? fscale.to(options_.dtype)
                              : fscale.to(options_.dtype).index_select(0, graph.edge_system);
    pair_force = g * edge_fscale.unsqueeze(1);
  }
  // Sums into atoms in each atom's edge order (no float atomics on a GPU):
  // the same forces on every run, and a training step's second backward too.
  // The padding slots (zero rows, all at a system's last atom) are left out.
  const nn::NodeSums into_targets(nn::leave_out(graph.tgt, graph.valid, N), N);
  const nn::NodeSums into_sources(nn::leave_out(graph.src, graph.valid, N), N);
  ev.forces = into_targets(pair_force) - into_sources(pair_force);
  {
    // dE/d strain = sum_edges r (x) dE/dr; the virial W = -dE/d strain.
    auto r_g = vec.detach().to(torch::kFloat64).unsqueeze(2) * g.to(torch::kFloat64).unsqueeze(1);
    auto de_dstrain = system_sum(r_g, graph.row_offsets, plan.edge_block_lengths, twice);
    de_dstrain = (de_dstrain + de_dstrain.transpose(1, 2)) / 2;
    ev.virial = raw ? -de_dstrain : -de_dstrain * fscale.view({B, 1, 1});
    if (in.owned < 0 && raw)  // 0 instead of NaN without volume: a NaN would reach the gradient
      ev.stress = de_dstrain * torch::nan_to_num(geo.inv_volume, 0.0, 0.0, 0.0).view({B, 1, 1});
    else if (in.owned < 0)
      ev.stress = de_dstrain * (geo.inv_volume * plan.stress_scale).view({B, 1, 1}) +
                  plan.stress_shift.view({B, 1, 1});
    if (what.atom_virial) {
      auto edge_half = B == 1 ? fscale * -0.5 : fscale.index_select(0, graph.edge_system) * -0.5;
      auto w = r_g * edge_half.view({-1, 1, 1});
      w = (w + w.transpose(1, 2)) / 2;
      ev.atom_virial = into_sources(w) + into_targets(w);
    }
  }
  return ev;
}

// What a capture depends on besides the positions and cells, within the
// plan: what is sized by the graph (never returns once it changes) and
// whether the experts are merged yet.
std::vector<int64_t> Engine::replay_epoch(const StepPlan& plan) const {
  std::vector<int64_t> epoch{plan.merged ? 1 : 0,
                             plan.memory.recompute ? plan.memory.chunk_edges : 0};
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
  r->edge_block_lengths = plan.edge_block_lengths;
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
    s.memory_plan = plan_->memory;
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
  packed.add("edge_counts", ev.edge_counts);
  packed.add("close_atoms", ev.close_atoms);  // [flag, i, j, distance]
  packed.add("nonfinite", ev.nonfinite);
  if (what.energy) packed.add("energy", ev.energy);
  if (what.forces) packed.add("forces", ev.forces);
  if (what.atom_energy) packed.add("atom_energy", ev.atom_energy);
  if (what.stress) packed.add("stress", ev.stress);
  if (what.virial) packed.add("virial", ev.virial);
  if (what.atom_virial) packed.add("atom_virial", ev.atom_virial);
  packed.read();

  const auto found = packed.vector("edge_counts");
  std::vector<int64_t> counts(found.begin(), found.end());
  bool overflow = false;
  for (size_t b = 0; b < counts.size(); ++b) overflow |= counts[b] > ev.capacities[b];
  if (packed.scalar("nonfinite") > 0) throw Error("positions contain NaN or infinite values");
  if (overflow) {
    graph_.grow(counts, ev.graph_sizes);
    return false;
  }
  const auto close = packed.vector("close_atoms");
  if (close[0] > 0)
    throw CloseAtomsError(static_cast<int64_t>(close[1]), static_cast<int64_t>(close[2]), close[3],
                          kMinAtomDistance);
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
    packed.add("edge_counts", graph.counts);
    packed.add("close_atoms", graph.close_atoms);
    packed.add("nonfinite", geo.nonfinite);
    packed.read();
    const auto found = packed.vector("edge_counts");
    counts.assign(found.begin(), found.end());
    if (packed.scalar("nonfinite") > 0) throw Error("positions contain NaN or infinite values");
    bool overflow = false;
    for (size_t b = 0; b < counts.size(); ++b) overflow |= counts[b] > graph.capacity[b].edges;
    if (overflow) {
      graph_.grow(counts, graph.sizes);
      return false;
    }
    const auto close = packed.vector("close_atoms");
    if (close[0] > 0)
      throw CloseAtomsError(static_cast<int64_t>(close[1]), static_cast<int64_t>(close[2]),
                            close[3], kMinAtomDistance);
    return true;
  });
  return counts;
}

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return {torch::kFloat32, false};
  if (name == "fp64") return {torch::kFloat64, false};
  if (name == "tf32") return {torch::kFloat32, true};
  throw Error("precision must be fp32, fp64 or tf32, got '" + name + "'");
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
