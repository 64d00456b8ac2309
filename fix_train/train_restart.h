/* -*- c++ -*- ----------------------------------------------------------
   What a LAMMPS restart file keeps of fix uma/train (the optimizer's state
   is in its own file): named fields, written and read in one order.
------------------------------------------------------------------------- */

#ifndef LMP_UMA_TRAIN_RESTART_H
#define LMP_UMA_TRAIN_RESTART_H

#include <cstdio>
#include <vector>

namespace LAMMPS_NS {

struct TrainRestart {
  double steps = 0, epoch = 0, position = 0, calls = 0, frames = 0, last_label_step = 0,
         planned_samples = 0;

  // [format marker, the fields in order]
  std::vector<double> pack() const;
  // pack() as LAMMPS's restart file wants a fix's list: its size in bytes, then the values.
  void write(FILE *fp) const;
  // A restart list: the marked format, or the first four fields of files
  // written before the marker.
  static TrainRestart unpack(const char *buf);
};

}  // namespace LAMMPS_NS

#endif
