#include "engine.h"

#include <malloc.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

#include "error.h"
#include "host_reads.h"

namespace uma {
namespace {

double volume(const Matrix3& c) {
  return std::abs(c[0][0] * (c[1][1] * c[2][2] - c[1][2] * c[2][1]) -
                  c[0][1] * (c[1][0] * c[2][2] - c[1][2] * c[2][0]) +
                  c[0][2] * (c[1][0] * c[2][1] - c[1][1] * c[2][0]));
}

Matrix3 inverse(const Matrix3& m) {
  const double det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                     m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                     m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  Matrix3 r{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      const int i1 = (j + 1) % 3, i2 = (j + 2) % 3, j1 = (i + 1) % 3, j2 = (i + 2) % 3;
      r[i][j] = (m[i1][j1] * m[i2][j2] - m[i1][j2] * m[i2][j1]) / det;
    }
  return r;
}

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

void Engine::validate(const std::vector<Atoms>& systems) const {
  const auto& cfg = model_->config();
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
    if (!model_->has_dataset(a.task)) {
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
    if (any_periodic(a) && !(volume(graph_cell(a.cell, a.pbc)) >= 1e-6))
      throw Error(where + "the cell has zero volume along its periodic directions");
  }
}

nn::MoleContext Engine::mole_context(const BatchTensors& in, const torch::Tensor& system_emb,
                                     const std::vector<Atoms>& systems,
                                     const std::vector<int64_t>& edge_rows) {
  nn::MoleContext ctx;
  auto backbone = model_->backbone();
  if (backbone->config().num_experts == 0) return ctx;
  ctx.row_offsets = edge_rows;

  // Key: element counts, charge, spin and task of every system.
  auto key_of = [&](const Atoms& a) {
    std::vector<int64_t> key(backbone->config().max_num_elements + 3, 0);
    for (int64_t z : a.numbers) ++key[z];
    key[key.size() - 3] = a.charge;
    key[key.size() - 2] = a.spin;
    const auto names = model_->config().dataset_names();
    key[key.size() - 1] = std::find(names.begin(), names.end(), a.task) - names.begin();
    return key;
  };
  const auto key = key_of(systems[0]);
  bool uniform = options_.merge_mole;
  for (size_t b = 1; b < systems.size() && uniform; ++b) uniform = key_of(systems[b]) == key;
  if (!uniform) {
    ctx.coefficients = backbone->expert_coefficients(in, system_emb);
    return ctx;
  }
  if (!merged_ || key != merged_key_) {
    torch::NoGradGuard no_grad;
    auto coeff = backbone->expert_coefficients(in, system_emb)[0];
    for (auto& layer : backbone->mole_layers()) layer->set_merged(coeff);
    merged_key_ = key;
    merged_ = true;
    ++merges_;
  }
  ctx.use_merged = true;
  return ctx;
}

Evaluation Engine::evaluate(const std::vector<Atoms>& systems) {
  validate(systems);
  const auto fopts = torch::TensorOptions().dtype(options_.dtype).device(options_.device);
  const auto lopts = torch::TensorOptions().dtype(torch::kLong).device(options_.device);
  const auto dopts = torch::TensorOptions().dtype(torch::kFloat64).device(options_.device);
  const int64_t B = static_cast<int64_t>(systems.size());

  BatchTensors in;
  std::vector<torch::Tensor> pos_parts;
  std::vector<int64_t> numbers, batch, natoms, charge, spin;
  std::vector<double> cells, energy_scale, energy_shift, force_scale, stress_scale,
      stress_shift, atom_shift, inv_volume;
  std::vector<GraphSystem> gsys;
  in.atom_offsets.push_back(0);
  for (int64_t b = 0; b < B; ++b) {
    const Atoms& a = systems[b];
    const int64_t n = static_cast<int64_t>(a.numbers.size());
    const auto& out = model_->outputs(a.task);
    pos_parts.push_back(a.positions.to(fopts));
    numbers.insert(numbers.end(), a.numbers.begin(), a.numbers.end());
    batch.insert(batch.end(), n, b);
    natoms.push_back(n);
    charge.push_back(a.charge);
    spin.push_back(a.spin);
    in.datasets.push_back(a.task);
    in.atom_offsets.push_back(in.atom_offsets.back() + n);
    for (const auto& row : a.cell) cells.insert(cells.end(), row.begin(), row.end());
    double refs = 0;
    for (int64_t z : a.numbers) {
      const double r = out.element_references.defined()
                           ? out.element_references.data_ptr<double>()[z] : 0.0;
      refs += r;
      atom_shift.push_back(r + out.energy_mean / n);
    }
    energy_scale.push_back(out.energy_rmsd);
    energy_shift.push_back(out.energy_mean + refs);
    force_scale.push_back(out.forces_rmsd);
    stress_scale.push_back(out.stress_rmsd);
    stress_shift.push_back(out.stress_mean);
    const double v = volume(a.cell);
    inv_volume.push_back(v > 1e-6 ? 1.0 / v : std::nan(""));
    gsys.push_back({in.atom_offsets[b], n, graph_cell(a.cell, a.pbc), a.pbc});
  }

  auto pos = torch::cat(pos_parts, 0).requires_grad_(true);
  in.cell = host_doubles(cells, dopts).to(fopts).view({B, 3, 3}).requires_grad_(options_.stress);
  in.numbers = torch::tensor(numbers, torch::kLong).to(lopts);
  in.batch = torch::tensor(batch, torch::kLong).to(lopts);
  in.natoms = torch::tensor(natoms, torch::kLong).to(lopts);
  in.charge = torch::tensor(charge, torch::kLong).to(lopts);
  in.spin = torch::tensor(spin, torch::kLong).to(lopts);

  // Wrap into the cell along periodic directions (integer shifts carry no gradient).
  std::vector<double> inverse_cells, periodic;
  for (const auto& g : gsys) {
    const Matrix3 inv = inverse(g.cell);
    for (const auto& row : inv) inverse_cells.insert(inverse_cells.end(), row.begin(), row.end());
    for (int k = 0; k < 3; ++k) periodic.push_back(g.pbc[k] ? 1.0 : 0.0);
  }
  torch::Tensor image;
  {
    torch::NoGradGuard no_grad;
    auto inv = host_doubles(inverse_cells, dopts).view({B, 3, 3}).index_select(0, in.batch);
    auto frac = torch::bmm(pos.detach().to(torch::kFloat64).unsqueeze(1), inv).squeeze(1);
    image = (torch::floor(frac) * host_doubles(periodic, dopts).view({B, 3}).index_select(0, in.batch))
                .to(options_.dtype);
  }
  in.pos = pos - torch::bmm(image.unsqueeze(1), in.cell.index_select(0, in.batch)).squeeze(1);

  RadiusGraph graph = graph_.build(in.pos, gsys);
  EdgeInput edges{graph.src, graph.tgt, graph.offsets, graph.valid, graph.edge_system, graph.row_offsets};

  auto backbone = model_->backbone();
  auto system_emb = backbone->system_embedding(in);
  auto ctx = mole_context(in, system_emb, systems, graph.row_offsets);
  auto raw_atom = model_->atom_energies(in, edges, system_emb, ctx);              // [N]
  auto raw_energy = torch::zeros({B}, dopts).index_add(0, in.batch, raw_atom.to(torch::kFloat64));

  std::vector<torch::Tensor> wrt{pos};
  if (options_.stress) wrt.push_back(in.cell);
  auto grads = torch::autograd::grad({raw_energy.sum()}, wrt, {}, false, false, true);

  Evaluation ev;
  auto escale = host_doubles(energy_scale, dopts);
  ev.energy = raw_energy * escale + host_doubles(energy_shift, dopts);
  ev.atom_energy = raw_atom.to(torch::kFloat64) * escale.index_select(0, in.batch) +
                   host_doubles(atom_shift, dopts);
  auto fscale = host_doubles(force_scale, dopts).to(options_.dtype).index_select(0, in.batch);
  ev.forces = -grads[0] * fscale.unsqueeze(1);
  if (options_.stress) {
    // virial = sym(sum_i g_i (x) r_i + cell^T g_cell); stress = virial / V
    auto per_atom = (grads[0].unsqueeze(2) * pos.detach().unsqueeze(1)).to(torch::kFloat64);
    auto pos_virial = torch::zeros({B, 3, 3}, dopts).index_add(0, in.batch, per_atom);
    auto cell_virial = torch::bmm(in.cell.detach().transpose(1, 2), grads[1]).to(torch::kFloat64);
    auto virial = (pos_virial + pos_virial.transpose(1, 2) + cell_virial + cell_virial.transpose(1, 2)) / 2;
    ev.stress = virial * (host_doubles(inv_volume, dopts) * host_doubles(stress_scale, dopts)).view({B, 1, 1}) +
                host_doubles(stress_shift, dopts).view({B, 1, 1});
  }
  ev.edge_counts = graph.counts;
  ev.coincident = graph.coincident;
  ev.capacities = graph_.capacities();
  return ev;
}

HostEvaluation Engine::evaluate_checked(const std::vector<Atoms>& systems) {
  for (int attempt = 0;; ++attempt) {
    Evaluation ev = evaluate(systems);
    auto counts = to_host(ev.edge_counts);
    std::vector<int64_t> c(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel());
    bool overflow = false;
    for (size_t b = 0; b < c.size(); ++b) overflow |= c[b] > ev.capacities[b];
    if (overflow) {
      if (attempt > 2) throw Error("internal: edge capacity did not converge");
      graph_.grow(c);
      continue;
    }
    if (read_int(ev.coincident) > 0)
      throw Error("two or more atoms sit at the same position (distance 0)");
    HostEvaluation out;
    auto e = to_host(ev.energy);
    out.energy.assign(e.data_ptr<double>(), e.data_ptr<double>() + e.numel());
    out.atom_energy = to_host(ev.atom_energy);
    out.forces = to_host(ev.forces).to(torch::kFloat64);
    if (ev.stress.defined()) out.stress = to_host(ev.stress);
    out.edges = c;
    return out;
  }
}

}  // namespace uma
