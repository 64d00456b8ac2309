// uma/kk's evaluation in place: the engine reads LAMMPS's own x and type
// arrays and adds into f where the Kokkos execution space keeps them (the
// CPU for OpenMP/Serial, the GPU for CUDA), with no copy of atom data
// through the host.  The LibTorch side of pair_style uma/kk: the style's
// own source (pair_uma_kokkos.cpp) hands over raw views and includes no
// LibTorch header, so that nvcc compiles it for a CUDA Kokkos without
// parsing LibTorch's.
#pragma once

#include <cstdint>
#include <memory>

namespace LAMMPS_NS {

class PairUMA;

// Rows of LAMMPS's per-atom arrays on the device the model runs on: x and f
// as [rows, 3] doubles with their strides (in doubles), type as ints.
struct DeviceViews {
  const double *x = nullptr;
  int64_t x_stride[2] = {3, 1};
  double *f = nullptr;
  int64_t f_stride[2] = {3, 1};
  int64_t f_rows = 0;  // rows of f (atom->nmax or more)
  const int *type = nullptr;
};

class InPlaceEvaluation {
 public:
  // After PairUMA::init_style (the engine exists): the type -> atomic
  // number table on the model's device.
  explicit InPlaceEvaluation(PairUMA &pair);
  ~InPlaceEvaluation();

  // One rank: the owned atoms as one periodic system.
  void compute_whole(const DeviceViews &views);
  // Several ranks (newton on): owned atoms and every mapped ghost, with the
  // halo exchange.  Forces and per-atom virials land on ghost rows too;
  // LAMMPS folds them onto their owners.
  void compute_local(const DeviceViews &views);

 private:
  struct Layout;  // the engine's atoms for the current neighbor list build (LibTorch tensors)
  PairUMA &pair_;
  std::unique_ptr<Layout> layout_;

  void refresh_layout(const DeviceViews &views, int nrows);
};

}  // namespace LAMMPS_NS
