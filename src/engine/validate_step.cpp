// The checks of a step's input (Engine::validate and validate_systems):
// every problem is refused with a message before anything is computed.
#include <cmath>
#include <numeric>
#include <string>

#include "graph/batch.h"
#include "engine/engine.h"
#include "core/uma_error.h"

namespace uma {
namespace {

bool any_periodic(const Atoms& a) { return a.pbc[0] || a.pbc[1] || a.pbc[2]; }

// Device atoms must be where the model is, in the types the engine reads.
void check_device_atoms(const Atoms& a, const torch::Device& device) {
  const DeviceAtoms& d = a.on_device;
  if (!a.numbers.empty()) throw Error("atomic numbers given both on the host and on the device");
  if (d.numbers.dim() != 1 || d.numbers.scalar_type() != torch::kLong ||
      d.numbers.device() != device)
    throw Error("device atomic numbers must be a 1-D int64 tensor on " + device.str());
  if (!a.positions.defined() || a.positions.device() != device ||
      a.positions.scalar_type() != torch::kFloat64)
    throw Error("positions of device atoms must be float64 on " + device.str());
}

// A piece's own checks (its charge, spin, task and atomic numbers are
// checked like a whole system's).
void validate_piece(const ModelConfig& cfg, const Atoms& a, const torch::Device& device) {
  const Piece& p = a.piece;
  const int64_t Z = cfg.backbone.max_num_elements;
  const int64_t N = atom_count(a);
  const bool empty = N == 0;
  if (a.on_device.defined() && !empty) check_device_atoms(a, device);
  if (p.n_owned > N) throw Error("n_owned must be within 0..number of atoms");
  if (!a.positions.defined() || a.positions.dim() != 2 || a.positions.size(0) != N ||
      a.positions.size(1) != 3)
    throw Error("positions must have shape [" + std::to_string(N) + ", 3]");
  const int64_t total = std::accumulate(p.composition.begin(), p.composition.end(), int64_t{0});
  if (total == 0 || static_cast<int64_t>(p.composition.size()) > Z)
    throw Error(
        "the composition must count at least one atom and only atomic numbers the model covers");
  const int64_t targets = empty ? 1 : p.n_targets;
  if (targets >= 0 && targets < p.n_owned) throw Error("n_targets must include every owned atom");
  if (p.exchange_ghosts && !empty && (targets > p.n_owned || !p.layer_targets.empty()))
    throw Error(
        "with the halo exchange only owned atoms receive messages (n_targets = n_owned, "
        "no layer_targets)");
  if (!p.layer_targets.empty() &&
      static_cast<int64_t>(p.layer_targets.size()) != cfg.backbone.num_layers)
    throw Error("layer_targets needs one entry per block (" +
                std::to_string(cfg.backbone.num_layers) + ")");
  if (!a.on_device.defined() && a.positions.device().is_cpu()) {
    const auto pos = a.positions.to(torch::kFloat64).contiguous();
    const double* v = pos.data_ptr<double>();  // host data
    for (int64_t i = 0; i < pos.numel(); ++i)
      if (!std::isfinite(v[i])) throw Error("positions contain NaN or infinite values");
  }
}

// What a system and a piece share: host atomic numbers the model covers,
// a task it has, a charge and spin its embeddings cover.
void validate_labels(const UmaModel& model, const Atoms& a, const std::string& where) {
  const auto& cfg = model->config();
  for (int64_t z : a.numbers)
    if (z < 1 || z >= cfg.backbone.max_num_elements)
      throw Error(where + "atomic number " + std::to_string(z) +
                  " is not covered by the model (1.." +
                  std::to_string(cfg.backbone.max_num_elements - 1) + ")");
  if (!model->has_dataset(a.task))
    throw Error(where + cfg.unknown_task(a.task));
  try {
    validate_charge_spin(a.task, a.charge, a.spin);
  } catch (const Error& e) {
    throw Error(where + e.what());
  }
}

}  // namespace

void Engine::validate(const std::vector<Atoms>& step) const {
  if (step.size() > 1)
    for (const Atoms& a : step) {
      if (a.on_device.defined())
        throw Error("atoms on the device are evaluated one system at a time");
      if (a.piece.defined()) throw Error("a piece of a decomposed system is evaluated alone");
    }
  if (step.size() == 1 && step[0].piece.defined()) {
    validate_piece(model_->config(), step[0], options_.device);
    validate_labels(model_, step[0], "");
    return;
  }
  validate_systems(model_, step);
  for (const Atoms& a : step)
    if (a.on_device.defined()) check_device_atoms(a, options_.device);
}

void validate_systems(const UmaModel& model, const std::vector<Atoms>& systems) {
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
    validate_labels(model, a, where);
    for (const auto& row : a.cell)
      for (double v : row)
        if (!std::isfinite(v)) throw Error(where + "the cell contains NaN or infinite values");
    if (any_periodic(a)) {
      const Matrix3 cell = graph_cell(a.cell, a.pbc);
      if (!(cell_volume(cell) >= 1e-6))
        throw Error(where + "the cell has zero volume along its periodic directions");
      // Thinner cells would need (cutoff / spacing)^3 periodic images.
      const auto spacing = plane_spacings(cell);
      for (int k = 0; k < 3; ++k)
        if (a.pbc[k] && spacing[k] < kMinPlaneSpacing)
          throw Error(
              where + "the cell's lattice planes along periodic direction " + "abc"[k] + " are " +
              std::to_string(spacing[k]) + " A apart, below the " +
              format_number(kMinPlaneSpacing) +
              " A minimum (the periodic images within the cutoff would explode); use a larger or "
              "less skewed cell");
    }
  }
}

}  // namespace uma
