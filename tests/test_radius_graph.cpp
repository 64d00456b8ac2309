// The cell-list radius graph against the brute-force reference: identical
// edges in identical order on random systems of every periodicity, ties at
// max_neighbors, the steady state's transfer budget, and overflow growth.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "graph/batch.h"
#include "measure/brute_force_graph.h"
#include "graph/radius_graph.h"
#include "test_util.h"
#include "runtime/transfers.h"

namespace uma::test {
namespace {

constexpr double kCutoff = 6.0;

using Edge = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;  // tgt, src, offset

// One system as a test builds it: host positions in Angstrom (double).
struct TestSystem {
  std::string kind;
  Matrix3 cell{};
  std::array<bool, 3> pbc{};
  std::vector<double> pos;  // [n * 3], wrapped
  int64_t ntargets = -1;
  int64_t natoms() const { return static_cast<int64_t>(pos.size() / 3); }
};

std::array<double, 3> cross(const std::array<double, 3>& a, const std::array<double, 3>& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}

double volume(const Matrix3& c) {
  const auto n = cross(c[1], c[2]);
  return std::abs(c[0][0] * n[0] + c[0][1] * n[1] + c[0][2] * n[2]);
}

// Fractional coordinates of v along the periodic lattice vectors only, by
// the Gram matrix of those vectors (no use of graph_cell): the coefficients
// of v's projection onto their span.  Written for the tests, independently
// of the builder.
std::vector<double> periodic_fractions(const Matrix3& cell, const std::array<bool, 3>& pbc,
                                       const double* v) {
  std::vector<int> dirs;
  for (int k = 0; k < 3; ++k)
    if (pbc[k]) dirs.push_back(k);
  const size_t P = dirs.size();
  // G f = A v with G = A A^T (P x P), solved by Gaussian elimination.
  std::vector<std::vector<double>> G(P, std::vector<double>(P + 1, 0.0));
  for (size_t i = 0; i < P; ++i) {
    for (size_t j = 0; j < P; ++j)
      for (int c = 0; c < 3; ++c) G[i][j] += cell[dirs[i]][c] * cell[dirs[j]][c];
    for (int c = 0; c < 3; ++c) G[i][P] += cell[dirs[i]][c] * v[c];
  }
  for (size_t i = 0; i < P; ++i) {
    size_t best = i;
    for (size_t r = i + 1; r < P; ++r)
      if (std::abs(G[r][i]) > std::abs(G[best][i])) best = r;
    std::swap(G[i], G[best]);
    for (size_t r = 0; r < P; ++r) {
      if (r == i) continue;
      const double f = G[r][i] / G[i][i];
      for (size_t c = i; c <= P; ++c) G[r][c] -= f * G[i][c];
    }
  }
  std::vector<double> f(3, 0.0);
  for (size_t i = 0; i < P; ++i) f[dirs[i]] = G[i][P] / G[i][i];
  return f;
}

// Wraps positions into the cell along periodic directions: subtracts
// floor(f) lattice vectors, f the periodic fractions above.
void wrap(TestSystem& s) {
  for (int64_t a = 0; a < s.natoms(); ++a) {
    double* r = &s.pos[3 * a];
    const auto f = periodic_fractions(s.cell, s.pbc, r);
    for (int j = 0; j < 3; ++j)
      if (s.pbc[j])
        for (int c = 0; c < 3; ++c) r[c] -= std::floor(f[j]) * s.cell[j][c];
  }
}

// A batch of systems as the builder takes it.
struct Batch {
  torch::Tensor pos, cells;
  std::vector<GraphSystem> systems;
  std::string describe;
};

Batch make_batch(const std::vector<TestSystem>& list, torch::ScalarType dtype) {
  Batch b;
  std::vector<double> pos, cells;
  int64_t first = 0;
  for (const auto& s : list) {
    const Matrix3 g = graph_cell(s.cell, s.pbc);
    b.systems.push_back({first, s.natoms(), g, s.pbc, s.ntargets});
    first += s.natoms();
    pos.insert(pos.end(), s.pos.begin(), s.pos.end());
    for (const auto& row : g) cells.insert(cells.end(), row.begin(), row.end());
    std::ostringstream d;
    d << s.kind << "(n=" << s.natoms() << ", pbc=" << s.pbc[0] << s.pbc[1] << s.pbc[2]
      << ", ntargets=" << s.ntargets << ") ";
    b.describe += d.str();
  }
  // on the test device ($UMA_TEST_DEVICE), where the builder then works
  b.pos = torch::tensor(pos, torch::kFloat64).view({-1, 3}).to(dtype).to(test::test_device());
  b.cells = torch::tensor(cells, torch::kFloat64).view({-1, 3, 3}).to(test::test_device());
  return b;
}

// Valid edges in slot order.
std::vector<Edge> edge_list(const RadiusGraph& g) {
  std::vector<Edge> out;
  auto src = g.src.cpu(), tgt = g.tgt.cpu(), valid = g.valid.cpu(),
       off = g.offsets.cpu().to(torch::kLong);
  auto s = src.accessor<int64_t, 1>(), t = tgt.accessor<int64_t, 1>();
  auto v = valid.accessor<bool, 1>();
  auto o = off.accessor<int64_t, 2>();
  for (int64_t e = 0; e < src.size(0); ++e)
    if (v[e]) out.emplace_back(t[e], s[e], o[e][0], o[e][1], o[e][2]);
  return out;
}

std::string show(const Edge& e) {
  std::ostringstream o;
  o << "(tgt " << std::get<0>(e) << ", src " << std::get<1>(e) << ", n " << std::get<2>(e) << " "
    << std::get<3>(e) << " " << std::get<4>(e) << ")";
  return o.str();
}

// The cell list's graph must equal the brute force's built with the same
// edge capacities: same edge sets, same order, same padding, same counts.
void expect_same_graph(const RadiusGraph& cell, const RadiusGraph& brute, const std::string& what) {
  const auto a = edge_list(cell), b = edge_list(brute);
  const std::set<Edge> sa(a.begin(), a.end()), sb(b.begin(), b.end());
  EXPECT_EQ(sa.size(), a.size()) << what << ": duplicate edges in the cell list";
  std::vector<Edge> missing, extra;
  std::set_difference(sb.begin(), sb.end(), sa.begin(), sa.end(), std::back_inserter(missing));
  std::set_difference(sa.begin(), sa.end(), sb.begin(), sb.end(), std::back_inserter(extra));
  EXPECT_TRUE(missing.empty()) << what << ": " << missing.size() << " edges missing, first "
                               << (missing.empty() ? "" : show(missing[0]));
  EXPECT_TRUE(extra.empty()) << what << ": " << extra.size() << " extra edges, first "
                             << (extra.empty() ? "" : show(extra[0]));
  EXPECT_EQ(a, b) << what << ": edge order differs";
  EXPECT_EQ(cell.row_offsets, brute.row_offsets) << what;
  EXPECT_TRUE(cell.src.equal(brute.src)) << what << ": src differs (padding included)";
  EXPECT_TRUE(cell.tgt.equal(brute.tgt)) << what << ": tgt differs (padding included)";
  EXPECT_TRUE(cell.offsets.equal(brute.offsets)) << what << ": offsets differ (padding included)";
  EXPECT_TRUE(cell.valid.equal(brute.valid)) << what;
  EXPECT_TRUE(cell.edge_system.equal(brute.edge_system)) << what;
  EXPECT_TRUE(cell.counts.equal(brute.counts))
      << what << ": counts " << cell.counts << " vs " << brute.counts;
  EXPECT_TRUE(cell.close_atoms.equal(brute.close_atoms))
      << what << cell.close_atoms << brute.close_atoms;
}

// Builds with a fresh builder (probe, then sized build) and compares with the
// brute force at the same capacities.
void check_against_brute_force(const Batch& b, int64_t max_neighbors, const std::string& what) {
  RadiusGraphBuilder builder(kCutoff, max_neighbors);
  auto g = builder.build(b.pos, b.cells, b.systems);
  const auto sizes = g.sizes.cpu();
  const int64_t B = static_cast<int64_t>(b.systems.size());
  for (int64_t s = 0; s < B; ++s) {
    ASSERT_LE(sizes[s].item<int64_t>(), builder.capacities()[s])
        << what << ": the probe sized the edges";
    const auto& c = builder.graph_capacities()[s];
    ASSERT_LE(sizes[B + s].item<int64_t>(), c.candidates) << what;
    ASSERT_LE(sizes[2 * B + s].item<int64_t>(), c.neighbors) << what;
  }
  auto ref = brute_force_radius_graph(b.pos, b.cells, b.systems, builder.capacities(), kCutoff,
                                      max_neighbors);
  expect_same_graph(g, ref,
                    what + " max_neighbors=" + std::to_string(max_neighbors) + ": " + b.describe);
}

// ---- an independent reference ----------------------------------------------------
//
// The brute force above shares the builder's image ranges (image_repeats),
// graph cell and tie rule.  This one shares nothing: every target against
// every atom and every image n with |n_j| up to one more than a bound taken
// from the positions themselves (their spread in periodic fractions plus the
// cutoff's reach along each reciprocal direction), squared distances in
// float64 from the exact positions the builder got, and the neighbour rule
// written from its documentation (radius_graph.h).  The builder computes
// distances in the positions' dtype, so pairs within `band` of a threshold
// (the cutoff, or the max-neighbour rule's d^2_(T) + 0.01) may fall either
// way: they are counted, not compared.

struct ReferenceEdge {
  Edge edge;
  double d2 = 0;
  bool required = true;  // false: within the band of a threshold
};

std::vector<ReferenceEdge> independent_graph(const TestSystem& s, const torch::Tensor& pos_as_built,
                                             int64_t first, double cutoff, int64_t max_neighbors,
                                             double band) {
  const int64_t n = s.natoms();
  auto P = pos_as_built.narrow(0, first, n).to(torch::kCPU, torch::kFloat64).contiguous();
  const double* p = P.data_ptr<double>();
  // Image range per periodic direction: |n_j| <= ceil(spread_j + cutoff * |b_j|) + 1.
  std::array<int64_t, 3> range{0, 0, 0};
  for (int j = 0; j < 3; ++j) {
    if (!s.pbc[j]) continue;
    double lo = 1e300, hi = -1e300;
    for (int64_t a = 0; a < n; ++a) {
      const double f = periodic_fractions(s.cell, s.pbc, p + 3 * a)[j];
      lo = std::min(lo, f);
      hi = std::max(hi, f);
    }
    // |b_j|: the largest change of f_j per Angstrom, from f of unit vectors.
    double reach = 0;
    for (int c = 0; c < 3; ++c) {
      const double unit[3] = {double(c == 0), double(c == 1), double(c == 2)};
      const double fj = periodic_fractions(s.cell, s.pbc, unit)[j];
      reach += fj * fj;
    }
    range[j] = static_cast<int64_t>(std::ceil((hi - lo) + cutoff * std::sqrt(reach))) + 1;
  }
  const int64_t targets = s.ntargets < 0 ? n : std::min(s.ntargets, n);
  const double cutoff2 = cutoff * cutoff;
  // Only for speed: an image whose shift is longer than the cutoff plus the
  // atoms' diameter cannot hold a neighbour (triangle inequality).
  std::array<double, 3> centre{0, 0, 0};
  for (int64_t a = 0; a < n; ++a)
    for (int c = 0; c < 3; ++c) centre[c] += p[3 * a + c] / double(n);
  double radius = 0;
  for (int64_t a = 0; a < n; ++a) {
    double r2 = 0;
    for (int c = 0; c < 3; ++c) r2 += (p[3 * a + c] - centre[c]) * (p[3 * a + c] - centre[c]);
    radius = std::max(radius, std::sqrt(r2));
  }
  struct Image {
    int64_t i, j, k;
    double shift[3];
  };
  std::vector<Image> images;
  for (int64_t i = -range[0]; i <= range[0]; ++i)
    for (int64_t j = -range[1]; j <= range[1]; ++j)
      for (int64_t k = -range[2]; k <= range[2]; ++k) {
        Image im{i, j, k, {}};
        double len2 = 0;
        for (int c = 0; c < 3; ++c) {
          im.shift[c] = i * s.cell[0][c] + j * s.cell[1][c] + k * s.cell[2][c];
          len2 += im.shift[c] * im.shift[c];
        }
        if (std::sqrt(len2) <= cutoff + 2 * radius + 1.0) images.push_back(im);
      }
  std::vector<ReferenceEdge> out;
  for (int64_t t = 0; t < targets; ++t) {
    std::vector<ReferenceEdge> near;
    for (int64_t a = 0; a < n; ++a)
      for (const Image& im : images) {
        if (a == t && im.i == 0 && im.j == 0 && im.k == 0) continue;
        double d2 = 0;
        for (int c = 0; c < 3; ++c) {
          const double d = p[3 * a + c] + im.shift[c] - p[3 * t + c];
          d2 += d * d;
        }
        if (d2 <= cutoff2 + band)
          near.push_back({{first + t, first + a, im.i, im.j, im.k}, d2, d2 < cutoff2 - band});
      }
    if (max_neighbors > 0 && static_cast<int64_t>(near.size()) > max_neighbors) {
      // keep d^2 <= d^2_(T) + 0.01, d^2_(T) the (T+1)-th smallest
      std::vector<double> d2s;
      for (const auto& e : near) d2s.push_back(e.d2);
      std::nth_element(d2s.begin(), d2s.begin() + max_neighbors, d2s.end());
      const double limit = d2s[max_neighbors] + 0.01;
      std::vector<ReferenceEdge> kept;
      for (auto e : near) {
        if (e.d2 > limit + band) continue;
        e.required = e.required && e.d2 < limit - band;
        kept.push_back(e);
      }
      near = std::move(kept);
    }
    out.insert(out.end(), near.begin(), near.end());
  }
  return out;
}

// The builder's graph against the independent reference: every required
// edge present, nothing outside the reference, no duplicates, and edges in
// the documented order (target, then source, then image lexicographically).
void expect_matches_independent(const RadiusGraph& g, const std::vector<TestSystem>& list,
                                const Batch& b, int64_t max_neighbors, double band,
                                const std::string& what, int64_t* compared) {
  const auto built = edge_list(g);
  std::vector<ReferenceEdge> ref;
  for (size_t k = 0; k < list.size(); ++k) {
    auto part =
        independent_graph(list[k], b.pos, b.systems[k].first_atom, kCutoff, max_neighbors, band);
    ref.insert(ref.end(), part.begin(), part.end());
  }
  std::map<Edge, bool> allowed;  // edge -> required
  for (const auto& e : ref) allowed[e.edge] = e.required;
  std::set<Edge> seen;
  int64_t outside = 0, optional_found = 0;
  std::string first_outside;
  for (const auto& e : built) {
    auto it = allowed.find(e);
    if (it == allowed.end()) {
      if (outside++ == 0) first_outside = show(e);
    } else if (!it->second) {
      ++optional_found;
    }
    seen.insert(e);
  }
  int64_t missing = 0;
  std::string first_missing;
  for (const auto& e : ref)
    if (e.required && !seen.count(e.edge) && missing++ == 0) first_missing = show(e.edge);
  EXPECT_EQ(seen.size(), built.size()) << what << ": duplicate edges";
  EXPECT_EQ(outside, 0) << what << ": " << outside << " edges the reference does not have, first "
                        << first_outside;
  EXPECT_EQ(missing, 0) << what << ": " << missing << " reference edges missing, first "
                        << first_missing;
  EXPECT_TRUE(std::is_sorted(built.begin(), built.end()))
      << what << ": edges not in (target, source, image) order";
  *compared += static_cast<int64_t>(built.size());
}

// ---- random systems ------------------------------------------------------------

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}
  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }
  int64_t integer(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool chance(double p) { return uniform(0, 1) < p; }

  // Lower-triangular lattice with tilt factors up to 1 (angles down to 45 degrees).
  Matrix3 skewed_cell(double lo, double hi, double tilt) {
    Matrix3 c{};
    const double l0 = uniform(lo, hi), l1 = uniform(lo, hi), l2 = uniform(lo, hi);
    c[0] = {l0, 0, 0};
    c[1] = {uniform(-tilt, tilt) * l1, l1, 0};
    c[2] = {uniform(-tilt, tilt) * l2, uniform(-tilt, tilt) * l2, l2};
    // a random rotation-free permutation of which vector is which
    if (chance(0.5)) std::swap(c[0], c[2]);
    return c;
  }

  // Atoms at random fractional coordinates of the graph cell (periodic) or
  // spread over `extent` Angstrom (non-periodic), then moved by random
  // lattice vectors and wrapped back, as the engine would see them.
  TestSystem fill(std::string kind, const Matrix3& cell, std::array<bool, 3> pbc, int64_t n,
                  double extent) {
    TestSystem s;
    s.kind = std::move(kind);
    s.cell = cell;
    s.pbc = pbc;
    const Matrix3 g = graph_cell(cell, pbc);
    const double origin = uniform(-30, 30);
    for (int64_t a = 0; a < n; ++a) {
      std::array<double, 3> f{};
      for (int j = 0; j < 3; ++j) {
        if (pbc[j]) {
          f[j] = uniform(0, 1);
          if (chance(0.05)) f[j] = chance(0.5) ? 0.0 : 1.0 - 1e-12;  // on the cell's faces
          f[j] += double(integer(-2, 2));
        } else {
          f[j] = origin + uniform(0, extent);
        }
      }
      for (int c = 0; c < 3; ++c) s.pos.push_back(f[0] * g[0][c] + f[1] * g[1][c] + f[2] * g[2][c]);
    }
    wrap(s);
    if (chance(0.3)) s.ntargets = integer(0, n);
    return s;
  }

  int64_t atoms_for(double volume, int64_t lo, int64_t hi) {
    const double density = uniform(0.03, 0.1);
    return std::clamp<int64_t>(static_cast<int64_t>(std::lround(density * volume)), lo, hi);
  }

  TestSystem random_system(int kind) {
    switch (kind) {
      case 0: {  // skewed triclinic bulk
        const Matrix3 c = skewed_cell(6, 26, 1.0);
        const double v = volume(c);
        return fill("bulk", c, {true, true, true}, atoms_for(v, 1, 400), 0);
      }
      case 1: {  // a cell smaller than the cutoff, one or two atoms
        const Matrix3 c = skewed_cell(1.6, 5.5, 0.8);
        return fill("small cell", c, {true, true, true}, integer(1, 2), 0);
      }
      case 2: {  // periodic in all directions, thinner than the cutoff in one
        Matrix3 c = skewed_cell(7, 13, 0.7);
        const int k = static_cast<int>(integer(0, 2));
        const double thin = uniform(1.5, 4.5) /
                            std::sqrt(c[k][0] * c[k][0] + c[k][1] * c[k][1] + c[k][2] * c[k][2]);
        for (double& x : c[k]) x *= thin;
        const double v = volume(c);
        return fill("thin cell", c, {true, true, true}, atoms_for(v, 1, 120), 0);
      }
      case 3: {  // slab: periodic in two directions
        Matrix3 c = skewed_cell(3, 24, 1.0);
        std::array<bool, 3> pbc{true, true, true};
        const int free = static_cast<int>(integer(0, 2));
        pbc[free] = false;
        const double extent = uniform(2, 14);
        const auto n = cross(c[(free + 1) % 3], c[(free + 2) % 3]);
        const double area = std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
        return fill("slab", c, pbc, atoms_for(area * extent, 1, 300), extent);
      }
      case 4: {  // molecule: no periodicity
        const double extent = uniform(1, 22);
        return fill("molecule", Matrix3{}, {false, false, false},
                    atoms_for(extent * extent * extent, 1, 160), extent);
      }
      default: {  // chain: one periodic direction
        Matrix3 c = skewed_cell(2, 12, 1.0);
        std::array<bool, 3> pbc{false, false, false};
        const int k = static_cast<int>(integer(0, 2));
        pbc[k] = true;
        const double length = std::sqrt(c[k][0] * c[k][0] + c[k][1] * c[k][1] + c[k][2] * c[k][2]);
        const double extent = uniform(1, 9);
        return fill("chain", c, pbc, atoms_for(length * extent * extent, 1, 100), extent);
      }
    }
  }

 private:
  std::mt19937_64 rng_;
};

