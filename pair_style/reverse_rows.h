// Rows that LAMMPS's reverse communication sends from ghost atoms to their
// owners (Pair::pack_reverse_comm / unpack_reverse_comm).  pair_style uma
// moves two kinds through the same callbacks, the halo exchange's gradient
// rows and the folded forces, and hands each call to the one it is for.
#pragma once

namespace LAMMPS_NS {

class ReverseRows {
 public:
  virtual ~ReverseRows() = default;
  // Rows of ghosts [first, first + n) into buf; returns the doubles written.
  virtual int pack_reverse(int n, int first, double *buf) = 0;
  // Adds buf's rows into the rows of local atoms list[0..n).
  virtual void unpack_reverse(int n, const int *list, const double *buf) = 0;
};

}  // namespace LAMMPS_NS
