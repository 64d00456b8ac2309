#include "pair_uma_kokkos.h"

#include "atom_kokkos.h"
#include "atom_masks.h"

using namespace LAMMPS_NS;

template <class DeviceType>
PairUMAKokkos<DeviceType>::PairUMAKokkos(LAMMPS* lmp) : PairUMA(lmp) {
  style_name_ = "uma/kk";
  kokkosable = 1;
  atomKK = static_cast<AtomKokkos*>(atom);
  execution_space = ExecutionSpaceFromDevice<DeviceType>::space;
  // LAMMPS's Kokkos integrators sync these before compute() and mark these
  // modified after it.
  datamask_read = X_MASK | F_MASK | TYPE_MASK | ENERGY_MASK | VIRIAL_MASK;
  datamask_modify = F_MASK | ENERGY_MASK | VIRIAL_MASK;
}

template <class DeviceType>
void PairUMAKokkos<DeviceType>::compute(int eflag, int vflag) {
  // On a host execution space atom->x, atom->type and atom->f are the host
  // views' own memory: the host style reads and writes them in place.
  atomKK->sync(execution_space, datamask_read);
  PairUMA::compute(eflag, vflag);
  atomKK->modified(execution_space, datamask_modify);
}

namespace LAMMPS_NS {
template class PairUMAKokkos<LMPDeviceType>;
#ifdef LMP_KOKKOS_GPU
template class PairUMAKokkos<LMPHostType>;
#endif
}  // namespace LAMMPS_NS