// Float32 distances of the builder against float64 ones: pairs this close
// to a threshold (in A^2) may go either way.
double band_for(torch::ScalarType dtype) { return dtype == torch::kFloat64 ? 1e-9 : 1e-3; }

TEST(RadiusGraphCellList, MatchesBruteForceOnRandomSystems) {
  Generator gen(20240611);
  int systems = 0;
  int64_t compared = 0;
  for (int round = 0; round < 12; ++round) {
    for (int kind = 0; kind < 6; ++kind) {
      TestSystem s = gen.random_system(kind);
      const auto dtype = round % 3 == 2 ? torch::kFloat64 : torch::kFloat32;
      const int64_t max_nb = round % 4 == 3 ? 0 : (round % 4 == 1 ? 8 : 30);
      const std::string what = "round " + std::to_string(round) +
                               (dtype == torch::kFloat64 ? " fp64 " : " fp32 ") +
                               "max_neighbors=" + std::to_string(max_nb);
      const Batch b = make_batch({s}, dtype);
      check_against_brute_force(b, max_nb, what);
      RadiusGraphBuilder builder(kCutoff, max_nb);
      expect_matches_independent(builder.build(b.pos, b.cells, b.systems), {s}, b, max_nb,
                                 band_for(dtype), what + ": " + b.describe, &compared);
      ++systems;
    }
  }
  EXPECT_GE(systems, 50);
  EXPECT_GT(compared, 20000) << "edges compared with the independent reference";
}

