// pair_style uma/kk (uma/kk/device, uma/kk/host): pair_style uma inside
// LAMMPS's KOKKOS package.  Same syntax, keywords and results as uma; only
// the data plumbing differs.
//
// When the model runs where the Kokkos execution space keeps its data (the
// CPU for OpenMP/Serial, the GPU for CUDA) the style works in place: it wraps
// the x and type views as LibTorch tensors without copying, maps types to
// atomic numbers through a device table, hands the engine DeviceAtoms, and
// adds the forces into the f view on that space (in_place_evaluation.h, the
// LibTorch side: this style's own source includes no LibTorch header, so
// that nvcc compiles it without parsing LibTorch's).  Per-step host traffic
// is then the engine's status read (with energy and virial only on steps that
// ask for them), the cell and origin upload, and on several ranks the halo
// rows.  Otherwise (say a CUDA model under OpenMP Kokkos) it syncs the atoms
// to the host and runs pair_style uma's host path, and says so in the log.
#pragma once

#include <memory>

#include "in_place_evaluation.h"
#include "kokkos_type.h"
#include "lmptype.h"
#include "pair_uma.h"

namespace LAMMPS_NS {

template <class DeviceType>
class PairUMAKokkos : public PairUMA {
 public:
  typedef DeviceType device_type;
  PairUMAKokkos(class LAMMPS *);

  void compute(int, int) override;
  void init_style() override;

 protected:
  void compute_whole(int eflag, int vflag) override;
  void compute_local(int eflag, int vflag) override;
  int data_gpu() const override;

 private:
  // Where the model runs where DeviceType's views live (else null: the host path).
  std::unique_ptr<InPlaceEvaluation> in_place_;

  DeviceViews views();  // x, f and type on DeviceType, this step
};

}  // namespace LAMMPS_NS
