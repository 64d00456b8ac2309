/* -*- c++ -*- ----------------------------------------------------------
   fix uma/train's data parallelism: the trainer's collectives over the MPI
   ranks of a LAMMPS run.
------------------------------------------------------------------------- */

#ifndef LMP_UMA_DATA_PARALLEL_H
#define LMP_UMA_DATA_PARALLEL_H

#include <mpi.h>

#include "api/uma.h"

namespace LAMMPS_NS {

// Sets the options' sum over ranks of host numbers, of the gradient, and
// their failure agreement, for the ranks of `world` (one rank: nothing).
void connect_ranks(uma::train::TrainOptions &options, MPI_Comm world);

// Whether every rank of `world` holds this value (a collective).
bool same_on_every_rank(unsigned long long value, MPI_Comm world);

}  // namespace LAMMPS_NS

#endif