TEST(RadiusGraphCellList, MatchesBruteForceOnMixedBatches) {
  Generator gen(77);
  for (int round = 0; round < 8; ++round) {
    std::vector<TestSystem> list;
    const int64_t count = gen.integer(2, 5);
    for (int64_t i = 0; i < count; ++i)
      list.push_back(gen.random_system(static_cast<int>(gen.integer(0, 5))));
    const int64_t max_nb = round % 2 ? 0 : 30;
    const Batch b = make_batch(list, torch::kFloat32);
    check_against_brute_force(b, max_nb, "batch " + std::to_string(round));
    RadiusGraphBuilder builder(kCutoff, max_nb);
    int64_t compared = 0;
    expect_matches_independent(builder.build(b.pos, b.cells, b.systems), list, b, max_nb,
                               band_for(torch::kFloat32),
                               "batch " + std::to_string(round) + ": " + b.describe, &compared);
  }
}

// fcc: many neighbours at exactly the same distance, max_neighbors cutting
// through a shell (shells of 12, 6, 24, 12, 24 within 6 A at a = 3.615).
TEST(RadiusGraphCellList, TiesAtMaxNeighborsInPerfectFcc) {
  const double a = 3.615;
  for (int64_t cells : {2, 3}) {
    TestSystem s;
    s.kind = "fcc";
    s.pbc = {true, true, true};
    for (int k = 0; k < 3; ++k) s.cell[k][k] = cells * a;
    const double basis[4][3] = {{0, 0, 0}, {0, 0.5, 0.5}, {0.5, 0, 0.5}, {0.5, 0.5, 0}};
    for (int64_t i = 0; i < cells; ++i)
      for (int64_t j = 0; j < cells; ++j)
        for (int64_t k = 0; k < cells; ++k)
          for (const auto& q : basis)
            s.pos.insert(s.pos.end(), {(i + q[0]) * a, (j + q[1]) * a, (k + q[2]) * a});
    for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
      const Batch b = make_batch({s}, dtype);
      // T inside the 1st, 2nd and 3rd shells, and on their edges.
      const std::vector<std::pair<int64_t, int64_t>> expected{
          {0, 78}, {5, 12}, {12, 18}, {17, 18}, {18, 42}, {30, 42}, {41, 42}, {42, 54}, {60, 78}};
      for (const auto& [T, per_target] : expected) {
        RadiusGraphBuilder builder(kCutoff, T);
        auto g = builder.build(b.pos, b.cells, b.systems);
        const int64_t n = s.natoms();
        EXPECT_EQ(g.counts[0].item<int64_t>(), n * per_target) << "T " << T << " cells " << cells;
        auto ref =
            brute_force_radius_graph(b.pos, b.cells, b.systems, builder.capacities(), kCutoff, T);
        expect_same_graph(g, ref, "fcc " + std::to_string(cells) + "^3, T " + std::to_string(T));
      }
    }
  }
}

