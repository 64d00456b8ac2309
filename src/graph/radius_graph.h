// Periodic radius graph built on the device where the positions live.
//
// Every system owns a fixed-capacity block of edge slots, so the edge arrays
// have shapes known on the host and a steady-state build reads nothing back.
// Edges inside a block are ordered by target atom, and within one target by
// source atom, then by image (in the order of brute_force_radius_graph's image
// list); unused slots at the end of a block are padding (valid = false,
// pointing at the system's last atom) that the model turns into zero messages.
// Neighbour rule (fairchem's): keep pairs with 0 < d^2 <= cutoff^2; when a
// target has more than max_neighbors candidates, keep those with
// d^2 <= d^2_(T) + 0.01, where d^2_(T) is the (T+1)-th smallest.
//
// The production builder is a cell list written in tensor ops (it runs
// unchanged on CPU and CUDA): atoms are binned in fractional coordinates of
// the graph cell, bins at least one cutoff wide, and each target looks only at
// the bins of its stencil.  Its cost is linear in atoms.  Its output is
// bit-identical to brute_force_radius_graph, the O(N^2 x images) reference
// kept for the tests.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/matrix3.h"

namespace uma {

// Two distinct atoms closer than this (Angstrom) are refused: no physical
// structure has them, and the model's edge features are singular at zero.
constexpr double kMinAtomDistance = 0.01;

struct GraphSystem {
  int64_t first_atom = 0;
  int64_t natoms = 0;
  Matrix3 cell{};  // graph_cell(...): host copy, for host decisions (bins, images)
  std::array<bool, 3> pbc{};
  int64_t ntargets = -1;  // atoms [0, ntargets) receive edges, the rest only send; -1: all
};

// Per-system sizes of the fixed-capacity buffers.  Every entry is a host
// decision; a build reports on the device whether its data fitted.
struct GraphCapacity {
  int64_t edges = 0;       // edge slots of the system's block
  int64_t candidates = 0;  // candidate (atom, image) slots per cell-list bin: the atoms of
                           // the bins of its stencil (0: natoms x stencil, never overflows)
  int64_t neighbors = 0;   // neighbours within the cutoff kept per target before the
                           // max-neighbour rule (0: every candidate, never overflows)
  int64_t free_bins = 0;   // bins along each non-periodic direction (0: chosen from natoms)
};

struct RadiusGraph {
  torch::Tensor src, tgt;  // [E] long: neighbour and receiving atom
  torch::Tensor
      offsets;  // [E, 3] integer image offsets n (vec = r_src - r_tgt + n . cell), position dtype
  torch::Tensor valid;        // [E] bool
  torch::Tensor edge_system;  // [E] long
  // [B] long: edges found per system.  Exceeds capacity.edges whenever
  // anything of the system overflowed (edges, candidates or neighbours), so
  // "counts[b] > capacity" is the one overflow test a caller needs.
  torch::Tensor counts;
  // [4] float64: [number of (target, source) pairs of distinct atoms closer
  // than kMinAtomDistance, the two atoms of one such pair (global indices,
  // lower first; -1 when none), their distance (inf when none)]
  torch::Tensor close_atoms;
  // Cell-list occupancy, for growing the right buffer ([B] long each):
  torch::Tensor candidate_counts;  // most candidates of one bin (may exceed capacity.candidates)
  torch::Tensor neighbor_counts;   // most neighbours within the cutoff of one target,
                                   // before the max-neighbour rule (may exceed capacity.neighbors)
  // [3B] long: raw edge counts (not raised on overflow), candidate_counts,
  // neighbor_counts, packed for one read; see RadiusGraphBuilder::grow_to_fit.
  torch::Tensor sizes;
  std::vector<int64_t> row_offsets;     // [B + 1] host: each system's block of slots
  std::vector<GraphCapacity> capacity;  // [B] host: the capacities it was built with
};

// The distance between neighbouring lattice planes of direction k (the
// planes spanned by a_(k+1) and a_(k+2)): V / |a_(k+1) x a_(k+2)| with
// V = |a0 . (a1 x a2)|.  0 or NaN for a cell without volume.
std::array<double, 3> plane_spacings(const Matrix3& cell);

// Integer image ranges per lattice direction that can hold a neighbour within
// `cutoff` of an atom inside the cell: ceil(cutoff / plane_spacings(cell)[k]),
// computed as ceil(cutoff * |a_(k+1) x a_(k+2)| / V); 0 if not periodic.
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
  // cells: [B, 3, 3] float64 on pos's device, each system's graph_cell
  // (systems[b].cell is its host copy).
  // Builds with the current capacities, sizing them first when the systems'
  // layout (atoms per system) is new: one counted host read (two when the
  // first guess of the candidate capacity was too small).  Otherwise it reads
  // nothing, and uploads nothing unless the bin layout changed (new cell
  // shape: bins per direction or image ranges), which costs one upload.
  RadiusGraph build(const torch::Tensor& pos, const torch::Tensor& cells,
                    const std::vector<GraphSystem>& systems);

  // Builds with capacities the caller chose (one per system); never reads,
  // and uploads only when the bin layout changed (as build).
  RadiusGraph build_with(const torch::Tensor& pos, const torch::Tensor& cells,
                         const std::vector<GraphSystem>& systems,
                         const std::vector<GraphCapacity>& capacity) const;

  // After an overflow: `sizes` is the host copy of RadiusGraph::sizes (one
  // read).  Raises, with headroom, every capacity it shows was too small and
  // returns true when any did (the graph was incomplete: build again).
  bool grow_to_fit(const std::vector<int64_t>& sizes);

  // The same for a caller that read only RadiusGraph::counts: when any count
  // exceeds its edge capacity, reads `sizes` (RadiusGraph::sizes of the build
  // the counts came from; undefined: this builder's most recent build) with
  // one counted read, only on this overflow path, and grows from them.
  void grow(const std::vector<int64_t>& counts, const torch::Tensor& sizes = {});

  // Bounds the build's temporaries (the per-pair distance tests, done in
  // chunks of targets) to about `bytes`, so that a memory budget holds while
  // the graph is built too; the default is 2^20 candidate pairs per chunk.
  void set_memory_limit(double bytes);

  // What a build with the current capacities depends on besides the device
  // values of the positions and cells: each system's bin layout (bins,
  // stencil, image ranges) and the capacities.  Equal keys mean the same
  // kernels on the same shapes, reading the same device tables.
  std::vector<int64_t> plan_key(const std::vector<GraphSystem>& systems) const;

  // The device tables of the latest build's bin layout (stencils, image
  // lists): a CUDA graph of that build keeps them alive by holding this.
  std::shared_ptr<const void> device_tables() const { return constants_; }

  // Edge capacities per system, and all capacities.
  const std::vector<int64_t>& capacities() const { return edge_capacity_; }
  const std::vector<GraphCapacity>& graph_capacities() const { return capacity_; }

 private:
  struct Constants;  // per-layout stencils and image lists, kept on the device
  void set_capacity(std::vector<GraphCapacity> capacity);

  double cutoff_;
  int64_t max_neighbors_;
  int64_t pairs_per_chunk_;      // candidate pairs per chunk of targets
  std::vector<int64_t> layout_;  // natoms per system the capacities belong to
  std::vector<GraphCapacity> capacity_;
  std::vector<int64_t> edge_capacity_;
  std::vector<int64_t> bins_;  // bins per system when capacity_ was last set or scaled
  mutable std::shared_ptr<Constants> constants_;
  mutable torch::Tensor last_sizes_;  // RadiusGraph::sizes of the latest build, for grow()
};

}  // namespace uma
