#include "engine.h"

#include <malloc.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

#include "batch.h"
#include "error.h"
#include "host_reads.h"

namespace uma {
namespace {

bool any_periodic(const Atoms& a) { return a.pbc[0] || a.pbc[1] || a.pbc[2]; }

torch::Tensor host_doubles(const std::vector<double>& v, const torch::TensorOptions& opts) {
  return torch::tensor(v, torch::kFloat64).to(opts);
}

}  // namespace

int64_t default_spin(const std::string& task) { return task == "omol" ? 1 : 0; }

Engine::Engine(UmaModel model, EngineOptions options)
    : model_(std::move(model)),
      options_(options),
      graph_(model_->config().backbone.cutoff, model_->config().backbone.max_neighbors) {
  const char* keep = std::getenv("UMA_KEEP_MEMORY");
  if (options_.keep_host_memory && !(keep && std::string(keep) == "0")) {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  }
  model_->to(options_.device, options_.dtype);
  model_->eval();
  for (auto& p : model_->parameters()) p.requires_grad_(false);
}

void Engine::validate(const std::vector<Atoms>& systems) const { validate_systems(model_, systems); }

void validate_systems(const UmaModel& model, const std::vector<Atoms>& systems) {
  const auto& cfg = model->config();
  if (systems.empty()) throw Error("no systems to evaluate");
  for (size_t b = 0; b < systems.size(); ++b) {
    const Atoms& a = systems[b];
    const std::string where = systems.size() > 1 ? "system " + std::to_string(b) + ": " : "";
    const int64_t n = static_cast<int64_t>(a.numbers.size());
    if (n == 0) throw Error(where + "no atoms");
    if (!a.positions.defined() || a.positions.dim() != 2 || a.positions.size(0) != n ||
        a.positions.size(1) != 3)
      throw Error(where + "positions must have shape [" + std::to_string(n) + ", 3]");
    for (int64_t z : a.numbers)
      if (z < 1 || z >= cfg.backbone.max_num_elements)
        throw Error(where + "atomic number " + std::to_string(z) + " is not covered by the model (1.." +
                    std::to_string(cfg.backbone.max_num_elements - 1) + ")");
    if (!model->has_dataset(a.task)) {
      std::string known;
      for (const auto& d : cfg.dataset_names()) known += (known.empty() ? "" : ", ") + d;
      throw Error(where + "unknown task '" + a.task + "'; the model has: " + known);
    }
    if (a.charge < -100 || a.charge > 100)
      throw Error(where + "charge " + std::to_string(a.charge) + " is outside -100..100");
    if (a.spin < 0 || a.spin > 100)
      throw Error(where + "spin multiplicity " + std::to_string(a.spin) + " is outside 0..100");
    if (a.positions.device().is_cpu() && !torch::isfinite(a.positions).all().item<bool>())
      throw Error(where + "positions contain NaN or infinite values");
    for (const auto& row : a.cell)
      for (double v : row)
        if (!std::isfinite(v)) throw Error(where + "the cell contains NaN or infinite values");
    if (any_periodic(a) && !(cell_volume(graph_cell(a.cell, a.pbc)) >= 1e-6))
      throw Error(where + "the cell has zero volume along its periodic directions");
  }
}

struct Engine::Prepared {
  std::vector<GraphSystem> graph;
  std::vector<double> cells;                // [B * 9] rows are lattice vectors
  std::vector<std::vector<int64_t>> keys;   // MoLE merge key per system
  std::vector<double> energy_scale, energy_shift, atom_shift, force_scale, stress_scale,
      stress_shift, inv_volume;
  std::vector<int64_t> layer_targets;       // local evaluation: see LocalAtoms
};

std::vector<int64_t> Engine::mole_key(const std::vector<int64_t>& counts, int64_t charge,
                                      int64_t spin, const std::string& task) const {
  std::vector<int64_t> key(counts);
  key.resize(model_->config().backbone.max_num_elements, 0);
  const auto names = model_->config().dataset_names();
  key.push_back(charge);
  key.push_back(spin);
  key.push_back(std::find(names.begin(), names.end(), task) - names.begin());
  return key;
}

nn::MoleContext Engine::mole_context(const BatchTensors& composition, const torch::Tensor& system_emb,
                                     const std::vector<std::vector<int64_t>>& keys,
                                     const std::vector<int64_t>& edge_rows) {
  nn::MoleContext ctx;
  auto backbone = model_->backbone();
  if (backbone->config().num_experts == 0) return ctx;
  ctx.row_offsets = edge_rows;
  bool uniform = options_.merge_mole;
  for (size_t b = 1; b < keys.size() && uniform; ++b) uniform = keys[b] == keys[0];
  if (!uniform) {
    ctx.coefficients = backbone->expert_coefficients(composition, system_emb);
    return ctx;
  }
  if (!merged_ || keys[0] != merged_key_) {
    torch::NoGradGuard no_grad;
    auto coeff = backbone->expert_coefficients(composition, system_emb)[0];
    for (auto& layer : backbone->mole_layers()) layer->set_merged(coeff);
    merged_key_ = keys[0];
    merged_ = true;
    ++merges_;
  }
  ctx.use_merged = true;
  return ctx;
}

Evaluation Engine::run(BatchTensors& in, const torch::Tensor& pos, const Prepared& prep,
                       const BatchTensors& composition) {
  const auto dopts = torch::TensorOptions().dtype(torch::kFloat64).device(options_.device);
  const auto fopts = torch::TensorOptions().dtype(options_.dtype).device(options_.device);
  const int64_t B = static_cast<int64_t>(prep.graph.size());
  const int64_t N = pos.size(0);

  RadiusGraph graph = graph_.build(pos, prep.graph);
  // The edge vectors are the leaves the energy is differentiated by: forces
  // and virials both follow from dE/dr_edge.
  torch::Tensor vec = edge_vectors(pos, graph, host_doubles(prep.cells, dopts).to(options_.dtype).view({B, 3, 3}));
  vec.requires_grad_(true);
  EdgeInput edges{graph.src, graph.tgt, graph.valid, graph.edge_system, vec, graph.row_offsets, {}};
  if (!prep.layer_targets.empty()) {
    // Edges are ordered by target: those into atoms [0, t) are a prefix.
    // One counted read of L numbers sizes the per-block edge sets.
    std::vector<torch::Tensor> counts;
    for (int64_t t : prep.layer_targets) counts.push_back((graph.valid & (graph.tgt < t)).sum());
    auto host = to_host(torch::stack(counts));
    edges.layer_edges.assign(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
    // Never an empty edge set: an extra edge into an atom past the prefix
    // only changes features nothing reads afterwards.
    for (auto& n : edges.layer_edges) n = std::max<int64_t>(n, 1);
  }

  auto backbone = model_->backbone();
  auto system_emb = backbone->system_embedding(in);
  auto ctx = mole_context(composition, system_emb, prep.keys, graph.row_offsets);
  auto raw_atom = model_->atom_energies(in, edges, system_emb, ctx).to(torch::kFloat64);  // [N]
  if (in.owned >= 0)   // ghosts carry no energy of their own
    raw_atom = torch::cat({raw_atom.narrow(0, 0, in.owned),
                           torch::zeros({N - in.owned}, dopts)});
  auto raw_energy = torch::zeros({B}, dopts).index_add(0, in.batch, raw_atom);
  auto g = torch::autograd::grad({raw_energy.sum()}, {vec})[0];   // [E, 3] dE/dr_edge

  Evaluation ev;
  auto escale = host_doubles(prep.energy_scale, dopts);
  ev.energy = raw_energy * escale + host_doubles(prep.energy_shift, dopts);
  ev.atom_energy = raw_atom * escale.index_select(0, in.batch) + host_doubles(prep.atom_shift, dopts);
  auto fscale = host_doubles(prep.force_scale, dopts);
  auto pair_force = g * fscale.to(options_.dtype).index_select(0, graph.edge_system).unsqueeze(1);
  ev.forces = torch::zeros({N, 3}, fopts).index_add(0, graph.tgt, pair_force)
                  .index_add(0, graph.src, -pair_force);
  if (options_.stress || options_.atom_virial) {
    // dE/d strain = sum_edges r (x) dE/dr; the virial W = -dE/d strain.
    auto r_g = vec.detach().to(torch::kFloat64).unsqueeze(2) * g.to(torch::kFloat64).unsqueeze(1);
    auto de_dstrain = torch::zeros({B, 3, 3}, dopts).index_add(0, graph.edge_system, r_g);
    de_dstrain = (de_dstrain + de_dstrain.transpose(1, 2)) / 2;
    ev.virial = -de_dstrain * fscale.view({B, 1, 1});
    if (options_.stress && in.owned < 0)
      ev.stress = de_dstrain * (host_doubles(prep.inv_volume, dopts) *
                                host_doubles(prep.stress_scale, dopts)).view({B, 1, 1}) +
                  host_doubles(prep.stress_shift, dopts).view({B, 1, 1});
    if (options_.atom_virial) {
      auto w = r_g * (fscale.index_select(0, graph.edge_system) * -0.5).view({-1, 1, 1});
      w = (w + w.transpose(1, 2)) / 2;
      ev.atom_virial = torch::zeros({N, 3, 3}, dopts).index_add(0, graph.src, w).index_add(0, graph.tgt, w);
    }
  }
  ev.edge_counts = graph.counts;
  ev.coincident = graph.coincident;
  ev.capacities = graph_.capacities();
  return ev;
}

Evaluation Engine::evaluate(const std::vector<Atoms>& systems) {
  validate(systems);
  const auto fopts = torch::TensorOptions().dtype(options_.dtype).device(options_.device);
  const int64_t B = static_cast<int64_t>(systems.size());
  const int64_t Z = model_->config().backbone.max_num_elements;

  BatchInput batch = make_batch_input(systems, fopts);
  BatchTensors& in = batch.in;
  Prepared prep;
  prep.graph = batch.graph;
  prep.cells = batch.cells;
  for (int64_t b = 0; b < B; ++b) {
    const Atoms& a = systems[b];
    const int64_t n = static_cast<int64_t>(a.numbers.size());
    const auto& out = model_->outputs(a.task);
    std::vector<int64_t> counts(Z, 0);
    double refs = 0;
    for (int64_t z : a.numbers) {
      const double r = out.element_references.defined()
                           ? out.element_references.data_ptr<double>()[z] : 0.0;
      refs += r;
      ++counts[z];
      prep.atom_shift.push_back(r + out.energy_mean / n);
    }
    prep.keys.push_back(mole_key(counts, a.charge, a.spin, a.task));
    prep.energy_scale.push_back(out.energy_rmsd);
    prep.energy_shift.push_back(out.energy_mean + refs);
    prep.force_scale.push_back(out.forces_rmsd);
    prep.stress_scale.push_back(out.stress_rmsd);
    prep.stress_shift.push_back(out.stress_mean);
    const double v = batch.volumes[b];
    prep.inv_volume.push_back(v > 1e-6 ? 1.0 / v : std::nan(""));
  }
  return run(in, batch.positions, prep, in);
}

Evaluation Engine::evaluate_local(const LocalAtoms& piece) {
  const auto& cfg = model_->config();
  const int64_t Z = cfg.backbone.max_num_elements;
  const auto fopts = torch::TensorOptions().dtype(options_.dtype).device(options_.device);
  const auto lopts = torch::TensorOptions().dtype(torch::kLong).device(options_.device);

  int64_t N = static_cast<int64_t>(piece.numbers.size());
  if (piece.n_owned < 0 || piece.n_owned > N) throw Error("n_owned must be within 0..number of atoms");
  if (!piece.positions.defined() || piece.positions.dim() != 2 || piece.positions.size(0) != N ||
      piece.positions.size(1) != 3)
    throw Error("positions must have shape [" + std::to_string(N) + ", 3]");
  int64_t total = 0;
  for (int64_t c : piece.composition) total += c;
  if (total == 0 || static_cast<int64_t>(piece.composition.size()) > Z)
    throw Error("the composition must count at least one atom and only atomic numbers the model covers");
  Atoms check;   // charge, spin, task and atomic numbers are validated like a whole system
  check.numbers = piece.numbers.empty() ? std::vector<int64_t>{1} : piece.numbers;
  check.positions = torch::zeros({static_cast<int64_t>(check.numbers.size()), 3});
  check.charge = piece.charge;
  check.spin = piece.spin;
  check.task = piece.task;
  validate({check});

  // A process without atoms still takes part in every reduction the model
  // makes: it runs on one placeholder ghost that has no neighbours.
  std::vector<int64_t> numbers = piece.numbers;
  auto positions = piece.positions.to(fopts).detach();
  if (N == 0) {
    numbers = {1};
    positions = torch::zeros({1, 3}, fopts);
    N = 1;
  }
  const auto& out = model_->outputs(piece.task);
  Prepared prep;
  const int64_t targets = piece.numbers.empty() ? 1 : piece.n_targets;
  if (targets >= 0 && targets < piece.n_owned) throw Error("n_targets must include every owned atom");
  prep.graph.push_back({0, N, graph_cell(Matrix3{}, {false, false, false}), {false, false, false}, targets});
  prep.cells.assign(9, 0.0);
  prep.keys.push_back(mole_key(piece.composition, piece.charge, piece.spin, piece.task));
  double refs = 0;
  for (int64_t i = 0; i < N; ++i) {
    const bool owned = i < piece.n_owned;
    const double r = out.element_references.defined() && owned
                         ? out.element_references.data_ptr<double>()[numbers[i]] : 0.0;
    refs += r;
    prep.atom_shift.push_back(owned ? r + out.energy_mean / total : 0.0);
  }
  prep.energy_scale.push_back(out.energy_rmsd);
  prep.energy_shift.push_back(out.energy_mean * piece.n_owned / total + refs);
  prep.force_scale.push_back(out.forces_rmsd);
  prep.stress_scale.push_back(out.stress_rmsd);
  prep.stress_shift.push_back(out.stress_mean);
  prep.inv_volume.push_back(std::nan(""));
  if (!piece.layer_targets.empty()) {
    if (static_cast<int64_t>(piece.layer_targets.size()) != cfg.backbone.num_layers)
      throw Error("layer_targets needs one entry per block (" + std::to_string(cfg.backbone.num_layers) + ")");
    prep.layer_targets = piece.layer_targets;
    if (piece.numbers.empty()) prep.layer_targets.assign(cfg.backbone.num_layers, 1);
  }

  BatchTensors in;
  in.numbers = torch::tensor(numbers, torch::kLong).to(lopts);
  in.batch = torch::zeros({N}, lopts);
  in.natoms = torch::full({1}, total, lopts);
  in.charge = torch::full({1}, piece.charge, lopts);
  in.spin = torch::full({1}, piece.spin, lopts);
  in.datasets = {piece.task};
  in.atom_offsets = {0, N};
  in.owned = piece.n_owned;
  in.reduce = piece.sum_over_processes;

  // The whole system's composition, for the expert routing.
  BatchTensors composition;
  auto counts = torch::tensor(piece.composition, torch::kLong).to(lopts);
  composition.numbers = torch::repeat_interleave(counts);
  composition.batch = torch::zeros({total}, lopts);
  composition.natoms = in.natoms;

  Evaluation ev = run(in, positions, prep, composition);
  if (piece.numbers.empty()) {   // drop the placeholder
    ev.atom_energy = ev.atom_energy.narrow(0, 0, 0);
    ev.forces = ev.forces.narrow(0, 0, 0);
    if (ev.atom_virial.defined()) ev.atom_virial = ev.atom_virial.narrow(0, 0, 0);
  }
  return ev;
}

bool Engine::accept(const Evaluation& ev) {
  auto counts = to_host(ev.edge_counts);
  std::vector<int64_t> c(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel());
  bool overflow = false;
  for (size_t b = 0; b < c.size(); ++b) overflow |= c[b] > ev.capacities[b];
  if (overflow) {
    graph_.grow(c);
    return false;
  }
  if (read_int(ev.coincident) > 0)
    throw Error("two or more atoms sit at the same position (distance 0)");
  return true;
}

HostEvaluation Engine::read(const Evaluation& ev) {
  HostEvaluation out;
  auto e = to_host(ev.energy);
  out.energy.assign(e.data_ptr<double>(), e.data_ptr<double>() + e.numel());
  out.atom_energy = to_host(ev.atom_energy);
  out.forces = to_host(ev.forces).to(torch::kFloat64);
  if (ev.stress.defined()) out.stress = to_host(ev.stress);
  if (ev.virial.defined()) out.virial = to_host(ev.virial);
  if (ev.atom_virial.defined()) out.atom_virial = to_host(ev.atom_virial);
  auto counts = to_host(ev.edge_counts);
  out.edges.assign(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel());
  return out;
}

HostEvaluation Engine::evaluate_checked(const std::vector<Atoms>& systems) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    Evaluation ev = evaluate(systems);
    if (accept(ev)) return read(ev);
  }
  throw Error("internal: edge capacity did not converge");
}

}  // namespace uma