// After the first build of a layout, builds read nothing and upload nothing,
// also when the cell changes a little (NPT) without changing the bins; a cell
// that changes the bins costs one upload of constants and still no read.
TEST(RadiusGraphCellList, SteadyStateReadsAndUploadsNothing) {
  Generator gen(5);
  // system 0: 2 bins per direction (spacings near 15 A); 0.75 x leaves 1
  std::vector<TestSystem> list{gen.fill("bulk", {{{15.0, 0, 0}, {1.0, 15.0, 0}, {0.5, -1.0, 15.2}}},
                                        {true, true, true}, 150, 0),
                               gen.random_system(3), gen.random_system(4)};
  RadiusGraphBuilder builder(kCutoff, 30);
  Batch b = make_batch(list, torch::kFloat32);
  builder.build(b.pos, b.cells, b.systems);

  // moved atoms, same cells
  Batch moved = b;
  moved.pos = b.pos + 0.01;
  reset_transfer_counts();
  auto g = builder.build(moved.pos, moved.cells, moved.systems);
  EXPECT_EQ(host_read_count(), 0);
  EXPECT_EQ(upload_count(), 0);
  auto ref = brute_force_radius_graph(moved.pos, moved.cells, moved.systems, builder.capacities(),
                                      kCutoff, 30);
  expect_same_graph(g, ref, "moved");

  // a slightly strained cell: same bins and image ranges
  auto strained_list = list;
  for (auto& row : strained_list[0].cell)
    for (double& x : row) x *= 1.004;
  for (double& x : strained_list[0].pos) x *= 1.004;
  Batch strained = make_batch(strained_list, torch::kFloat32);
  reset_transfer_counts();
  g = builder.build(strained.pos, strained.cells, strained.systems);
  EXPECT_EQ(host_read_count(), 0);
  EXPECT_EQ(upload_count(), 0);
  ref = brute_force_radius_graph(strained.pos, strained.cells, strained.systems,
                                 builder.capacities(), kCutoff, 30);
  expect_same_graph(g, ref, "strained");

  // a cell compressed below two bins' width: new constants, one upload
  auto squeezed_list = list;
  for (auto& row : squeezed_list[0].cell)
    for (double& x : row) x *= 0.75;
  for (double& x : squeezed_list[0].pos) x *= 0.75;
  Batch squeezed = make_batch(squeezed_list, torch::kFloat32);
  reset_transfer_counts();
  g = builder.build(squeezed.pos, squeezed.cells, squeezed.systems);
  EXPECT_EQ(host_read_count(), 0);
  EXPECT_EQ(upload_count(), 1);
  // (it may have overflowed: the comparison is the overflow test's business)
}

