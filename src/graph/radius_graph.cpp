#include "graph/radius_graph.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/radius_graph_parts.h"
#include "runtime/transfers.h"

namespace uma {

namespace graph_parts {

// The brute force's image list [S x 3], first index slowest.
std::vector<int64_t> image_list(const std::array<int64_t, 3>& rep) {
  std::vector<int64_t> img;
  for (int64_t i = -rep[0]; i <= rep[0]; ++i)
    for (int64_t j = -rep[1]; j <= rep[1]; ++j)
      for (int64_t k = -rep[2]; k <= rep[2]; ++k) img.insert(img.end(), {i, j, k});
  return img;
}

// n . cell for images [S, 3] and a cell [3, 3] (rows are lattice vectors).
torch::Tensor image_shifts(const torch::Tensor& images, const torch::Tensor& cell) {
  return images.select(1, 0).unsqueeze(1) * cell[0] + images.select(1, 1).unsqueeze(1) * cell[1] +
         images.select(1, 2).unsqueeze(1) * cell[2];
}

// |v|^2 over the last dimension (size 3).
torch::Tensor squared_norm(const torch::Tensor& v) {
  auto x = v.select(-1, 0), y = v.select(-1, 1), z = v.select(-1, 2);
  return x * x + y * y + z * z;
}

// Concatenates the blocks.  valid: slot index within its block < edges found.
void finish(RadiusGraph& g, const std::vector<torch::Tensor>& src,
            const std::vector<torch::Tensor>& tgt, const std::vector<torch::Tensor>& off,
            const std::vector<torch::Tensor>& sys, const std::vector<torch::Tensor>& raw_counts,
            const std::vector<torch::Tensor>& reported_counts, const torch::TensorOptions& lopts) {
  g.src = torch::cat(src);
  g.tgt = torch::cat(tgt);
  g.offsets = torch::cat(off);
  g.edge_system = torch::cat(sys);
  auto raw = torch::stack(raw_counts);
  g.counts = torch::stack(reported_counts);
  g.sizes = torch::cat({raw, g.candidate_counts, g.neighbor_counts});
  std::vector<torch::Tensor> valid;
  for (size_t b = 0; b < raw_counts.size(); ++b)
    valid.push_back(torch::arange(g.row_offsets[b + 1] - g.row_offsets[b], lopts) < raw_counts[b]);
  g.valid = torch::cat(valid);
}

}  // namespace graph_parts

using namespace graph_parts;

namespace {

// Bytes of temporaries per candidate pair of a chunk, at most (float64: the
// distance vectors and their squares, masks, cumulative counts, keys, sort
// values and indices, slots); set_memory_limit divides by it.
constexpr double kBytesPerPair = 192;
// A key larger than every (source, image) key: marks candidates not kept.
constexpr int64_t kNoKey = std::numeric_limits<int64_t>::max();

std::array<double, 3> cross(const std::array<double, 3>& a, const std::array<double, 3>& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
double dot(const std::array<double, 3>& a, const std::array<double, 3>& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
double norm(const std::array<double, 3>& a) { return std::sqrt(dot(a, a)); }

// Slots beyond the current count: padding costs compute, an overflow costs a re-run.
int64_t with_headroom(int64_t count) { return count + count / 20 + 16; }
int64_t candidate_headroom(int64_t count) { return count + count / 8 + 16; }
int64_t neighbor_headroom(int64_t count) { return count + count / 4 + 8; }

// The volume V = |a0 . (a1 x a2)| of a cell and the areas |a_(k+1) x a_(k+2)|
// of its faces: the lattice planes of direction k lie V / area[k] apart.
struct CellFaces {
  double volume = 0;
  std::array<double, 3> area{};
};

CellFaces cell_faces(const Matrix3& cell) {
  CellFaces f;
  f.volume = std::abs(dot(cell[0], cross(cell[1], cell[2])));
  for (int k = 0; k < 3; ++k) f.area[k] = norm(cross(cell[(k + 1) % 3], cell[(k + 2) % 3]));
  return f;
}

// area[k] / V per direction: the reciprocal of plane_spacings(cell)[k] (1 for
// graph_cell's unit vectors), divided in this order (not 1 / spacing) for the
// bins and image ranges.
std::array<double, 3> inverse_spacings(const Matrix3& cell) {
  const CellFaces f = cell_faces(cell);
  std::array<double, 3> inv{};
  for (int k = 0; k < 3; ++k) inv[k] = f.area[k] / f.volume;
  return inv;
}

// ---- the cell list's host-side plan -----------------------------------------
//
// Atoms are binned by their fractional coordinates f in the graph cell.  A pair
// within the cutoff differs by at most `reach` = cutoff * |a_j x a_k| / V in f_i
// (plus slack for float32 rounding and positions wrapped a hair outside the
// cell), so with bins at least `reach` wide a target finds all its neighbours
// in the bins within one of its own.  Periodic directions: nb = floor(1 /
// reach) bins of width 1/nb; a cell thinner than the cutoff gets one bin and
// a wider stencil, +-R bins with R = ceil(nb * reach), where bin b + d is bin
// (b + d) mod nb of image floor((b + d) / nb): distinct d give distinct (bin,
// image), so no (source, image) pair is seen twice.  Non-periodic directions:
// a fixed number of bins spread over the atoms' current extent on the device,
// never narrower than `reach`, stencil +-1.
//
// On the device, each bin lists its candidates, the (atom, image) pairs of
// the bins its stencil reaches, in a fixed number C of slots; each target
// then tests the C candidates of its own bin.  Every slot count (C, the
// neighbours kept per target before the max-neighbour rule, the edges) is a
// host decision checked on the device: see GraphCapacity.
struct Plan {
  std::array<bool, 3> periodic{};
  std::array<int64_t, 3> nb{1, 1, 1};               // bins per direction
  std::array<int64_t, 3> lo{0, 0, 0}, hi{0, 0, 0};  // stencil offsets lo..hi per direction
  std::array<int64_t, 3> rep{0, 0, 0};              // image_repeats: the brute force's image ranges
  std::array<double, 3> reach{};                    // bin width needed, in fractional units
  int64_t free_bins = 1;                            // bins asked for along non-periodic directions
  int64_t nbins = 1, K = 1, S = 1, zero_image = 0;
};

int64_t default_free_bins(int64_t natoms, int64_t periodic_bins, int free_directions) {
  if (free_directions == 0) return 1;
  // About 8 atoms per bin for dense matter; bins never get narrower than the
  // cutoff, so extra bins only stay empty.
  const double target =
      std::max(1.0, double(natoms) / 8.0) / double(std::max<int64_t>(periodic_bins, 1));
  const double per = std::ceil(std::pow(std::max(target, 1.0), 1.0 / free_directions) - 1e-9);
  return std::clamp<int64_t>(static_cast<int64_t>(per), 1, 1024);
}

Plan make_plan(const GraphSystem& s, const GraphCapacity& c, double cutoff) {
  Plan p;
  p.periodic = s.pbc;
  p.rep = image_repeats(s.cell, s.pbc, cutoff);
  const auto inv = inverse_spacings(s.cell);
  int64_t periodic_bins = 1;
  int free_directions = 0;
  for (int k = 0; k < 3; ++k) {
    p.reach[k] = cutoff * inv[k] * (1 + 1e-4) + 2e-5;
    if (p.periodic[k]) {
      p.nb[k] =
          static_cast<int64_t>(std::clamp(std::floor(1.0 / p.reach[k]), 1.0, double(1 << 20)));
      periodic_bins *= p.nb[k];
    } else {
      ++free_directions;
    }
  }
  p.free_bins =
      c.free_bins > 0 ? c.free_bins : default_free_bins(s.natoms, periodic_bins, free_directions);
  for (int k = 0; k < 3; ++k)
    if (!p.periodic[k]) p.nb[k] = p.free_bins;
  // A cell with much vacuum: coarser bins, at most a few per atom.
  int64_t limit = 64;
  while (limit / 4 < s.natoms + 16) limit *= 2;
  while (p.nb[0] * p.nb[1] * p.nb[2] > limit) {
    int k = 0;
    for (int j = 1; j < 3; ++j)
      if (p.nb[j] > p.nb[k]) k = j;
    p.nb[k] = (p.nb[k] + 1) / 2;
  }
  for (int k = 0; k < 3; ++k) {
    if (p.periodic[k]) {
      const int64_t r = static_cast<int64_t>(std::ceil(double(p.nb[k]) * p.reach[k]));
      p.lo[k] = -r;
      p.hi[k] = r;
    } else {
      p.lo[k] = p.nb[k] > 1 ? -1 : 0;
      p.hi[k] = -p.lo[k];
    }
  }
  p.nbins = p.nb[0] * p.nb[1] * p.nb[2];
  p.K = (p.hi[0] - p.lo[0] + 1) * (p.hi[1] - p.lo[1] + 1) * (p.hi[2] - p.lo[2] + 1);
  p.S = (2 * p.rep[0] + 1) * (2 * p.rep[1] + 1) * (2 * p.rep[2] + 1);
  p.zero_image = (p.rep[0] * (2 * p.rep[1] + 1) + p.rep[1]) * (2 * p.rep[2] + 1) + p.rep[2];
  return p;
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Host tables of one system: for every bin and stencil entry, the bin it
// reaches (nbins: the empty bin) and the image index of that bin; then the
// brute force's image list.  Appended to `out`.
void append_tables(const Plan& p, std::vector<int64_t>& out) {
  const size_t at = out.size();
  out.resize(at + 2 * p.nbins * p.K);
  int64_t* bins = out.data() + at;
  int64_t* images = bins + p.nbins * p.K;
  for (int64_t b = 0; b < p.nbins; ++b) {
    const std::array<int64_t, 3> c{b / (p.nb[1] * p.nb[2]), (b / p.nb[2]) % p.nb[1], b % p.nb[2]};
    int64_t k = 0;
    for (int64_t d0 = p.lo[0]; d0 <= p.hi[0]; ++d0)
      for (int64_t d1 = p.lo[1]; d1 <= p.hi[1]; ++d1)
        for (int64_t d2 = p.lo[2]; d2 <= p.hi[2]; ++d2, ++k) {
          const std::array<int64_t, 3> d{d0, d1, d2};
          std::array<int64_t, 3> w{}, n{};
          bool inside = true;
          for (int j = 0; j < 3; ++j) {
            const int64_t u = c[j] + d[j];
            if (p.periodic[j]) {
              n[j] = floor_div(u, p.nb[j]);
              w[j] = u - n[j] * p.nb[j];
              inside &= std::abs(n[j]) <= p.rep[j];  // beyond the brute force's images
            } else {
              inside &= u >= 0 && u < p.nb[j];
              w[j] = u;
            }
          }
          const int64_t at_k = b * p.K + k;
          bins[at_k] = inside ? (w[0] * p.nb[1] + w[1]) * p.nb[2] + w[2] : p.nbins;
          images[at_k] = inside ? ((n[0] + p.rep[0]) * (2 * p.rep[1] + 1) + n[1] + p.rep[1]) *
                                          (2 * p.rep[2] + 1) +
                                      n[2] + p.rep[2]
                                : p.zero_image;
        }
  }
  const auto img = image_list(p.rep);
  out.insert(out.end(), img.begin(), img.end());
}

// The tables of one system (append_tables) on the device.
struct PlanTables {
  torch::Tensor stencil_bin;    // [nbins, K] long: bin reached (nbins: the empty bin)
  torch::Tensor stencil_image;  // [nbins, K] long: its image index
  torch::Tensor images;         // [S, 3] position dtype: the brute force's image list
};

// ---- arithmetic shared by both builders --------------------------------------
// Both compute d^2 = |r_tgt - (r_src + n . cell)|^2 with these elementwise
// operations in the positions' dtype, so their squared distances, and with
// them every cutoff and max-neighbour decision, are bit-identical.

}  // namespace

std::array<double, 3> plane_spacings(const Matrix3& cell) {
  const CellFaces f = cell_faces(cell);
  std::array<double, 3> spacing{};
  for (int k = 0; k < 3; ++k) spacing[k] = f.volume / f.area[k];
  return spacing;
}

std::array<int64_t, 3> image_repeats(const Matrix3& cell, const std::array<bool, 3>& pbc,
                                     double cutoff) {
  std::array<int64_t, 3> rep{0, 0, 0};
  const auto inv = inverse_spacings(cell);
  for (int k = 0; k < 3; ++k)
    if (pbc[k]) rep[k] = static_cast<int64_t>(std::ceil(cutoff * inv[k]));
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

// ---- brute force (reference) --------------------------------------------------

// ---- cell list ----------------------------------------------------------------

struct RadiusGraphBuilder::Constants {
  std::vector<int64_t> key;
  torch::Device device = torch::kCPU;
  torch::ScalarType dtype = torch::kFloat32;
  std::vector<PlanTables> tables;  // per system
};

namespace {

std::vector<int64_t> constants_key(const std::vector<Plan>& plans) {
  std::vector<int64_t> key;
  for (const auto& p : plans)
    for (int k = 0; k < 3; ++k)
      key.insert(key.end(), {int64_t(p.periodic[k]), p.nb[k], p.lo[k], p.hi[k], p.rep[k]});
  return key;
}

// Every system's tables, built on the host and sent in one (counted) upload;
// the image lists in `dtype`, the positions'.
std::vector<PlanTables> upload_tables(const std::vector<Plan>& plans,
                                      const torch::TensorOptions& lopts, torch::ScalarType dtype) {
  std::vector<int64_t> host;
  for (const auto& p : plans) append_tables(p, host);
  auto all = upload(host, lopts);
  std::vector<PlanTables> tables;
  int64_t at = 0;
  for (const auto& p : plans) {
    PlanTables t;
    t.stencil_bin = all.narrow(0, at, p.nbins * p.K).view({p.nbins, p.K});
    at += p.nbins * p.K;
    t.stencil_image = all.narrow(0, at, p.nbins * p.K).view({p.nbins, p.K});
    at += p.nbins * p.K;
    t.images = all.narrow(0, at, 3 * p.S).view({p.S, 3}).to(dtype);
    at += 3 * p.S;
    tables.push_back(std::move(t));
  }
  return tables;
}

// Reciprocal vectors r_j = (a_{j+1} x a_{j+2}) / det of every cell, so that
// f = r . pos: cells [B, 3, 3] float64 -> [B, 3, 3], row j = r_j.
torch::Tensor reciprocal_cells(const torch::Tensor& cells) {
  const int64_t B = cells.size(0);
  auto a0 = cells.select(1, 0), a1 = cells.select(1, 1), a2 = cells.select(1, 2);
  auto c12 = torch::linalg_cross(a1, a2, -1), c20 = torch::linalg_cross(a2, a0, -1),
       c01 = torch::linalg_cross(a0, a1, -1);
  auto det = (a0 * c12).sum(-1).view({B, 1, 1});
  return torch::stack({c12, c20, c01}, 1) / det;
}

// The search settings every system of a build shares.
struct Search {
  double cutoff2 = 0;
  int64_t max_neighbors = 0;    // 0: no max-neighbour rule
  int64_t pairs_per_chunk = 0;  // candidate slots per chunk of bins or targets
};

// One system's atoms in the bins of its plan.
struct Binning {
  torch::Tensor bin;        // [n] long: the bin of every atom
  torch::Tensor occupancy;  // [nbins + 1] long: atoms per bin (bin nbins, the empty one, has none)
  torch::Tensor start;      // [nbins + 1] long: where each bin's atoms begin in `order`
  torch::Tensor order;      // [n] long: the system's atoms sorted by bin (ascending inside a bin)
};

// P: [n, 3] the system's positions; recip: [3, 3] float64, its reciprocal vectors (rows).
Binning bin_atoms(const torch::Tensor& P, const torch::Tensor& recip, const Plan& p) {
  const int64_t n = P.size(0);
  const auto lopts = P.options().dtype(torch::kLong);
  auto frac = P.to(torch::kFloat64).matmul(recip.t());  // [n, 3]
  auto bin = torch::zeros({n}, lopts);
  for (int k = 0; k < 3; ++k) {
    torch::Tensor c;
    auto f = frac.select(1, k);
    if (p.nb[k] == 1) {
      c = torch::zeros({n}, lopts);
    } else if (p.periodic[k]) {
      c = (f * double(p.nb[k])).floor().to(torch::kLong).clamp(0, p.nb[k] - 1);
    } else {
      // Bins over the current extent, never narrower than the reach.
      auto lo = f.min();
      auto width = ((f.max() - lo) * (1.0 / double(p.nb[k]))).clamp_min(p.reach[k]);
      c = ((f - lo) / width).floor().to(torch::kLong).clamp(0, p.nb[k] - 1);
    }
    bin = bin * p.nb[k] + c;
  }
  Binning out;
  out.bin = bin;
  out.occupancy = torch::zeros({p.nbins + 1}, lopts).index_add_(0, bin, torch::ones({n}, lopts));
  out.start = out.occupancy.cumsum(0) - out.occupancy;
  out.order = std::get<1>(torch::sort(bin, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  return out;
}

// How many candidates every bin has: the atoms of the bins its stencil reaches.
struct StencilCounts {
  torch::Tensor per_entry;  // [nbins, K] long: atoms of the bin each stencil entry reaches
  torch::Tensor through;    // [nbins, K] long: running totals along the stencil
  torch::Tensor total;      // [nbins] long: candidates of every bin
};

StencilCounts count_candidates(const Binning& bins, const PlanTables& t, const Plan& p) {
  StencilCounts c;
  c.per_entry = bins.occupancy.index_select(0, t.stencil_bin.reshape({-1})).view({p.nbins, p.K});
  c.through = c.per_entry.cumsum(1);
  c.total = c.through.select(1, p.K - 1);
  return c;
}

// The candidates of every bin: the atoms of the bins its stencil reaches,
// each with that stencil entry's image, in C slots.
struct Candidates {
  torch::Tensor pos;  // [nbins, C, 3] r_src + n . cell, as the brute force; inf in empty slots
  torch::Tensor key;  // [nbins * C] long: source * S + image (source local to the system),
                      // the brute force's order
};

// Slot j of bin b lies in the first stencil entry whose running total
// exceeds j.  Built in chunks of bins: the temporaries stay within
// pairs_per_chunk slots.  cell: [3, 3] in the positions' dtype.
Candidates candidate_table(const torch::Tensor& P, const Binning& bins, const StencilCounts& counts,
                           const PlanTables& t, const torch::Tensor& cell, const Plan& p, int64_t C,
                           int64_t pairs_per_chunk) {
  const auto opts = P.options();
  const auto lopts = opts.dtype(torch::kLong);
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t n = P.size(0), S = p.S, nbins = p.nbins;
  auto shifts = image_shifts(t.images, cell);  // [S, 3]
  auto cand_pos = torch::empty({nbins, C, 3}, opts);
  auto cand_key = torch::empty({nbins, C}, lopts);
  const int64_t bin_chunk = std::max<int64_t>(1, pairs_per_chunk / C);
  for (int64_t b0 = 0; b0 < nbins; b0 += bin_chunk) {
    const int64_t rows = std::min(bin_chunk, nbins - b0);
    auto run = counts.through.narrow(0, b0, rows);
    auto j = torch::arange(C, lopts).unsqueeze(0).expand({rows, C}).contiguous();
    auto entry =
        torch::searchsorted(run, j, /*out_int32=*/false, /*right=*/true).clamp_max(p.K - 1);
    auto within = j - (run - counts.per_entry.narrow(0, b0, rows)).gather(1, entry);
    auto filled = j < counts.total.narrow(0, b0, rows).unsqueeze(1);
    auto reached = t.stencil_bin.narrow(0, b0, rows).gather(1, entry);
    auto at = (bins.start.index_select(0, reached.reshape({-1})).view({rows, C}) + within)
                  .clamp(0, n - 1);
    auto atom = bins.order.index_select(0, at.reshape({-1})).view({rows, C});
    auto image = t.stencil_image.narrow(0, b0, rows).gather(1, entry);
    auto r = P.index_select(0, atom.reshape({-1})).view({rows, C, 3}) +
             shifts.index_select(0, image.reshape({-1})).view({rows, C, 3});
    // empty slots at infinity, which no distance test accepts
    cand_pos.narrow(0, b0, rows)
        .copy_(torch::where(filled.unsqueeze(2), r, torch::full({}, inf, opts)));  // same device
    cand_key.narrow(0, b0, rows).copy_(atom * S + image);                          // same device
  }
  return {cand_pos, cand_key.reshape({-1})};
}

// One system's block of edge slots; slot `cap` is the dump slot, where
// whatever does not fit goes.
struct EdgeSlots {
  int64_t cap = 0;
  torch::Tensor src, tgt, image;  // [cap + 1] long: source and target (global), image index
  torch::Tensor found;            // [] long: edges found (may exceed cap)
};

// Targets [0, targets) of the system whose atoms start at `first`, in chunks
// of targets: each tests the C candidates of its bin (d2 [rows, C]), keeps
// its first W neighbours within the cutoff (candidate order), applies the
// max-neighbour rule and writes the kept edges, ordered by (source atom,
// image), into the next slots.  Tracks the close atoms and the most
// neighbours of one target within the cutoff (before the max-neighbour rule).
void select_neighbours(const torch::Tensor& P, const torch::Tensor& bin, const Candidates& cand,
                       const Plan& p, int64_t first, int64_t targets, int64_t W,
                       const Search& search, CloseAtoms& close, EdgeSlots& slots,
                       torch::Tensor& most_neighbors) {
  const auto opts = P.options();
  const auto lopts = opts.dtype(torch::kLong);
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t S = p.S, nbins = p.nbins, C = cand.pos.size(1), cap_e = slots.cap;
  const int64_t chunk = std::max<int64_t>(1, search.pairs_per_chunk / C);
  auto candidate_index = torch::arange(C, lopts);
  for (int64_t t0 = 0; t0 < targets; t0 += chunk) {
    const int64_t rows = std::min(chunk, targets - t0);
    auto bt = bin.narrow(0, t0, rows);
    auto d2 = squared_norm(P.narrow(0, t0, rows).unsqueeze(1) -
                           cand.pos.index_select(0, bt));  // [rows, C]
    auto in_cut = (d2 <= search.cutoff2) & (d2 != 0);
    close.update(d2, first + t0, [&](const torch::Tensor& row) {
      return cand.key.view({nbins, C})
                 .index_select(0, bt.index_select(0, row))
                 .view({-1})
                 .div(S, "floor") +
             first;
    });

    // The neighbours of each target, compacted into W columns in candidate order.
    auto ahead = in_cut.cumsum(1);  // 1-based position among the row's neighbours
    most_neighbors = torch::maximum(most_neighbors, ahead.select(1, C - 1).max());
    torch::Tensor near_d2, near_index;
    if (W == C) {
      near_d2 = torch::where(in_cut, d2, torch::full({}, inf, opts));
      near_index = candidate_index.expand({rows, C});
    } else {
      auto col = torch::where(in_cut & (ahead <= W), ahead - 1, torch::full({}, W, lopts));
      near_d2 = torch::full({rows, W + 1}, inf, opts).scatter_(1, col, d2).narrow(1, 0, W);
      near_index = torch::zeros({rows, W + 1}, lopts)
                       .scatter_(1, col, candidate_index.expand({rows, C}))
                       .narrow(1, 0, W);
    }
    auto keep = near_d2 <= search.cutoff2;
    if (search.max_neighbors > 0 && W > search.max_neighbors) {
      // the (T+1)-th smallest d^2: the largest of the T+1 smallest
      auto kth = std::get<0>(
                     near_d2.topk(search.max_neighbors + 1, 1, /*largest=*/false, /*sorted=*/false))
                     .amax(1);
      keep = keep & (near_d2 <= (kth + 0.01).unsqueeze(1));
    }
    // Order the kept neighbours by (source atom, image).
    auto key =
        cand.key.index_select(0, (bt.unsqueeze(1) * C + near_index).reshape({-1})).view({rows, W});
    auto sorted =
        std::get<0>(torch::where(keep, key, torch::full({}, kNoKey, lopts)).sort(1)).reshape({-1});
    auto kept = sorted != kNoKey;
    auto rank_e = torch::cumsum(kept, 0) - 1 + slots.found;
    auto slot_e = torch::where(kept & (rank_e < cap_e), rank_e, torch::full({}, cap_e, lopts));
    auto key_kept = torch::where(kept, sorted, torch::zeros({}, lopts));
    slots.src.scatter_(0, slot_e, key_kept.div(S, "floor") + first);
    slots.image.scatter_(0, slot_e, key_kept.remainder(S));
    slots.tgt.scatter_(
        0, slot_e,
        (torch::arange(rows, lopts) + (first + t0)).unsqueeze(1).expand({rows, W}).reshape({-1}));
    slots.found = slots.found + kept.sum();
  }
}

}  // namespace

RadiusGraphBuilder::RadiusGraphBuilder(double cutoff, int64_t max_neighbors)
    : cutoff_(cutoff), max_neighbors_(max_neighbors), pairs_per_chunk_(kPairsPerChunk) {}

void RadiusGraphBuilder::set_memory_limit(double bytes) {
  pairs_per_chunk_ = static_cast<int64_t>(
      std::clamp(std::floor(bytes / kBytesPerPair), 1.0, double(kPairsPerChunk)));
}

void RadiusGraphBuilder::set_capacity(std::vector<GraphCapacity> capacity) {
  capacity_ = std::move(capacity);
  edge_capacity_.clear();
  for (const auto& c : capacity_) edge_capacity_.push_back(c.edges);
}

bool RadiusGraphBuilder::grow_to_fit(const std::vector<int64_t>& sizes) {
  const size_t B = capacity_.size();
  if (sizes.size() != 3 * B) return false;
  bool grew = false;
  for (size_t b = 0; b < B; ++b) {
    auto& c = capacity_[b];
    if (sizes[b] > c.edges) {
      c.edges = with_headroom(sizes[b]);
      grew = true;
    }
    if (c.candidates > 0 && sizes[B + b] > c.candidates) {
      c.candidates = candidate_headroom(sizes[B + b]);
      grew = true;
    }
    if (c.neighbors > 0 && sizes[2 * B + b] > c.neighbors) {
      c.neighbors = neighbor_headroom(sizes[2 * B + b]);
      grew = true;
    }
  }
  set_capacity(capacity_);
  return grew;
}

void RadiusGraphBuilder::grow(const std::vector<int64_t>& counts, const torch::Tensor& sizes) {
  bool overflow = false;
  for (size_t b = 0; b < counts.size() && b < edge_capacity_.size(); ++b)
    overflow |= counts[b] > edge_capacity_[b];
  if (!overflow) return;
  const torch::Tensor& built = sizes.defined() ? sizes : last_sizes_;
  if (built.defined() && static_cast<size_t>(built.numel()) == 3 * capacity_.size()) {
    auto host = to_host(built);
    const int64_t* p = host.data_ptr<int64_t>();  // host data
    grow_to_fit(std::vector<int64_t>(p, p + host.numel()));
    return;
  }
  for (size_t b = 0; b < counts.size() && b < capacity_.size(); ++b)
    if (counts[b] > capacity_[b].edges) capacity_[b].edges = with_headroom(counts[b]);
  set_capacity(capacity_);
}

RadiusGraph RadiusGraphBuilder::build(const torch::Tensor& pos, const torch::Tensor& cells,
                                      const std::vector<GraphSystem>& systems) {
  const size_t B = systems.size();
  std::vector<int64_t> layout;
  for (const auto& s : systems) layout.push_back(s.natoms);
  // Sizes that drift a little (ghost atoms in MD) keep their capacities, which
  // then grow only on overflow; a really new layout is counted first.
  bool similar = layout.size() == layout_.size();
  for (size_t b = 0; b < layout.size() && similar; ++b)
    similar = 5 * std::abs(layout[b] - layout_[b]) <= layout_[b];
  if (!similar) {
    // New layout: count with empty blocks and a guessed candidate capacity,
    // then size everything from what the probe found.
    std::vector<GraphCapacity> cap(B);
    bins_.assign(B, 1);
    for (size_t b = 0; b < B; ++b) {
      const auto& s = systems[b];
      const Plan p = make_plan(s, cap[b], cutoff_);
      cap[b].free_bins = p.free_bins;  // kept while the layout holds (natoms may drift)
      const int64_t mean = (s.natoms + p.nbins - 1) / p.nbins;
      cap[b].candidates = std::max<int64_t>(1, std::min(s.natoms * p.K, 2 * p.K * mean + 32));
      bins_[b] = p.nbins;
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto probe = build_with(pos, cells, systems, cap);
      auto host = to_host(probe.sizes);
      const int64_t* sz = host.data_ptr<int64_t>();  // host data
      bool fit = true;
      for (size_t b = 0; b < B; ++b)
        if (sz[B + b] > cap[b].candidates) {
          cap[b].candidates = candidate_headroom(sz[B + b]);
          fit = false;
        }
      if (!fit && attempt == 0) continue;  // the candidate count is exact now: count again
      for (size_t b = 0; b < B; ++b) {
        cap[b].edges = with_headroom(sz[b]);
        cap[b].candidates = candidate_headroom(sz[B + b]);
        cap[b].neighbors = neighbor_headroom(sz[2 * B + b]);
      }
      break;
    }
    set_capacity(cap);
    layout_ = layout;
  } else {
    // The cell changed shape (NPT) so that a system has fewer, larger bins:
    // scale its candidate capacity instead of overflowing first.
    for (size_t b = 0; b < B; ++b) {
      const Plan p = make_plan(systems[b], capacity_[b], cutoff_);
      if (p.nbins < bins_[b] && capacity_[b].candidates > 0)
        capacity_[b].candidates = (capacity_[b].candidates * bins_[b] + p.nbins - 1) / p.nbins;
      bins_[b] = p.nbins;
    }
    set_capacity(capacity_);
  }
  return build_with(pos, cells, systems, capacity_);
}

std::vector<int64_t> RadiusGraphBuilder::plan_key(const std::vector<GraphSystem>& systems) const {
  if (capacity_.size() != systems.size()) return {-1};  // build() sizes the capacities first
  std::vector<Plan> plans;
  for (size_t b = 0; b < systems.size(); ++b)
    plans.push_back(make_plan(systems[b], capacity_[b], cutoff_));
  std::vector<int64_t> key = constants_key(plans);
  for (const auto& c : capacity_)
    key.insert(key.end(), {c.edges, c.candidates, c.neighbors, c.free_bins});
  key.insert(key.end(), layout_.begin(), layout_.end());
  return key;
}

RadiusGraph RadiusGraphBuilder::build_with(const torch::Tensor& pos_in,
                                           const torch::Tensor& cells_in,
                                           const std::vector<GraphSystem>& systems,
                                           const std::vector<GraphCapacity>& capacity) const {
  torch::NoGradGuard no_grad;
  const auto pos = pos_in.detach();
  const auto opts = pos.options();
  const auto lopts = opts.dtype(torch::kLong);
  const Search search{cutoff_ * cutoff_, max_neighbors_, pairs_per_chunk_};
  const auto B = static_cast<int64_t>(systems.size());
  TORCH_CHECK(static_cast<int64_t>(capacity.size()) == B, "one capacity per system");
  TORCH_CHECK(cells_in.device() == pos.device() && cells_in.dim() == 3 && cells_in.size(0) == B,
              "cells: one [3, 3] cell per system on the positions' device");

  std::vector<Plan> plans;
  for (int64_t b = 0; b < B; ++b) plans.push_back(make_plan(systems[b], capacity[b], cutoff_));

  // Per-layout constants: built on the host and uploaded (once, counted) only
  // when a system's bins, stencil or image ranges change.
  auto key = constants_key(plans);
  if (!constants_ || constants_->key != key || constants_->device != pos.device() ||
      constants_->dtype != pos.scalar_type()) {
    auto k = std::make_shared<Constants>();
    k->key = key;
    k->device = pos.device();
    k->dtype = pos.scalar_type();
    k->tables = upload_tables(plans, lopts, pos.scalar_type());
    constants_ = k;
  }
  const std::vector<PlanTables>& tables = constants_->tables;

  const auto cells = cells_in.to(torch::kFloat64);
  const auto cellf = cells_in.to(pos.scalar_type());
  const auto recip = reciprocal_cells(cells);  // [B, 3, 3]

  RadiusGraph g;
  std::vector<torch::Tensor> src, tgt, off, sys, raw_counts, reported, cand_max, nbr_max;
  CloseAtoms close(lopts);
  g.row_offsets.push_back(0);
  g.capacity = capacity;

  for (int64_t b = 0; b < B; ++b) {
    const auto& s = systems[b];
    const Plan& p = plans[b];
    const int64_t n = s.natoms, first = s.first_atom;
    const int64_t cap_e = capacity[b].edges;
    const int64_t targets = s.ntargets < 0 ? n : std::min(s.ntargets, n);
    const int64_t pad = std::max<int64_t>(0, first + n - 1);
    EdgeSlots slots{
        cap_e, torch::full({cap_e + 1}, pad, lopts), torch::full({cap_e + 1}, pad, lopts),
        torch::zeros({cap_e + 1}, lopts),  // padding: the first image, as the brute force
        torch::zeros({}, lopts)};
    auto most_candidates = torch::zeros({}, lopts);
    auto most_neighbors = torch::zeros({}, lopts);
    auto overflow =
        torch::zeros({}, torch::TensorOptions().dtype(torch::kBool).device(pos.device()));

    if (n > 0) {
      auto P = pos.narrow(0, first, n);
      const Binning bins = bin_atoms(P, recip[b], p);
      const int64_t C =
          capacity[b].candidates > 0 ? std::min(capacity[b].candidates, n * p.K) : n * p.K;
      const StencilCounts counts = count_candidates(bins, tables[b], p);
      most_candidates = counts.total.max();
      overflow = overflow | (most_candidates > C);
      const Candidates cand =
          candidate_table(P, bins, counts, tables[b], cellf[b], p, C, search.pairs_per_chunk);
      const int64_t W = capacity[b].neighbors > 0 ? std::min(capacity[b].neighbors, C) : C;
      select_neighbours(P, bins.bin, cand, p, first, targets, W, search, close, slots,
                        most_neighbors);
      overflow = overflow | (most_neighbors > W);
    }
    src.push_back(slots.src.narrow(0, 0, cap_e));
    tgt.push_back(slots.tgt.narrow(0, 0, cap_e));
    off.push_back(tables[b].images.index_select(0, slots.image.narrow(0, 0, cap_e)));
    sys.push_back(torch::full({cap_e}, b, lopts));
    raw_counts.push_back(slots.found);
    // Any overflow shows as more edges than slots.
    reported.push_back(torch::where(
        overflow, torch::maximum(slots.found, torch::full({}, cap_e + 1, lopts)), slots.found));
    cand_max.push_back(most_candidates);
    nbr_max.push_back(most_neighbors);
    g.row_offsets.push_back(g.row_offsets.back() + cap_e);
  }
  g.close_atoms = close.pack();
  g.candidate_counts = torch::stack(cand_max);
  g.neighbor_counts = torch::stack(nbr_max);
  finish(g, src, tgt, off, sys, raw_counts, reported, lopts);
  last_sizes_ = g.sizes;
  return g;
}

}  // namespace uma
