#include "engine.h"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

#include "batch.h"
#include "device.h"
#include "elements.h"
#include "uma_error.h"
#include "transfers.h"

namespace uma {
namespace {

bool any_periodic(const Atoms& a) { return a.pbc[0] || a.pbc[1] || a.pbc[2]; }

// One system's padding slots are the end of its block.  A backend on the CPU
// (EdgeBackend::skips_padding) runs over the edges found only (the count is
// host memory there), as layer pruning runs over a prefix.  An overflowed
// build keeps every slot: its result is discarded.
void skip_padding_slots(const RadiusGraph& graph, int64_t blocks, EdgeInput& edges) {
  const int64_t slots = graph.src.size(0);
  const int64_t found = std::max<int64_t>(1, std::min(slots, graph.counts.data_ptr<int64_t>()[0]));   // host data
  if (found == slots) return;
  if (edges.layer_edges.empty()) edges.layer_edges.assign(static_cast<size_t>(blocks), found);
  for (auto& n : edges.layer_edges) n = std::min(n, found);
}

}  // namespace

bool takes_charge_spin(const std::string& task) { return task == "omol"; }

int64_t default_spin(const std::string& task) { return takes_charge_spin(task) ? 1 : 0; }

void validate_charge_spin(int64_t charge, int64_t spin) {
  if (charge < -100 || charge > 100) throw Error("charge " + std::to_string(charge) + " is outside -100..100");
  if (spin < 0 || spin > 100) throw Error("spin multiplicity " + std::to_string(spin) + " is outside 0..100");
}

int64_t atom_count(const Atoms& a) {
  return a.on_device.defined() ? a.on_device.numbers.size(0) : static_cast<int64_t>(a.numbers.size());
}

int64_t atom_count(const LocalAtoms& piece) {
  return piece.on_device.defined() ? piece.on_device.numbers.size(0) : static_cast<int64_t>(piece.numbers.size());
}

namespace {

// Device atoms must be where the model is, in the types the engine reads.
void check_device_atoms(const DeviceAtoms& d, const torch::Tensor& positions, const torch::Device& device,
                        const std::string& where) {
  if (d.numbers.dim() != 1 || d.numbers.scalar_type() != torch::kLong || d.numbers.device() != device)
    throw Error(where + "device atomic numbers must be a 1-D int64 tensor on " + device.str());
  if (!positions.defined() || positions.device() != device || positions.scalar_type() != torch::kFloat64)
    throw Error(where + "positions of device atoms must be float64 on " + device.str());
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
      throw Error("precision tf32 needs a CUDA device (TF32 is a GPU tensor-core format of float32)");
    at::globalContext().setAllowTF32CuBLAS(true);
    at::globalContext().setAllowTF32CuDNN(true);
  }
  if (options_.cuda_graph && !options_.device.is_cuda())
    throw Error("CUDA-graph replay needs a CUDA device; the model runs on " + options_.device.str());
  if (options_.cuda_graph && !cuda_graphs_built())
    throw Error("CUDA-graph replay is not in this build of the engine (compiled without the CUDA headers)");
  configure_cublas_workspace(options_.device);   // before any GEMM: a later fix uma/train needs it
  make_current(options_.device);   // before anything is allocated there
  model_->to(options_.device, options_.dtype);   // bulk transfer
  model_->eval();
  for (auto& p : model_->parameters()) p.requires_grad_(false);
  edge_backend_ = options_.edge_ops == EngineOptions::EdgeOps::kLean && options_.device.is_cpu()
                      ? &nn::lean_cpu_edges()
                      : &nn::reference_edges();
  memory_model_ = memory_model(model_->config().backbone, options_.dtype, *edge_backend_);
  if (options_.memory_budget < 0) throw Error("the memory budget must be positive");
  budget_ = options_.memory_budget > 0
                ? options_.memory_budget
                : 0.8 * available_memory(options_.device) / std::max(1, options_.memory_sharers);
  // The graph is built before the model runs, and its temporaries are freed
  // before the model allocates: a quarter of the budget for them keeps the
  // build, with its outputs (counted by the plan), inside the budget too.
  graph_.set_memory_limit(0.25 * budget_);
  replays_.set_limits(static_cast<size_t>(std::max(1, options_.cuda_graph_cache)), 0.5 * budget_);
}

void Engine::validate(const std::vector<Atoms>& systems) const {
  validate_systems(model_, systems);
  for (const Atoms& a : systems) {
    if (!a.on_device.defined()) continue;
    if (systems.size() > 1) throw Error("atoms on the device are evaluated one system at a time");
    check_device_atoms(a.on_device, a.positions, options_.device, "");
  }
}

void validate_systems(const UmaModel& model, const std::vector<Atoms>& systems) {
  const auto& cfg = model->config();
  if (systems.empty()) throw Error("no systems to evaluate");
  for (size_t b = 0; b < systems.size(); ++b) {
    const Atoms& a = systems[b];
    const std::string where = systems.size() > 1 ? "system " + std::to_string(b) + ": " : "";
    const int64_t n = atom_count(a);
    if (n == 0) throw Error(where + "no atoms");
    if (a.on_device.defined() && !a.numbers.empty())
      throw Error(where + "atomic numbers given both on the host and on the device");
    if (!a.positions.defined() || a.positions.dim() != 2 || a.positions.size(0) != n ||
        a.positions.size(1) != 3)
      throw Error(where + "positions must have shape [" + std::to_string(n) + ", 3]");
    for (int64_t z : a.numbers)
      if (z < 1 || z >= cfg.backbone.max_num_elements)
        throw Error(where + "atomic number " + std::to_string(z) + " is not covered by the model (1.." +
                    std::to_string(cfg.backbone.max_num_elements - 1) + ")");
    if (!model->has_dataset(a.task))
      throw Error(where + "unknown task '" + a.task + "'; the model has: " + cfg.dataset_list());
    try {
      validate_charge_spin(a.charge, a.spin);
    } catch (const Error& e) {
      throw Error(where + e.what());
    }
    for (const auto& row : a.cell)
      for (double v : row)
        if (!std::isfinite(v)) throw Error(where + "the cell contains NaN or infinite values");
    if (any_periodic(a)) {
      const Matrix3 cell = graph_cell(a.cell, a.pbc);
      if (!(cell_volume(cell) >= 1e-6)) throw Error(where + "the cell has zero volume along its periodic directions");
      // Thinner cells would need (cutoff / spacing)^3 periodic images.
      const auto spacing = plane_spacings(cell);
      for (int k = 0; k < 3; ++k)
        if (a.pbc[k] && spacing[k] < kMinPlaneSpacing)
          throw Error(where + "the cell's lattice planes along periodic direction " + "abc"[k] + " are " +
                      std::to_string(spacing[k]) + " A apart, below the " + format_number(kMinPlaneSpacing) +
                      " A minimum (the periodic images within the cutoff would explode); use a larger or "
                      "less skewed cell");
    }
  }
}

struct Engine::Layout {
  std::vector<int64_t> key;                 // what it was built for (with `tasks`)
  std::vector<std::string> tasks;
  BatchTensors in;                          // device integers of the atoms
  BatchTensors composition;                 // what the expert routing sees (local: the whole system)
  std::vector<std::vector<int64_t>> mole_keys;   // MoLE merge key per system
  std::vector<int64_t> layer_targets;       // local evaluation: see LocalAtoms
  // [B] energy_scale, energy_shift, force_scale, stress_scale, stress_shift; [N] atom_shift
  torch::Tensor energy_scale, energy_shift, force_scale, stress_scale, stress_shift, atom_shift;