// Builds, and on overflow grows and builds again, as Engine::accept does
// (at most `tries` builds); returns the final graph.
RadiusGraph build_until_it_fits(RadiusGraphBuilder& builder, const Batch& b, bool read_counts_only,
                                int* builds) {
  for (*builds = 1;; ++*builds) {
    auto g = builder.build(b.pos, b.cells, b.systems);
    auto counts = g.counts.cpu();
    std::vector<int64_t> c(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel());
    bool overflow = false;
    for (size_t s = 0; s < c.size(); ++s) overflow |= c[s] > g.capacity[s].edges;
    if (!overflow || *builds == 5) return g;
    if (read_counts_only) {
      builder.grow(c);
    } else {
      auto sizes = g.sizes.cpu();
      EXPECT_TRUE(builder.grow_to_fit(std::vector<int64_t>(
          sizes.data_ptr<int64_t>(), sizes.data_ptr<int64_t>() + sizes.numel())));
    }
  }
}

// Atoms that cluster into one region overflow the bins' candidate slots sized
// for a uniform system: the build says so through counts and sizes, and
// growing fixes it.
TEST(RadiusGraphCellList, BinOverflowIsFlaggedAndGrowthRecovers) {
  for (bool read_counts_only : {false, true}) {
    Generator gen(11);
    // 5 bins per direction: a bin's stencil holds about 27/125 of the atoms
    TestSystem s =
        gen.fill("bulk", {{{32.0, 0, 0}, {0, 32.0, 0}, {0, 0, 32.0}}}, {true, true, true}, 600, 0);
    s.ntargets = -1;
    RadiusGraphBuilder builder(kCutoff, 30);
    Batch b = make_batch({s}, torch::kFloat32);
    builder.build(b.pos, b.cells, b.systems);
    const auto before = builder.graph_capacities()[0];

    // the same atoms squeezed into one corner (a third of the cell per direction)
    TestSystem clustered = s;
    for (double& x : clustered.pos) x = 0.3 + x * 0.35;
    Batch c = make_batch({clustered}, torch::kFloat32);
    auto g = builder.build(c.pos, c.cells, c.systems);
    EXPECT_GT(g.candidate_counts[0].item<int64_t>(), before.candidates);
    EXPECT_GT(g.counts[0].item<int64_t>(), before.edges) << "an overflow shows in counts";

    int builds = 0;
    g = build_until_it_fits(builder, c, read_counts_only, &builds);
    EXPECT_GT(builds, 1);
    EXPECT_GT(builder.graph_capacities()[0].candidates, before.candidates);
    auto ref =
        brute_force_radius_graph(c.pos, c.cells, c.systems, builder.capacities(), kCutoff, 30);
    expect_same_graph(
        g, ref, std::string("clustered, ") + (read_counts_only ? "grow(counts)" : "grow_to_fit"));
  }
}

