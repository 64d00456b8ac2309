#include "radius_graph.h"

#include <cmath>
#include <limits>

#include "host_reads.h"

namespace uma {
namespace {

constexpr int64_t kPairsPerChunk = int64_t{1} << 20;

std::array<double, 3> cross(const std::array<double, 3>& a, const std::array<double, 3>& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
double dot(const std::array<double, 3>& a, const std::array<double, 3>& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
double norm(const std::array<double, 3>& a) { return std::sqrt(dot(a, a)); }

// Slots beyond the current count: padding costs compute, an overflow costs a re-run.
int64_t with_headroom(int64_t count) { return count + count / 20 + 16; }

}  // namespace

std::array<int64_t, 3> image_repeats(const Matrix3& cell, const std::array<bool, 3>& pbc,
                                     double cutoff) {
  std::array<int64_t, 3> rep{0, 0, 0};
  const double volume = std::abs(dot(cell[0], cross(cell[1], cell[2])));
  for (int k = 0; k < 3; ++k) {
    if (!pbc[k]) continue;
    const double inv_spacing = norm(cross(cell[(k + 1) % 3], cell[(k + 2) % 3])) / volume;
    rep[k] = static_cast<int64_t>(std::ceil(cutoff * inv_spacing));
  }
  return rep;
}

Matrix3 graph_cell(const Matrix3& cell, const std::array<bool, 3>& pbc) {
  const int periodic = int(pbc[0]) + int(pbc[1]) + int(pbc[2]);
  if (periodic == 3) return cell;
  auto unit = [](std::array<double, 3> v) {
    const double n = norm(v);
    return std::array<double, 3>{v[0] / n, v[1] / n, v[2] / n};
  };
  Matrix3 out{};
  if (periodic == 0) {
    for (int k = 0; k < 3; ++k) out[k][k] = 1.0;
    return out;
  }
  if (periodic == 2) {
    const int free = !pbc[0] ? 0 : (!pbc[1] ? 1 : 2);
    out = cell;
    // keep right-handed order: free vector = a_{free+1} x a_{free+2}
    out[free] = unit(cross(cell[(free + 1) % 3], cell[(free + 2) % 3]));
    return out;
  }
  // one periodic direction a: two unit vectors orthogonal to it
  const int k = pbc[0] ? 0 : (pbc[1] ? 1 : 2);
  const auto a = unit(cell[k]);
  std::array<double, 3> trial{1, 0, 0};
  if (std::abs(a[0]) > 0.9) trial = {0, 1, 0};
  const auto u = unit(cross(a, trial));
  const auto w = unit(cross(a, u));
  out[k] = cell[k];
  out[(k + 1) % 3] = u;
  out[(k + 2) % 3] = w;
  return out;
}

RadiusGraphBuilder::RadiusGraphBuilder(double cutoff, int64_t max_neighbors)
    : cutoff_(cutoff), max_neighbors_(max_neighbors) {}

void RadiusGraphBuilder::grow(const std::vector<int64_t>& counts) {
  for (size_t b = 0; b < counts.size() && b < capacity_.size(); ++b)
    if (counts[b] > capacity_[b]) capacity_[b] = with_headroom(counts[b]);
}

RadiusGraph RadiusGraphBuilder::build(const torch::Tensor& pos,
                                      const std::vector<GraphSystem>& systems) {
  std::vector<int64_t> layout;
  for (const auto& s : systems) layout.push_back(s.natoms);
  // Sizes that drift a little (ghost atoms in MD) keep their capacities, which
  // then grow only on overflow; a really new layout is counted first.
  bool similar = layout.size() == layout_.size();
  for (size_t b = 0; b < layout.size() && similar; ++b)
    similar = 5 * std::abs(layout[b] - layout_[b]) <= layout_[b];
  if (!similar) {
    // New layout: count with empty blocks, then size the blocks.
    auto probe = build_with(pos, systems, std::vector<int64_t>(systems.size(), 0));
    auto counts = to_host(probe.counts);
    capacity_.assign(systems.size(), 0);
    for (size_t b = 0; b < systems.size(); ++b)
      capacity_[b] = with_headroom(counts[b].item<int64_t>());
    layout_ = layout;
  }
  return build_with(pos, systems, capacity_);
}

RadiusGraph RadiusGraphBuilder::build_with(const torch::Tensor& pos_in,
                                           const std::vector<GraphSystem>& systems,
                                           const std::vector<int64_t>& capacity) const {
  torch::NoGradGuard no_grad;
  const auto pos = pos_in.detach();
  const auto opts = pos.options();
  const auto lopts = opts.dtype(torch::kLong);
  const double cutoff2 = cutoff_ * cutoff_;
  const double inf = std::numeric_limits<double>::infinity();

  RadiusGraph g;
  std::vector<torch::Tensor> src, tgt, off, sys;
  std::vector<torch::Tensor> counts;
  auto coincident = torch::zeros({}, lopts);
  g.row_offsets.push_back(0);

  for (size_t b = 0; b < systems.size(); ++b) {
    const auto& s = systems[b];
    const int64_t cap = capacity[b];
    const auto rep = image_repeats(s.cell, s.pbc, cutoff_);
    // Image list, first index slowest; cartesian shifts n . cell.
    std::vector<double> img;
    for (int64_t i = -rep[0]; i <= rep[0]; ++i)
      for (int64_t j = -rep[1]; j <= rep[1]; ++j)
        for (int64_t k = -rep[2]; k <= rep[2]; ++k) img.insert(img.end(), {double(i), double(j), double(k)});
    const int64_t images = static_cast<int64_t>(img.size() / 3);
    auto img_t = torch::from_blob(img.data(), {images, 3}, torch::kFloat64).to(opts, /*non_blocking=*/false, /*copy=*/true);
    std::vector<double> cell_flat;
    for (const auto& row : s.cell) cell_flat.insert(cell_flat.end(), row.begin(), row.end());
    auto cell_t = torch::from_blob(cell_flat.data(), {3, 3}, torch::kFloat64).to(opts, false, true);
    auto shifts = img_t.matmul(cell_t);                                     // [S, 3]

    const int64_t n = s.natoms, a0 = s.first_atom;
    const int64_t targets = s.ntargets < 0 ? n : std::min(s.ntargets, n);
    const int64_t candidates = n * images;
    auto P = pos.narrow(0, a0, n);
    auto source_pos = (P.unsqueeze(1) + shifts.unsqueeze(0)).reshape({candidates, 3});
    auto source_atom = torch::arange(n, lopts).repeat_interleave(images) + a0;
    auto source_image = torch::arange(images, lopts).repeat({n});

    // Slot cap is the dump slot; padding slots point at the system's last atom.
    auto src_buf = torch::full({cap + 1}, a0 + n - 1, lopts);
    auto tgt_buf = torch::full({cap + 1}, a0 + n - 1, lopts);
    auto img_buf = torch::zeros({cap + 1}, lopts);
    auto found = torch::zeros({}, lopts);

    const int64_t chunk = std::max<int64_t>(1, kPairsPerChunk / std::max<int64_t>(candidates, 1));
    for (int64_t t0 = 0; t0 < targets; t0 += chunk) {
      const int64_t rows = std::min(chunk, targets - t0);
      auto diff = P.narrow(0, t0, rows).unsqueeze(1) - source_pos.unsqueeze(0);
      auto d2 = (diff * diff).sum(-1);                                      // [rows, M]
      auto mask = (d2 <= cutoff2) & (d2 != 0);
      coincident += (d2 == 0).sum() - rows;  // every target meets itself once
      if (max_neighbors_ > 0 && candidates > max_neighbors_) {
        auto masked = torch::where(mask, d2, torch::full({}, inf, opts));
        auto kth = std::get<0>(masked.topk(max_neighbors_ + 1, 1, /*largest=*/false, /*sorted=*/true))
                       .select(1, max_neighbors_);
        mask = mask & (masked <= (kth + 0.01).unsqueeze(1));
      }
      auto flat = mask.reshape({-1});
      auto rank = torch::cumsum(flat, 0) - 1 + found;
      auto slot = torch::where(flat & (rank < cap), rank, torch::full({}, cap, lopts));
      auto target_atom = (torch::arange(rows, lopts) + (a0 + t0)).repeat_interleave(candidates);
      src_buf.scatter_(0, slot, source_atom.repeat({rows}));
      img_buf.scatter_(0, slot, source_image.repeat({rows}));
      tgt_buf.scatter_(0, slot, target_atom);
      found = found + flat.sum();
    }
    src.push_back(src_buf.narrow(0, 0, cap));
    tgt.push_back(tgt_buf.narrow(0, 0, cap));
    off.push_back(img_t.index_select(0, img_buf.narrow(0, 0, cap)));
    sys.push_back(torch::full({cap}, static_cast<int64_t>(b), lopts));
    counts.push_back(found);
    g.row_offsets.push_back(g.row_offsets.back() + cap);
  }
  g.src = torch::cat(src);
  g.tgt = torch::cat(tgt);
  g.offsets = torch::cat(off);
  g.edge_system = torch::cat(sys);
  g.counts = torch::stack(counts);
  g.coincident = coincident;
  // slot index within its block < edges found in that block
  auto slot_in_block = torch::arange(g.row_offsets.back(), lopts) -
                       torch::tensor(g.row_offsets, lopts).index_select(0, g.edge_system);
  g.valid = slot_in_block < g.counts.index_select(0, g.edge_system);
  return g;
}

}  // namespace uma
