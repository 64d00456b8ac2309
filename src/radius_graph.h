// Periodic radius graph built on the device where the positions live.
//
// Every system owns a fixed-capacity block of edge slots, so the edge arrays
// have shapes known on the host and a steady-state build reads nothing back.
// Edges inside a block are ordered by target atom; unused slots at the end of
// a block are padding (valid = false) that the model turns into zero messages.
// Neighbour rule (fairchem's): keep pairs with 0 < d^2 <= cutoff^2; when a
// target has more than max_neighbors candidates, keep those with
// d^2 <= d^2_(T) + 0.01, where d^2_(T) is the (T+1)-th smallest.
#pragma once

#include <array>
#include <vector>

#include <torch/torch.h>

namespace uma {

using Matrix3 = std::array<std::array<double, 3>, 3>;  // rows are lattice vectors

struct GraphSystem {
  int64_t first_atom = 0;
  int64_t natoms = 0;
  Matrix3 cell{};
  std::array<bool, 3> pbc{};
  int64_t ntargets = -1;   // atoms [0, ntargets) receive edges, the rest only send; -1: all
};

struct RadiusGraph {
  torch::Tensor src, tgt;       // [E] long: neighbour and receiving atom
  torch::Tensor offsets;        // [E, 3] integer image offsets n (vec = r_src - r_tgt + n . cell)
  torch::Tensor valid;          // [E] bool
  torch::Tensor edge_system;    // [E] long
  torch::Tensor counts;         // [B] long: edges found per system (may exceed capacity)
  torch::Tensor coincident;     // [] long: pairs of distinct atoms at distance zero
  std::vector<int64_t> row_offsets;  // [B + 1] host: each system's block of slots
};

// Integer image ranges per lattice direction that can hold a neighbour within
// `cutoff` of an atom inside the cell: ceil(cutoff * |a_j x a_k| / V), 0 if not periodic.
std::array<int64_t, 3> image_repeats(const Matrix3& cell, const std::array<bool, 3>& pbc,
                                     double cutoff);

// The cell the neighbour search works in: periodic lattice vectors as given,
// non-periodic ones replaced by unit vectors orthogonal to the periodic ones
// (so image ranges and wrapping never depend on an arbitrary vacuum vector).
Matrix3 graph_cell(const Matrix3& cell, const std::array<bool, 3>& pbc);

class RadiusGraphBuilder {
 public:
  RadiusGraphBuilder(double cutoff, int64_t max_neighbors);

  // pos: [N, 3] wrapped into the cell along periodic directions.
  // Builds with the current capacities (sizing them first, with one counted
  // host read, when the systems' layout is new).
  RadiusGraph build(const torch::Tensor& pos, const std::vector<GraphSystem>& systems);

  // Raises capacities so that `counts` (host, per system) fit, with headroom.
  void grow(const std::vector<int64_t>& counts);
  const std::vector<int64_t>& capacities() const { return capacity_; }

  // Builds with capacities the caller chose (one per system); never reads.
  RadiusGraph build_with(const torch::Tensor& pos, const std::vector<GraphSystem>& systems,
                         const std::vector<int64_t>& capacity) const;

 private:

  double cutoff_;
  int64_t max_neighbors_;
  std::vector<int64_t> layout_;    // natoms per system the capacities belong to
  std::vector<int64_t> capacity_;
};

}  // namespace uma