// A denser packing of the same atoms gives each target more neighbours than
// the compacted per-target buffer holds: flagged, grown, then exact.
TEST(RadiusGraphCellList, NeighbourOverflowIsFlaggedAndGrowthRecovers) {
  Generator gen(12);
  // 3 bins per direction; compressed to 0.7 x, 2 bins with 2.9 x the density
  TestSystem s =
      gen.fill("bulk", {{{20.0, 0, 0}, {0, 20.0, 0}, {0, 0, 20.0}}}, {true, true, true}, 300, 0);
  RadiusGraphBuilder builder(kCutoff, 0);
  Batch b = make_batch({s}, torch::kFloat32);
  builder.build(b.pos, b.cells, b.systems);
  const auto before = builder.graph_capacities()[0];
  TestSystem dense = s;
  for (auto& row : dense.cell)
    for (double& x : row) x *= 0.7;
  for (double& x : dense.pos) x *= 0.7;
  Batch d = make_batch({dense}, torch::kFloat32);
  auto g = builder.build(d.pos, d.cells, d.systems);
  EXPECT_GT(g.neighbor_counts[0].item<int64_t>(), before.neighbors);
  int builds = 0;
  g = build_until_it_fits(builder, d, false, &builds);
  EXPECT_GT(builds, 1);
  auto ref = brute_force_radius_graph(d.pos, d.cells, d.systems, builder.capacities(), kCutoff, 0);
  expect_same_graph(g, ref, "compressed");
}

}  // namespace
}  // namespace uma::test
