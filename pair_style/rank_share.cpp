#include "rank_share.h"

#include <algorithm>
#include <cmath>

#include "atom.h"

namespace LAMMPS_NS {

namespace {

// Distance from p to the box [lo, hi] (0 inside): a lower bound of its
// distance to every owned atom.
double distance_to_box(const double *p, const double lo[3], const double hi[3]) {
  double d2 = 0.0;
  for (int d = 0; d < 3; ++d) {
    const double out = std::max({lo[d] - p[d], 0.0, p[d] - hi[d]});
    d2 += out * out;
  }
  return std::sqrt(d2);
}

}  // namespace

int collect_owned(const Atom &atom, const std::vector<int> &type_z, std::vector<int> &index,
                  double lo[3], double hi[3]) {
  index.clear();
  for (int d = 0; d < 3; ++d) {
    lo[d] = INFINITY;
    hi[d] = -INFINITY;
  }
  for (int i = 0; i < atom.nlocal; ++i)
    if (type_z[atom.type[i]] > 0) {
      index.push_back(i);
      for (int d = 0; d < 3; ++d) {
        lo[d] = std::min(lo[d], atom.x[i][d]);
        hi[d] = std::max(hi[d], atom.x[i][d]);
      }
    }
  return static_cast<int>(index.size());
}

void add_ghosts_halo(const Atom &atom, const std::vector<int> &type_z, std::vector<int> &index,
                     uma::Atoms &local) {
  const int n_owned = static_cast<int>(local.piece.n_owned), nall = atom.nlocal + atom.nghost;
  for (int i = atom.nlocal; i < nall && n_owned > 0; ++i)
    if (type_z[atom.type[i]] > 0) index.push_back(i);
  local.piece.n_targets = n_owned;
}

void add_ghosts_deep(const Atom &atom, const std::vector<int> &type_z, int layers, double cutoff,
                     const double lo[3], const double hi[3], std::vector<int> &index,
                     uma::Atoms &local) {
  const int n_owned = static_cast<int>(local.piece.n_owned), nall = atom.nlocal + atom.nghost;
  std::vector<std::vector<int>> by_hop(layers + 2);
  for (int i = atom.nlocal; i < nall && n_owned > 0; ++i) {
    if (type_z[atom.type[i]] == 0) continue;
    const int hop =
        std::max(1, static_cast<int>(std::ceil(distance_to_box(atom.x[i], lo, hi) / cutoff)));
    if (hop <= layers + 1) by_hop[hop].push_back(i);
  }
  std::vector<int64_t> within(layers + 2, n_owned);  // atoms within h hops
  for (int h = 1; h <= layers + 1; ++h) {
    index.insert(index.end(), by_hop[h].begin(), by_hop[h].end());
    within[h] = static_cast<int64_t>(index.size());
  }
  local.piece.n_targets = within[layers];
  for (int k = 0; k < layers; ++k) local.piece.layer_targets.push_back(within[layers - 1 - k]);
}

void GhostFold::clear(int nall, int nmax, bool with_virial) {
  const size_t slots = static_cast<size_t>(nmax) * kSlots;
  if (rows_.size() < slots) {
    rows_.reserve(slots);  // exactly: memory_usage() reports it
    rows_.resize(slots);
  }
  std::fill(rows_.begin(), rows_.begin() + static_cast<size_t>(nall) * kSlots, 0.0);
  virial_ = with_virial;
}

int GhostFold::pack_reverse(int n, int first, double *buf) {
  const int w = width();
  int m = 0;
  for (int i = first; i < first + n; ++i)
    for (int d = 0; d < w; ++d) buf[m++] = row(i)[d];
  return m;
}

void GhostFold::unpack_reverse(int n, const int *list, const double *buf) {
  const int w = width();
  int m = 0;
  for (int i = 0; i < n; ++i)
    for (int d = 0; d < w; ++d) row(list[i])[d] += buf[m++];
}

}  // namespace LAMMPS_NS
