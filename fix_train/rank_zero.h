/* -*- c++ -*- ----------------------------------------------------------
   fix uma/train's rank-0 work: run on rank 0, failed on every rank.
------------------------------------------------------------------------- */

#ifndef LMP_UMA_RANK_ZERO_H
#define LMP_UMA_RANK_ZERO_H

#include <functional>
#include <string>

#include "error.h"
#include "first_failure.h"
#include "lammps.h"

namespace LAMMPS_NS {

// Runs `work` on rank 0 of the run's ranks; when it throws, every rank stops
// with "Fix uma/train: WHAT: its message" (agreed through first_failure: no
// rank waits alone in a collective).
inline void train_on_rank_zero(LAMMPS *lmp, const std::string &what,
                               const std::function<void()> &work) {
  const std::string failure = on_rank_zero(lmp->world, work);
  if (!failure.empty()) lmp->error->all(FLERR, "Fix uma/train: {}: {}", what, failure);
}

}  // namespace LAMMPS_NS

#endif
