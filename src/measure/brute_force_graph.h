// The brute-force neighbour graph: the reference the cell-list builder is
// tested and benchmarked against (tests/test_radius_graph.cpp, uma
// bench-graph).  An instrument, built into uma_measure, not into libuma.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "graph/radius_graph.h"

namespace uma {

// The reference builder: every target against every atom and every image
// n in [-rep, rep]^3 (rep = image_repeats, first lattice index slowest).
// O(N^2 x images) time; memory bounded by chunking over targets.  Same
// contract and output as RadiusGraphBuilder::build_with with `capacity`
// edge slots per system (candidate_counts and neighbor_counts are zeros).  Uploads
// its image lists (counted); for tests and benchmarks.
RadiusGraph brute_force_radius_graph(const torch::Tensor& pos, const torch::Tensor& cells,
                                     const std::vector<GraphSystem>& systems,
                                     const std::vector<int64_t>& capacity, double cutoff,
                                     int64_t max_neighbors);

}  // namespace uma