  // One upload of the per-layout normalisers.
  void upload_constants(const std::vector<double>& per_system, const std::vector<double>& per_atom,
                        const torch::Device& device) {
    std::vector<double> packed(per_system);
    packed.insert(packed.end(), per_atom.begin(), per_atom.end());
    auto t = upload(packed, torch::TensorOptions().dtype(torch::kFloat64).device(device));
    const int64_t B = static_cast<int64_t>(per_system.size() / 5);
    energy_scale = t.narrow(0, 0, B);
    energy_shift = t.narrow(0, B, B);
    force_scale = t.narrow(0, 2 * B, B);
    stress_scale = t.narrow(0, 3 * B, B);
    stress_shift = t.narrow(0, 4 * B, B);
    atom_shift = t.narrow(0, 5 * B, static_cast<int64_t>(per_atom.size()));
  }
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

const Engine::Layout& Engine::whole_layout(const std::vector<Atoms>& systems) {
  std::vector<int64_t> key{static_cast<int64_t>(systems.size())};
  std::vector<std::string> tasks;
  for (const Atoms& a : systems) {
    key.push_back(static_cast<int64_t>(a.numbers.size()));
    key.insert(key.end(), a.numbers.begin(), a.numbers.end());
    key.insert(key.end(), {a.charge, a.spin, a.pbc[0], a.pbc[1], a.pbc[2]});
    tasks.push_back(a.task);
  }
  const DeviceAtoms& dev = systems[0].on_device;
  if (dev.defined()) {   // validate(): one system
    const Atoms& a = systems[0];
    key.insert(key.end(), {-2, dev.layout_id, atom_count(a)});
  }
  if (layout_ && layout_->key == key && layout_->tasks == tasks) return *layout_;

  if (dev.defined()) {
    const Atoms& a = systems[0];
    const int64_t n = atom_count(a), Z = model_->config().backbone.max_num_elements;
    // One counted read: the composition, which the expert merge is keyed on.
    auto host = to_host(count_atomic_numbers(dev.numbers, Z));
    std::vector<int64_t> counts(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + Z);  // host data
    if (host.data_ptr<int64_t>()[Z] > 0 || counts[0] > 0)  // host data
      throw Error("atomic numbers on the device must lie in 1.." + std::to_string(Z - 1));
    layout_ = device_layout(dev, n, -1, counts, a.charge, a.spin, a.task);
    ++layouts_;
    layout_->key = std::move(key);
    return *layout_;
  }
  auto layout = std::make_shared<Layout>();
  layout->key = std::move(key);
  layout->tasks = tasks;
  layout->in = upload_layout(systems, options_.device);
  layout->composition = layout->in;
  const int64_t Z = model_->config().backbone.max_num_elements;
  std::vector<double> per_system(5 * systems.size()), per_atom;
  const size_t B = systems.size();
  for (size_t b = 0; b < B; ++b) {
    const Atoms& a = systems[b];
    const int64_t n = static_cast<int64_t>(a.numbers.size());
    const auto& out = model_->outputs(a.task);
    std::vector<int64_t> counts(Z, 0);
    double refs = 0;
    for (int64_t z : a.numbers) {
      const double r = out.element_references.defined()
                           ? out.element_references.accessor<double, 1>()[z] : 0.0;  // host data
      refs += r;
      ++counts[z];
      per_atom.push_back(r + out.energy_mean / n);
    }
    layout->mole_keys.push_back(mole_key(counts, a.charge, a.spin, a.task));
    per_system[b] = out.energy_rmsd;
    per_system[B + b] = out.energy_mean + refs;
    per_system[2 * B + b] = out.forces_rmsd;
    per_system[3 * B + b] = out.stress_rmsd;
    per_system[4 * B + b] = out.stress_mean;
  }
  layout->upload_constants(per_system, per_atom, options_.device);
  layout_ = layout;
  ++layouts_;
  return *layout_;
}

const Engine::Layout& Engine::local_layout(const LocalAtoms& piece, int64_t N) {
  // Which atoms receive messages (n_targets, layer_targets) is host-side
  // information: it changes as ghosts move between hop shells, but uploads
  // nothing, so it is not part of the key.
  std::vector<int64_t> key{-1, N, piece.n_owned, piece.charge, piece.spin};
  key.insert(key.end(), piece.numbers.begin(), piece.numbers.end());
  const bool on_device = piece.on_device.defined() && atom_count(piece) > 0;
  if (on_device) key.insert(key.end(), {-2, piece.on_device.layout_id});
  key.push_back(-1);
  key.insert(key.end(), piece.composition.begin(), piece.composition.end());
  auto set_targets = [&](Layout& layout) {
    layout.layer_targets = piece.layer_targets;
    if (atom_count(piece) == 0 && !piece.layer_targets.empty())
      layout.layer_targets.assign(model_->config().backbone.num_layers, 1);
  };
  if (layout_ && layout_->key == key && layout_->tasks == std::vector<std::string>{piece.task}) {
    connect_collectives(layout_->in, piece);
    set_targets(*layout_);
    return *layout_;
  }
  if (on_device) {
    layout_ = device_layout(piece.on_device, N, piece.n_owned, piece.composition, piece.charge, piece.spin,
                            piece.task);
    ++layouts_;
    layout_->key = std::move(key);
    connect_collectives(layout_->in, piece);
    set_targets(*layout_);
    return *layout_;
  }
  auto layout = std::make_shared<Layout>();
  layout->key = std::move(key);
  layout->tasks = {piece.task};
  int64_t total = 0;
  for (int64_t c : piece.composition) total += c;

  // A process without atoms still takes part in every reduction the model
  // makes: it runs on one placeholder ghost that has no neighbours.
  Atoms atoms;
  atoms.numbers = piece.numbers.empty() ? std::vector<int64_t>{1} : piece.numbers;
  atoms.charge = piece.charge;
  atoms.spin = piece.spin;
  atoms.task = piece.task;
  // The integers in one upload: the atoms' and the whole system's composition.
  Atoms whole = atoms;
  whole.numbers.clear();
  for (size_t z = 0; z < piece.composition.size(); ++z)
    whole.numbers.insert(whole.numbers.end(), piece.composition[z], static_cast<int64_t>(z));
  BatchTensors both = upload_layout({atoms, whole}, options_.device);
  BatchTensors& in = layout->in;
  in.numbers = both.numbers.narrow(0, 0, N);
  in.batch = both.batch.narrow(0, 0, N);          // all zero
  in.natoms = both.natoms.narrow(0, 1, 1);        // the whole system's count
  in.charge = both.charge.narrow(0, 0, 1);
  in.spin = both.spin.narrow(0, 0, 1);
  in.datasets = {piece.task};
  in.atom_offsets = {0, N};
  in.owned = piece.n_owned;
  connect_collectives(in, piece);
  BatchTensors& composition = layout->composition;
  composition.numbers = both.numbers.narrow(0, N, total);
  composition.batch = torch::zeros({total}, both.batch.options());   // a fill, not an upload
  composition.natoms = in.natoms;

  layout->mole_keys.push_back(mole_key(piece.composition, piece.charge, piece.spin, piece.task));
  const auto& out = model_->outputs(piece.task);
  std::vector<double> per_atom;
  double refs = 0;
  for (int64_t i = 0; i < N; ++i) {
    const bool owned = i < piece.n_owned;
    const double r = out.element_references.defined() && owned
                         ? out.element_references.accessor<double, 1>()[atoms.numbers[i]] : 0.0;  // host data
    refs += r;
    per_atom.push_back(owned ? r + out.energy_mean / total : 0.0);
  }
  layout->upload_constants({out.energy_rmsd, out.energy_mean * piece.n_owned / total + refs,
                            out.forces_rmsd, out.stress_rmsd, out.stress_mean},
                           per_atom, options_.device);
  set_targets(*layout);
  layout_ = layout;
  ++layouts_;
  return *layout_;
}

std::shared_ptr<Engine::Layout> Engine::device_layout(const DeviceAtoms& atoms, int64_t N, int64_t n_owned,
                                                     const std::vector<int64_t>& counts, int64_t charge,
                                                     int64_t spin, const std::string& task) {
  auto layout = std::make_shared<Layout>();
  layout->tasks = {task};
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const bool whole = n_owned < 0;
  if (whole) n_owned = N;
  // One upload of the integers: [natoms | charge | spin | the composition
  // as atomic numbers (pieces of a larger system only)].
  std::vector<int64_t> ints{total, charge, spin};
  for (size_t z = 0; z < counts.size() && !whole; ++z) ints.insert(ints.end(), counts[z], static_cast<int64_t>(z));
  const auto lopts = torch::TensorOptions().dtype(torch::kLong).device(options_.device);
  auto packed = upload(ints, lopts);
  BatchTensors& in = layout->in;
  in.numbers = atoms.numbers;
  in.batch = torch::zeros({N}, lopts);   // a fill, not an upload
  in.natoms = packed.narrow(0, 0, 1);
  in.charge = packed.narrow(0, 1, 1);
  in.spin = packed.narrow(0, 2, 1);
  in.datasets = {task};
  in.atom_offsets = {0, N};
  in.owned = whole ? -1 : n_owned;
  if (whole) {
    layout->composition = in;
  } else {
    layout->composition.numbers = packed.narrow(0, 3, total);
    layout->composition.batch = torch::zeros({total}, lopts);
    layout->composition.natoms = in.natoms;
  }
  layout->mole_keys.push_back(mole_key(counts, charge, spin, task));

  // One upload of the normalisers and the element references; each atom's
  // energy shift is looked up on the device (ghosts: none), and the system's
  // shift is their sum.
  const auto& out = model_->outputs(task);
  const int64_t Z = model_->config().backbone.max_num_elements;
  std::vector<double> refs(Z, 0.0);
  for (int64_t z = 0; z < Z && out.element_references.defined(); ++z)
    refs[z] = out.element_references.accessor<double, 1>()[z];  // host data
  layout->upload_constants({out.energy_rmsd, 0.0, out.forces_rmsd, out.stress_rmsd, out.stress_mean}, refs,
                           options_.device);
  auto shift = layout->atom_shift.index_select(0, atoms.numbers) + out.energy_mean / static_cast<double>(total);
  if (n_owned < N) shift.narrow(0, n_owned, N - n_owned).zero_();
  layout->atom_shift = shift;
  layout->energy_shift = shift.sum().view({1});
  return layout;
}

void Engine::connect_collectives(BatchTensors& in, const LocalAtoms& piece) {
  in.reduce = in.exchange = nullptr;
  in.share = nullptr;
  if (piece.sum_over_processes) {
    in.reduce = [this, sum = piece.sum_over_processes](const torch::Tensor& x) {
      return stages_.cut(x, sum, sum);   // the gradient of a sum over processes is the sum of the gradients
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

nn::MoleContext Engine::mole_context(const Layout& layout, const torch::Tensor& system_emb,
                                     const std::vector<int64_t>& edge_rows) {
  nn::MoleContext ctx;
  auto backbone = model_->backbone();
  if (backbone->config().num_experts == 0) return ctx;
  ctx.row_offsets = edge_rows;
  const auto& keys = layout.mole_keys;
  bool uniform = options_.merge_mole;
  for (size_t b = 1; b < keys.size() && uniform; ++b) uniform = keys[b] == keys[0];
  if (!uniform) {
    ctx.coefficients = backbone->expert_coefficients(layout.composition, system_emb);
    return ctx;
  }
  if (!merged_ || keys[0] != merged_key_) {
    torch::NoGradGuard no_grad;
    auto coeff = backbone->expert_coefficients(layout.composition, system_emb)[0];
    for (auto& layer : backbone->mole_layers()) layer->set_merged(coeff);
    merged_key_ = keys[0];
    merged_ = true;
    ++merges_;
  }
  ctx.use_merged = true;
  return ctx;
}

torch::Tensor Engine::system_sum(const torch::Tensor& x, const std::vector<int64_t>& offsets,
                                 const torch::Tensor& lengths) const {
  const int64_t B = static_cast<int64_t>(offsets.size()) - 1;
  if (B == 1) return x.narrow(0, 0, offsets[1]).sum(0, /*keepdim=*/true);
  return torch::segment_reduce(x, "sum", lengths, /*indices=*/{}, /*offsets=*/{}, /*axis=*/0,
                               /*unsafe=*/true, /*initial=*/0);
}

Evaluation Engine::run(const Layout& layout, const Geometry& geo) {
  const auto dopts = torch::TensorOptions().dtype(torch::kFloat64).device(options_.device);
  const auto fopts = torch::TensorOptions().dtype(options_.dtype).device(options_.device);
  const BatchTensors& in = layout.in;
  const auto& pos = geo.positions;
  const int64_t B = static_cast<int64_t>(geo.graph.size());
  const int64_t N = pos.size(0);

  stages_.clear();   // cuts of an evaluation that failed half-way
  RadiusGraph graph = graph_.build(pos, geo.cells, geo.graph);
  if (graph.row_offsets != edge_block_offsets_) {   // the capacities changed: new block lengths
    std::vector<int64_t> lengths;
    for (int64_t b = 0; b < B; ++b) lengths.push_back(graph.row_offsets[b + 1] - graph.row_offsets[b]);
    edge_block_lengths_ = upload(lengths, dopts.dtype(torch::kLong));
    edge_block_offsets_ = graph.row_offsets;
  }
  // The edge vectors are the leaves the energy is differentiated by: forces
  // and virials both follow from dE/dr_edge.
  torch::Tensor vec = edge_vectors(pos, graph, geo.cells);
  vec.requires_grad_(true);
  EdgeInput edges{graph.src, graph.tgt, graph.valid, graph.edge_system, vec, graph.row_offsets, {}};
  const int64_t edge_slots = graph.src.size(0);
  if (plans_ == 0 || plan_.nodes != N || plan_.edges != edge_slots) {
    plan_ = plan_memory(memory_model_, N, edge_slots, budget_, options_.recompute_chunk);
    ++plans_;
  }
  edges.recompute_chunk = plan_.recompute ? plan_.chunk_edges : 0;
  edges.backend = edge_backend_;
  if (!layout.layer_targets.empty()) {
    // Edges are ordered by target: those into atoms [0, t) are a prefix.
    // One counted read of L numbers sizes the per-block edge sets.
    std::vector<torch::Tensor> counts;
    for (int64_t t : layout.layer_targets) counts.push_back((graph.valid & (graph.tgt < t)).sum());
    auto host = to_host(torch::stack(counts));
    edges.layer_edges.assign(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());  // host data
    // Never an empty edge set: an extra edge into an atom past the prefix
    // only changes features nothing reads afterwards.
    for (auto& n : edges.layer_edges) n = std::max<int64_t>(n, 1);
  }
  if (edge_backend_->skips_padding() && B == 1 && !in.exchange)
    skip_padding_slots(graph, model_->config().backbone.num_layers, edges);

  auto backbone = model_->backbone();
  auto system_emb = backbone->system_embedding(in);
  auto ctx = mole_context(layout, system_emb, graph.row_offsets);
  auto raw_atom = model_->atom_energies(in, edges, system_emb, ctx).to(torch::kFloat64);  // [N]
  if (in.owned >= 0)   // ghosts carry no energy of their own
    raw_atom = torch::cat({raw_atom.narrow(0, 0, in.owned),
                           torch::zeros({N - in.owned}, dopts)});
  auto raw_energy = system_sum(raw_atom, in.atom_offsets, in.natoms);
  // [E, 3] dE/dr_edge; stage by stage where the model called collectives,
  // which then run here, on this thread (staged_backward.h).
  auto g = stages_.grad(raw_energy.sum(), {vec})[0];

  Evaluation ev;
  const auto& escale = layout.energy_scale;
  ev.energy = raw_energy * escale + layout.energy_shift;
  ev.atom_energy = raw_atom * (B == 1 ? escale : escale.index_select(0, in.batch)) + layout.atom_shift;
  const auto& fscale = layout.force_scale;
  auto edge_fscale = B == 1 ? fscale.to(options_.dtype) : fscale.to(options_.dtype).index_select(0, graph.edge_system);
  auto pair_force = g * edge_fscale.unsqueeze(1);
  ev.forces = torch::zeros({N, 3}, fopts).index_add(0, graph.tgt, pair_force)
                  .index_add(0, graph.src, -pair_force);
  if (options_.stress || options_.atom_virial) {
    // dE/d strain = sum_edges r (x) dE/dr; the virial W = -dE/d strain.
    auto r_g = vec.detach().to(torch::kFloat64).unsqueeze(2) * g.to(torch::kFloat64).unsqueeze(1);
    auto de_dstrain = system_sum(r_g, graph.row_offsets, edge_block_lengths_);
    de_dstrain = (de_dstrain + de_dstrain.transpose(1, 2)) / 2;
    ev.virial = -de_dstrain * fscale.view({B, 1, 1});
    if (options_.stress && in.owned < 0)
      ev.stress = de_dstrain * (geo.inv_volume * layout.stress_scale).view({B, 1, 1}) +
                  layout.stress_shift.view({B, 1, 1});
    if (options_.atom_virial) {
      auto edge_half = B == 1 ? fscale * -0.5 : fscale.index_select(0, graph.edge_system) * -0.5;
      auto w = r_g * edge_half.view({-1, 1, 1});
      w = (w + w.transpose(1, 2)) / 2;
      ev.atom_virial = torch::zeros({N, 3, 3}, dopts).index_add(0, graph.src, w).index_add(0, graph.tgt, w);
    }
  }
  ev.edge_counts = graph.counts;
  ev.close_atoms = graph.close_atoms;
  ev.nonfinite = geo.nonfinite;
  ev.graph_sizes = graph.sizes;
  ev.capacities = graph_.capacities();
  return ev;
}

Evaluation Engine::evaluate(const std::vector<Atoms>& systems) {
  validate(systems);
  const auto fopts = torch::TensorOptions().dtype(options_.dtype).device(options_.device);
  const Layout& layout = whole_layout(systems);
  const Geometry geo = upload_geometry(geometry_of(systems), fopts, staging_);
  return options_.cuda_graph ? run_or_replay(layout, geo) : run(layout, geo);
}

// The device inputs of a captured step (copied into on every replay), the
// outputs it leaves, and what its kernels read that a later eager step may
// replace: the layout's constants, the graph's bin tables, the edge block
// lengths.
struct Engine::Replay {
  Geometry geo;
  Evaluation ev;
  std::unique_ptr<CudaGraph> graph;
  std::shared_ptr<const Layout> layout;
  std::shared_ptr<const void> graph_tables;
  torch::Tensor edge_block_lengths;
};

Engine::~Engine() = default;

void Engine::update_weights(const std::function<void(UmaModel&)>& copy) {
  copy(model_);
  merged_ = false;
  replays_.invalidate();
}

std::vector<int64_t> Engine::replay_epoch() const {
  std::vector<int64_t> epoch{layouts_, merges_, plans_, int64_t(merged_), int64_t(options_.stress),
                             plan_.recompute ? plan_.chunk_edges : 0};
  for (const auto& c : graph_.graph_capacities()) epoch.insert(epoch.end(), {c.edges, c.candidates, c.neighbors, c.free_bins});
  return epoch;
}

std::vector<int64_t> Engine::replay_key(const Geometry& geo) const {
  std::vector<int64_t> key{int64_t(options_.atom_virial)};
  const auto graph = graph_.plan_key(geo.graph);
  key.insert(key.end(), graph.begin(), graph.end());
  return key;
}

Evaluation Engine::run_or_replay(const Layout& layout, const Geometry& geo) {
  switch (replays_.next(replay_epoch(), replay_key(geo))) {
    case ReplayCache<Replay>::Action::kEager:
      return run(layout, geo);
    case ReplayCache<Replay>::Action::kReplay: {
      Replay& r = replays_.current();
      torch::NoGradGuard no_grad;   // the step's inputs into the graph's, on the device
      r.geo.positions.copy_(geo.positions);   // same device
      r.geo.cells.copy_(geo.cells);           // same device
      r.geo.inv_volume.copy_(geo.inv_volume); // same device
      r.geo.nonfinite.copy_(geo.nonfinite);   // same device
      r.graph->replay();
      return r.ev;
    }
    case ReplayCache<Replay>::Action::kCapture:
      break;
  }
  auto r = std::make_unique<Replay>();
  r->geo = geo;   // the graph reads its own copies of the step's device inputs
  r->geo.positions = geo.positions.clone();
  r->geo.cells = geo.cells.clone();
  r->geo.inv_volume = geo.inv_volume.clone();
  r->geo.nonfinite = geo.nonfinite.clone();
  try {
    r->graph = CudaGraph::capture(options_.device, [&] { r->ev = run(layout, r->geo); });
  } catch (const Error& e) {
    replays_.refused(e.what());
    return run(layout, geo);
  }
  r->layout = layout_;   // whole_layout()'s: `layout`
  r->graph_tables = graph_.device_tables();
  r->edge_block_lengths = edge_block_lengths_;
  const double bytes = r->graph->pool_bytes();
  Replay& held = replays_.captured(std::move(r), bytes);
  held.graph->replay();
  return held.ev;
}

void Engine::validate_local(const LocalAtoms& piece) const {
  const auto& cfg = model_->config();
  const int64_t Z = cfg.backbone.max_num_elements;
  const int64_t N = atom_count(piece);
  const bool empty = N == 0;
  if (piece.on_device.defined()) {
    if (!piece.numbers.empty()) throw Error("atomic numbers given both on the host and on the device");
    if (!empty) check_device_atoms(piece.on_device, piece.positions, options_.device, "");
  }
  if (piece.n_owned < 0 || piece.n_owned > N) throw Error("n_owned must be within 0..number of atoms");
  if (!piece.positions.defined() || piece.positions.dim() != 2 || piece.positions.size(0) != N ||
      piece.positions.size(1) != 3)
    throw Error("positions must have shape [" + std::to_string(N) + ", 3]");
  int64_t total = 0;
  for (int64_t c : piece.composition) total += c;
  if (total == 0 || static_cast<int64_t>(piece.composition.size()) > Z)
    throw Error("the composition must count at least one atom and only atomic numbers the model covers");
  Atoms check;   // charge, spin, task and atomic numbers are validated like a whole system
  check.numbers = piece.numbers.empty() ? std::vector<int64_t>{1} : piece.numbers;   // device: checked by the caller
  check.positions = torch::zeros({static_cast<int64_t>(check.numbers.size()), 3});
  check.charge = piece.charge;
  check.spin = piece.spin;
  check.task = piece.task;
  validate({check});
  const int64_t targets = empty ? 1 : piece.n_targets;
  if (targets >= 0 && targets < piece.n_owned) throw Error("n_targets must include every owned atom");
  if (piece.exchange_ghosts && !empty && (targets > piece.n_owned || !piece.layer_targets.empty()))
    throw Error("with the halo exchange only owned atoms receive messages (n_targets = n_owned, "
                "no layer_targets)");
  if (!piece.layer_targets.empty() && static_cast<int64_t>(piece.layer_targets.size()) != cfg.backbone.num_layers)
    throw Error("layer_targets needs one entry per block (" + std::to_string(cfg.backbone.num_layers) + ")");
  if (!piece.on_device.defined() && piece.positions.device().is_cpu()) {
    const auto pos = piece.positions.to(torch::kFloat64).contiguous();
    const double* p = pos.data_ptr<double>();   // host data
    for (int64_t i = 0; i < pos.numel(); ++i)
      if (!std::isfinite(p[i])) throw Error("positions contain NaN or infinite values");
  }
}

Evaluation Engine::evaluate_local(const LocalAtoms& piece) {
  validate_local(piece);
  const auto fopts = torch::TensorOptions().dtype(options_.dtype).device(options_.device);
  int64_t N = atom_count(piece);
  const bool empty = N == 0;   // runs on a placeholder atom (see local_layout)
  int64_t targets = empty ? 1 : piece.n_targets;
  if (piece.exchange_ghosts && !empty) targets = piece.n_owned;

  SystemGeometry sys{piece.positions, Matrix3{}, {false, false, false}, targets,
                     piece.on_device.defined(), piece.on_device.origin};
  if (empty) {
    sys.in_place = false;   // the placeholder atom (see local_layout)
    sys.positions = torch::zeros({1, 3}, torch::kFloat64);
    N = 1;
  }
  const Layout& layout = local_layout(piece, N);
  const Geometry geo = upload_geometry({sys}, fopts, staging_);
  Evaluation ev = run(layout, geo);
  if (empty) {   // drop the placeholder
    ev.atom_energy = ev.atom_energy.narrow(0, 0, 0);
    ev.forces = ev.forces.narrow(0, 0, 0);
    if (ev.atom_virial.defined()) ev.atom_virial = ev.atom_virial.narrow(0, 0, 0);
  }
  return ev;
}

bool Engine::fetch(const Evaluation& ev, const ReadRequest& what, HostEvaluation& out) {
  // [counts B | close atoms (4) | nonfinite | requested results...], as float64
  const int64_t B = ev.edge_counts.numel();
  std::vector<torch::Tensor> parts{ev.edge_counts.to(torch::kFloat64), ev.close_atoms,
                                   ev.nonfinite.view({1}).to(torch::kFloat64)};
  auto want = [&](bool asked, const torch::Tensor& t) {
    const bool take = asked && t.defined();
    if (take) parts.push_back(t.reshape({-1}).to(torch::kFloat64));
    return take;
  };
  const bool energy = want(what.energy, ev.energy);
  const bool forces = want(what.forces, ev.forces);
  const bool atom_energy = want(what.atom_energy, ev.atom_energy);
  const bool stress = want(what.stress, ev.stress);
  const bool virial = want(what.virial, ev.virial);
  const bool atom_virial = want(what.atom_virial, ev.atom_virial);
  const auto host = to_host(torch::cat(parts));
  const double* v = host.data_ptr<double>();   // host data

  std::vector<int64_t> counts(v, v + B);
  bool overflow = false;
  for (int64_t b = 0; b < B; ++b) overflow |= counts[b] > ev.capacities[b];
  if (v[B + 4] > 0) throw Error("positions contain NaN or infinite values");
  if (overflow) {
    graph_.grow(counts, ev.graph_sizes);
    return false;
  }
  if (v[B] > 0)
    throw CloseAtomsError(static_cast<int64_t>(v[B + 1]), static_cast<int64_t>(v[B + 2]), v[B + 3], kMinAtomDistance);
  out = HostEvaluation();
  out.edges = counts;
  int64_t at = B + 5;
  auto take = [&](const torch::Tensor& like) {   // the next block, shaped like `like`
    auto t = host.narrow(0, at, like.numel()).view(like.sizes());
    at += like.numel();
    return t;
  };
  if (energy) {
    out.energy.assign(v + at, v + at + ev.energy.numel());
    at += ev.energy.numel();
  }
  if (forces) out.forces = take(ev.forces);
  if (atom_energy) out.atom_energy = take(ev.atom_energy);
  if (stress) out.stress = take(ev.stress);
  if (virial) out.virial = take(ev.virial);
  if (atom_virial) out.atom_virial = take(ev.atom_virial);
  return true;
}

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return {torch::kFloat32, false};
  if (name == "fp64") return {torch::kFloat64, false};
  if (name == "tf32") return {torch::kFloat32, true};
  throw Error("precision must be fp32, fp64 or tf32, got '" + name + "'");
}

Error capacity_exhausted() {
  return Error("the neighbour graph still overflowed its capacity after " + std::to_string(kCapacityAttempts) +
               " builds, each grown to what the previous one found: the atoms' neighbour counts keep jumping "
               "(atoms collapsing onto each other, or a cell shrinking fast); no result was computed");
}

HostEvaluation Engine::evaluate_checked(const std::vector<Atoms>& systems) {
  HostEvaluation out;
  until_capacity_fits([&] { return fetch(evaluate(systems), ReadRequest::all(), out); });
  return out;
}

}  // namespace uma
