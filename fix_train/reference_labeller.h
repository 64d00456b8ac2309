/* -*- c++ -*- ----------------------------------------------------------
   fix uma/train's reference labeller: a frame's energy, forces and stress
   from a LAMMPS pair style (eam, ...) run in a private LAMMPS instance.
------------------------------------------------------------------------- */

#ifndef LMP_UMA_REFERENCE_LABELLER_H
#define LMP_UMA_REFERENCE_LABELLER_H

#include <string>
#include <vector>

#include <mpi.h>

#include "api/uma.h"

namespace LAMMPS_NS {

// The box of the LAMMPS run the frame comes from (a restricted triclinic cell).
struct LabelBox {
  double xprd = 0, yprd = 0, zprd = 0, xy = 0, xz = 0, yz = 0;
  int ntypes = 1;
};

class ReferenceLabeller {
 public:
  // pair_style STYLE STYLE_ARGS... and pair_coeff COEFF_ARGS...
  ReferenceLabeller(std::string style, std::vector<std::string> style_args,
                    std::vector<std::string> coeff_args);
  bool empty() const { return style_.empty(); }

  // Sets sample's labels (energy, forces; stress when the frame is periodic
  // in all three directions) from the reference style, evaluated on this
  // process alone (MPI_COMM_SELF).  type_z[t]: the atomic number of LAMMPS
  // type t.  Returns the reason on failure (the labels are then unusable),
  // an empty string on success; never throws.
  std::string label(uma::Sample &sample, const LabelBox &box, const std::vector<int> &type_z) const;

  // Rank 0's labels of a frame of `natoms` atoms to every rank of `world`
  // (a collective): one broadcast of a packed buffer.
  static void broadcast(uma::Labels &labels, int natoms, MPI_Comm world);

 private:
  std::string style_;
  std::vector<std::string> style_args_, coeff_args_;
};

}  // namespace LAMMPS_NS

#endif
