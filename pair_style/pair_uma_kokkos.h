// pair_style uma/kk (uma/kk/device, uma/kk/host): pair_style uma inside
// LAMMPS's KOKKOS package.  Same syntax, keywords and results as uma; only
// the data plumbing differs.
#pragma once

#include "kokkos_type.h"
#include "pair_uma.h"

namespace LAMMPS_NS {

template <class DeviceType>
class PairUMAKokkos : public PairUMA {
 public:
  typedef DeviceType device_type;
  PairUMAKokkos(class LAMMPS *);

  void compute(int, int) override;
};

}  // namespace LAMMPS_NS
