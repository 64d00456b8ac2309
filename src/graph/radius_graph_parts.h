// Parts of the neighbour-graph build that another build of the same graph
// shares (the brute-force reference of src/measure/brute_force_graph.cpp):
// the close-atom tracking, the image list and shifts, and the assembly of
// the blocks.  Internal to the engine and its instruments.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include <torch/torch.h>

#include "graph/radius_graph.h"

namespace uma::graph_parts {

// Candidate pairs per chunk of targets: bounds the peak memory of a build.
constexpr int64_t kPairsPerChunk = int64_t{1} << 20;

// Pairs of distinct atoms nearer than kMinAtomDistance, tracked on the device
// over chunks of targets: [count, i, j, distance] (see RadiusGraph).  The hot
// part is one comparison and a row sum over the chunk; only the first
// offending row is looked at further.
struct CloseAtoms {
  torch::Tensor count, pair_d2, first, second;
  explicit CloseAtoms(const torch::TensorOptions& lopts)
      : count(torch::zeros({}, lopts)),
        pair_d2(
            torch::full({}, std::numeric_limits<double>::infinity(), lopts.dtype(torch::kFloat64))),
        first(torch::full({}, -1, lopts)),
        second(torch::full({}, -1, lopts)) {}
  // d2 [rows, C] for targets first_target, first_target + 1, ...;
  // sources_of(row [1]) gives that row's candidates' global atom indices [C].
  // Every target meets itself once, at distance 0 (cells thinner than the
  // minimum distance are refused before any graph is built).
  template <typename SourcesOf>
  void update(const torch::Tensor& d2, int64_t first_target, SourcesOf sources_of) {
    const int64_t rows = d2.size(0);
    if (rows == 0 || d2.size(1) == 0) return;
    const double min2 = kMinAtomDistance * kMinAtomDistance;
    auto near = (d2 < min2).sum(1);  // [rows], the target itself included
    count += near.sum() - rows;
    auto row =
        (near > 1).to(torch::kLong).argmax().view({1});  // the first target with a close atom
    auto row_d2 = d2.index_select(0, row).view({-1});
    auto sources = sources_of(row);
    auto target = row.squeeze(0) + first_target;
    auto masked =
        torch::where((row_d2 < min2) & (sources != target), row_d2,
                     torch::full({}, std::numeric_limits<double>::infinity(), d2.options()));
    auto k = masked.argmin().view({1});
    auto d2_k = masked.index_select(0, k).squeeze(0).to(torch::kFloat64);
    auto take = (first < 0) & torch::isfinite(d2_k);  // keep the first pair found
    pair_d2 = torch::where(take, d2_k, pair_d2);
    first = torch::where(take, target, first);
    second = torch::where(take, sources.index_select(0, k).squeeze(0), second);
  }
  torch::Tensor pack() const {
    auto i = torch::minimum(first, second), j = torch::maximum(first, second);
    return torch::stack(
        {count.to(torch::kFloat64), i.to(torch::kFloat64), j.to(torch::kFloat64), pair_d2.sqrt()});
  }
};

// The brute force's image list [S x 3], first index slowest.
std::vector<int64_t> image_list(const std::array<int64_t, 3>& rep);
// n . cell for images [S, 3] and a cell [3, 3] (rows are lattice vectors).
torch::Tensor image_shifts(const torch::Tensor& images, const torch::Tensor& cell);
// |v|^2 over the last dimension (size 3).
torch::Tensor squared_norm(const torch::Tensor& v);
// Concatenates the blocks.  valid: slot index within its block < edges found.
void finish(RadiusGraph& g, const std::vector<torch::Tensor>& src,
            const std::vector<torch::Tensor>& tgt, const std::vector<torch::Tensor>& off,
            const std::vector<torch::Tensor>& sys, const std::vector<torch::Tensor>& raw_counts,
            const std::vector<torch::Tensor>& reported_counts, const torch::TensorOptions& lopts);

}  // namespace uma::graph_parts
