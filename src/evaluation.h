// What an evaluation step computes, what it leaves on the device, and what
// its one packed read brings to the host.  A new output is one flag here,
// its computation (Engine's run) and its registration in the read
// (Engine::read: one PackedRead field).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace uma {

// The outputs a step is asked for: computed, then read.  Energies, per-atom
// energies, forces and (whole systems) stress and virial are always
// computed; the flags say which of them the read copies.  Per-atom virials
// are computed only when asked for.
struct Request {
  bool energy = true;
  bool forces = true;
  bool atom_energy = false;
  bool stress = false;
  bool virial = false;
  bool atom_virial = false;
  static Request all() { return {true, true, true, true, true, true}; }
  // All but the per-atom virials, which cost one more pass over the edges.
  static Request all_but_atom_virial() { return {true, true, true, true, true, false}; }
};

// Device tensors; energies in eV (float64), forces eV/A, stress eV/A^3
// (+ (1/V) dE/d strain; NaN for systems with a zero-volume cell), virials in
// eV with LAMMPS's sign (W = sum r (x) f = -V stress).
struct Evaluation {
  Request request;            // what the step was asked for (read() reads it)
  torch::Tensor energy;       // [B] float64
  torch::Tensor atom_energy;  // [N] float64, sums to energy (ghosts: 0)
  torch::Tensor forces;       // [N, 3]
  torch::Tensor stress;       // [B, 3, 3] or undefined (pieces: undefined)
  torch::Tensor virial;       // [B, 3, 3] float64
  torch::Tensor atom_virial;  // [N, 3, 3] float64 if request.atom_virial
  torch::Tensor edge_counts;  // [B] edges found (the graph holds min(count, capacity))
  torch::Tensor close_atoms;  // [4] float64: RadiusGraph::close_atoms
  torch::Tensor nonfinite;    // [] non-finite position values (positions given on the device)
  torch::Tensor
      graph_sizes;  // [3B] RadiusGraph::sizes, read only to grow capacities after an overflow
  std::vector<int64_t> capacities;
};

// Host copies; fields that were not requested (or not computed) are empty.
struct HostEvaluation {
  std::vector<double> energy;
  torch::Tensor atom_energy;   // [N] float64, CPU
  torch::Tensor forces;        // [N, 3] float64, CPU
  torch::Tensor stress;        // [B, 3, 3] float64, CPU, or undefined
  torch::Tensor virial;        // [B, 3, 3] float64, CPU, or undefined
  torch::Tensor atom_virial;   // [N, 3, 3] float64, CPU, or undefined
  std::vector<int64_t> edges;  // per system
};

}  // namespace uma
