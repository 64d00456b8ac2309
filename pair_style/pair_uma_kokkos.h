// pair_style uma/kk (uma/kk/device, uma/kk/host): pair_style uma inside
// LAMMPS's KOKKOS package.  Same syntax, keywords and results as uma; only
// the data plumbing differs.
//
// When the model runs where the Kokkos execution space keeps its data (the
// CPU for OpenMP/Serial, the GPU for CUDA) the style works in place: it wraps
// the x and type views as LibTorch tensors without copying, maps types to
// atomic numbers through a device table, hands the engine DeviceAtoms, and
// adds the forces into the f view on that space.  Per-step host traffic is
// then the engine's status read (with energy and virial only on steps that
// ask for them), the cell and origin upload, and on several ranks the halo
// rows.  Otherwise (say a CUDA model under OpenMP Kokkos) it syncs the atoms
// to the host and runs pair_style uma's host path, and says so in the log.
#pragma once

#include <torch/torch.h>

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
  bool in_place_ = false;       // the model runs where DeviceType's views live
  torch::Tensor type_z_table_;  // [ntypes + 1] int64 atomic number per type, on the model's device
  bool all_mapped_ = true;      // no NULL types: engine rows are LAMMPS indices
  // This layout (atoms, order, numbers): rebuilt when LAMMPS reneighbors.
  bigint layout_builds_ = -1;  // neighbor->ncalls it was built at
  int64_t layout_id_ = 0;
  int layout_nlocal_ = -1, layout_nall_ = -1;
  int n_owned_ = 0;
  torch::Tensor numbers_;  // [n] int64 atomic numbers of the engine's atoms
  torch::Tensor rows_;     // [n] int64 LAMMPS index per engine atom (undefined: identity)
  std::vector<int64_t> composition_;  // whole system, per atomic number (several ranks)

  torch::TensorOptions device_options() const;
  void refresh_layout(int nrows);
  torch::Tensor positions(int nrows);
  void add_forces(const torch::Tensor &forces);
};

}  // namespace LAMMPS_NS
