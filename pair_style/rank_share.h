// A rank's share of the system when LAMMPS runs on several MPI ranks: the
// atoms it hands the engine (its mapped owned atoms, then the ghosts the
// evaluation needs), and the fold that sends what lands on ghost rows
// (forces, per-atom virials) home to the owners.
#pragma once

#include <vector>

#include "api/uma.h"
#include "reverse_rows.h"

namespace LAMMPS_NS {

class Atom;

// The owned atoms whose type is mapped (type_z[type] > 0), in index order,
// into `index`; lo/hi: their bounding box.  Returns how many.
int collect_owned(const Atom &atom, const std::vector<int> &type_z, std::vector<int> &index,
                  double lo[3], double hi[3]);

// Halo exchange: appends every mapped ghost (LAMMPS's shell of cutoff + skin)
// to `index`, which holds local.piece.n_owned owned atoms; only they receive
// messages.  The set changes only when LAMMPS reneighbors, so between
// reneighborings the engine's layout (and its device constants) stays.
void add_ghosts_halo(const Atom &atom, const std::vector<int> &type_z, std::vector<int> &index,
                     uma::Atoms &local);

// Deep shell (no exchange): appends the ghosts ordered by how many
// message-passing hops (cutoffs from the owned atoms' bounding box lo..hi)
// separate them from an owned atom, and sets piece's message targets: hop
// h <= layers receives messages (block k only for h <= layers - 1 - k), hop
// layers + 1 only sends.  Farther ghosts cannot reach an owned atom.
void add_ghosts_deep(const Atom &atom, const std::vector<int> &type_z, int layers, double cutoff,
                     const double lo[3], const double hi[3], std::vector<int> &index,
                     uma::Atoms &local);

// Per local atom (owned and ghost): fx fy fz, and with virials the six
// per-atom virial components, to be summed onto the owners by LAMMPS's
// reverse communication whatever newton_pair says.
class GhostFold final : public ReverseRows {
 public:
  // Rows [0, nall) zeroed, room for nmax (atom->nmax) rows.
  void clear(int nall, int nmax, bool with_virial);
  double *row(int i) { return rows_.data() + static_cast<size_t>(i) * kSlots; }
  int width() const { return virial_ ? 9 : 3; }  // values that travel per row

  int pack_reverse(int n, int first, double *buf) override;
  void unpack_reverse(int n, const int *list, const double *buf) override;

  double memory_usage() const { return static_cast<double>(rows_.capacity()) * sizeof(double); }

 private:
  static constexpr int kSlots = 9;
  std::vector<double> rows_;  // [nmax, 9]
  bool virial_ = false;
};

}  // namespace LAMMPS_NS
