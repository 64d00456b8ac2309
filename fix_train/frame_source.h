/* -*- c++ -*- ----------------------------------------------------------
   fix uma/train's frames: the running system as a training frame (every
   atom on every rank, ordered by ID), labelled by the reference pair style
   on rank 0 and shared with every rank, and the labelled frames of files.
------------------------------------------------------------------------- */

#ifndef LMP_UMA_FRAME_SOURCE_H
#define LMP_UMA_FRAME_SOURCE_H

#include <string>
#include <vector>

#include "pointers.h"
#include "reference_labeller.h"
#include "api/uma.h"

namespace LAMMPS_NS {

class FrameSource : protected Pointers {
 public:
  FrameSource(LAMMPS *lmp, ReferenceLabeller labeller, std::string frames_file)
      : Pointers(lmp), labeller_(std::move(labeller)), frames_file_(std::move(frames_file)) {}

  // The system the frames describe: atomic number of each LAMMPS type
  // (0: not mapped), task, charge and spin multiplicity.
  void set_system(std::vector<int> type_z, std::string task, int charge, int spin);

  // The running system (a collective): every atom on every rank, ordered by
  // atom ID, positions relative to boxlo, the box as the cell.
  uma::Sample running_frame();
  // Labels `s` by the reference pair style on rank 0 and shares the labels
  // with every rank.  A collective; returns the failure agreed over ranks
  // (empty: none).
  std::string label(uma::Sample &s);
  // Appends `s` to the write_frames file (rank 0; `count`: frames labelled
  // so far, this one included: the first starts the file).  A collective;
  // returns the failure agreed over ranks (empty: none, or no file).
  std::string record(const uma::Sample &s, long long count);

  // A file's labelled frames, with the system's task where a frame names none.
  std::vector<uma::Sample> read(const std::string &file) const;

 private:
  ReferenceLabeller labeller_;
  std::string frames_file_;
  std::vector<int> type_z_;
  std::string task_;
  int charge_ = 0, spin_ = 0;
};

}  // namespace LAMMPS_NS

#endif
