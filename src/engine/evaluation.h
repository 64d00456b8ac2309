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
  // The outputs are computed from dE/dr (forces, stress, virials); false: the
  // energies only (no backward pass), e.g. under a NoGradGuard.
  bool gradients = true;
  // Training evaluations (an engine made with EngineOptions::training):
  //  - create_graph: forces, stress and virials stay differentiable (the
  //    second-order backward of a training step);
  //  - routing_dropout: fairchem's moe_dropout on the expert routing;
  //  - features: also return the l = 0 node features (Evaluation::features);
  //  - edge_capacities: each system's edge slots, measured by
  //    Engine::edge_counts; the build then reads nothing (empty: the graph
  //    builder's own capacities, grown by the read on overflow).
  bool create_graph = false;
  double routing_dropout = 0.0;
  bool features = false;
  std::vector<int64_t> edge_capacities;
  static Request all() {
    Request r = all_but_atom_virial();
    r.atom_virial = true;
    return r;
  }
  // All but the per-atom virials, which cost one more pass over the edges.
  static Request all_but_atom_virial() {
    Request r;
    r.atom_energy = r.stress = r.virial = true;
    return r;
  }
  // What a training step needs: every output on the device, nothing read.
  static Request training(std::vector<int64_t> capacities, bool create_graph, double dropout,
                          bool features) {
    Request r;
    r.create_graph = create_graph;
    r.routing_dropout = dropout;
    r.features = features;
    r.edge_capacities = std::move(capacities);
    return r;
  }
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
  torch::Tensor features;     // [N, C] l = 0 node features if request.features (detached)
  torch::Tensor natoms;       // [B] long: atoms per system (the step plan's)
  torch::Tensor batch;        // [N] long: each atom's system (the step plan's)
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
  std::vector<double> extra;   // the read's extra field (Engine::read's `extra`), float64
};

}  // namespace uma
