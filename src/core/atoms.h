// The one input type of an evaluation step: a system's atoms as the caller
// holds them.  A step is a list of Atoms (several systems are batched); the
// atomic numbers live on the host or on the model's device (DeviceAtoms),
// and an Atoms is a whole system or one process's share of a system
// decomposed in space (Piece).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/matrix3.h"

namespace uma {

// For callers whose atoms already live on the model's device (pair_style
// uma/kk wraps LAMMPS's Kokkos views): the atomic numbers as a device tensor
// instead of a host vector, and positions used where they are (no staging
// copy; they must be on the model's device, float64).  The caller names its
// layout (atoms, their order and numbers) with `layout_id`; the engine builds
// its per-layout constants (one counted read and two uploads) only when the
// id changes, so the caller must change it whenever the numbers may have.
struct DeviceAtoms {
  torch::Tensor numbers;  // [n] int64 on the model's device; undefined: not used
  int64_t layout_id = -1;
  // Subtracted from the positions (float64, on the device) before anything
  // else: keeps float32 models accurate far from the origin.
  std::array<double, 3> origin{0.0, 0.0, 0.0};
  bool defined() const { return numbers.defined(); }
};

// One process's share of one system decomposed in space, as LAMMPS holds it:
// owned atoms first, then ghost atoms (real-space images of other atoms), no
// periodicity (the cell and pbc of its Atoms are not used).  The energy is
// the sum over the owned atoms; summing energy, forces (ghost rows folded
// onto their owners) and virials over all processes gives the whole
// system's.  The ghosts must cover either
//  - one cutoff around the owned atoms, with exchange_ghosts set (the halo
//    exchange: messages go into owned atoms only, and the ghosts' node
//    features are refreshed from their owners after every block), or
//  - (layers + 1) x cutoff, without it (every atom whose features reach an
//    owned atom is computed here; n_targets and layer_targets prune that).
// A process without atoms still takes part in every collective: it gives
// no positions ([0, 3]) and the engine runs it on a placeholder atom.
struct Piece {
  int64_t n_owned = -1;  // -1: not a piece (a whole system)
  // Atoms [0, n_targets) receive messages; the rest (ghosts farther than
  // layers x cutoff from every owned atom) only send them.  -1: all receive.
  int64_t n_targets = -1;
  // Block k (0-based) sends messages only into atoms [0, layer_targets[k]),
  // those whose features still reach an owned atom (ordered by hops from the
  // owned atoms).  Empty: into all n_targets.
  std::vector<int64_t> layer_targets;
  std::vector<int64_t> composition;  // atoms of each atomic number in the whole system
  // Sum over all processes of a small tensor (a collective); needed by
  // models that balance charge/spin channels.  Unset: this process holds
  // everything.  The engine differentiates through it (the gradient of the
  // sum is the sum of the gradients) and calls it only from the thread that
  // called evaluate(), never from inside an autograd pass.
  std::function<torch::Tensor(const torch::Tensor&)> sum_over_processes;
  // Halo exchange of node features [N, 9, C] (N = n_owned + ghosts; a
  // process without atoms gets one placeholder row).  Both directions are
  // collectives, called the same number of times on every process (once per
  // block each), from the thread that called evaluate() and never from
  // inside an autograd pass (staged_backward.h); neither needs autograd.
  // Requires n_targets = n_owned (or -1) and no layer_targets.
  struct GhostExchange {
    // The rows with every ghost row replaced by its owner's current row.
    std::function<torch::Tensor(const torch::Tensor&)> owners_to_ghosts;
    // Gradient rows with each ghost row's gradient added into its owner's
    // row, and the ghost rows zero.
    std::function<torch::Tensor(const torch::Tensor&)> ghosts_to_owners;
    explicit operator bool() const { return static_cast<bool>(owners_to_ghosts); }
  } exchange_ghosts;
  bool defined() const { return n_owned >= 0; }
};

// One system, or one process's share of one.
struct Atoms {
  std::vector<int64_t> numbers;  // atomic numbers (empty with on_device)
  torch::Tensor positions;       // [N, 3] Angstrom (any device/dtype)
  Matrix3 cell{};                // rows are lattice vectors
  std::array<bool, 3> pbc{false, false, false};
  int64_t charge = 0;
  int64_t spin = 0;       // spin multiplicity (omol); 0 elsewhere
  std::string task;       // dataset head, e.g. "omat"
  DeviceAtoms on_device;  // set: the atoms live on the model's device (see DeviceAtoms)
  Piece piece;            // set: one process's share of a system (see Piece)
};

// Atoms of a system or piece, whichever way they were given.
int64_t atom_count(const Atoms& a);

}  // namespace uma
