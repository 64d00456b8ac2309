#include "pair_uma_kokkos.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>

#include "atom_kokkos.h"
#include "atom_masks.h"
#include "comm.h"
#include "domain.h"
#include "error.h"
#include "fix.h"
#include "force.h"
#include "modify.h"
#include "neighbor.h"
#include "update.h"
#include "utils.h"

#include "api/uma.h"
#include "rank_agreement.h"

#ifdef KOKKOS_ENABLE_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

using namespace LAMMPS_NS;

namespace {

// Whether DeviceType's views live in CUDA memory (and its kernels run on a
// CUDA stream).
template <class DeviceType>
constexpr bool on_cuda() {
#ifdef KOKKOS_ENABLE_CUDA
  return std::is_same_v<typename DeviceType::execution_space, Kokkos::Cuda>;
#else
  return false;
#endif
}

}  // namespace

#ifdef UMA_LAMMPS_KOKKOS_2024
// LAMMPS's KOKKOS package as of 29 Aug 2024 (CMake's UMA_LAMMPS_KOKKOS_2024):
// x and f are X_FLOAT and F_FLOAT views.
static_assert(std::is_same_v<X_FLOAT, double> && std::is_same_v<F_FLOAT, double>,
              "pair_style uma/kk wraps x and f as float64 tensors: build LAMMPS's KOKKOS "
              "package in double precision (the default)");
#else
static_assert(std::is_same_v<KK_FLOAT, double> && std::is_same_v<KK_ACC_FLOAT, double>,
              "pair_style uma/kk wraps x and f as float64 tensors: build LAMMPS with "
              "-D Kokkos_PREC=DOUBLE (KOKKOS_PREC double)");
#endif

template <class DeviceType>
PairUMAKokkos<DeviceType>::PairUMAKokkos(LAMMPS *lmp) : PairUMA(lmp) {
  style_name_ = "uma/kk";
  kokkosable = 1;
  atomKK = static_cast<AtomKokkos *>(atom);
  execution_space = ExecutionSpaceFromDevice<DeviceType>::space;
  // LAMMPS's Kokkos integrators sync these before compute() and mark these
  // modified after it.
  datamask_read = X_MASK | F_MASK | TYPE_MASK | ENERGY_MASK | VIRIAL_MASK;
  datamask_modify = F_MASK | ENERGY_MASK | VIRIAL_MASK;
}

// Fixes that change atom types, or insert and delete atoms, on the host
// between reneighborings, evaluating the energy after each trial move
// (Monte Carlo): the in-place path builds its layout from the device's type
// view once per reneighboring and would evaluate the old configuration.
static const char *host_trial_move_fix(Modify *modify) {
  static const char *const styles[] = {"atom/swap", "gcmc",     "widom",
                                       "sgcmc",     "mol/swap", "charge/regulation"};
  for (const auto *fix : modify->get_fix_list())
    for (const char *style : styles)
      if (std::string(fix->style) == style) return style;
  return nullptr;
}

template <class DeviceType>
void PairUMAKokkos<DeviceType>::init_style() {
  PairUMA::init_style();  // the engine exists from here on
  const torch::Device device = engine_->options().device;
  constexpr bool host_views =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename DeviceType::memory_space>::accessible;
  std::string why_not;
  if (host_views != device.is_cpu())
    why_not = fmt::format("the model runs on {} but the Kokkos views live {}", device.str(),
                          host_views ? "on the host" : "on the GPU");
  else if (deep_shell_)
    why_not = "ghosts deep";
  else if (const char *fix = host_trial_move_fix(modify))
    why_not = fmt::format(
        "fix {} changes atoms on the host between reneighborings and evaluates each trial move",
        fix);
  else if (comm->nprocs > 1 && !force->newton_pair)
    why_not =
        "newton_pair off on several ranks (ghost forces are folded through the host; newton on "
        "leaves that to LAMMPS's Kokkos communication)";
  in_place_ = why_not.empty();
  // LAMMPS's Kokkos integrators sync the atoms to this space before compute()
  // and mark them modified there after it: the host when this style runs
  // pair_style uma's host path.
  execution_space = in_place_ ? ExecutionSpaceFromDevice<DeviceType>::space : Host;
  if (in_place_) {
    const std::vector<int64_t> table(type_z_.begin(), type_z_.end());
    type_z_table_ = uma::upload(table, device_options().dtype(torch::kLong));
    all_mapped_ = std::find(type_z_.begin() + 1, type_z_.end(), 0) == type_z_.end();
  }
  layout_builds_ = -1;  // the first step builds the layout
  if (comm->me == 0)
    utils::logmesg(
        lmp, in_place_ ? fmt::format("pair {}: in place on the Kokkos views (x, type, f); no host "
                                     "copies of atom data\n",
                                     style_name_)
                       : fmt::format("pair {}: atoms go through the host each step ({})\n",
                                     style_name_, why_not));
}

// Under a CUDA Kokkos the tensors go on the GPU Kokkos chose for this rank.
template <class DeviceType>
int PairUMAKokkos<DeviceType>::data_gpu() const {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (on_cuda<DeviceType>()) return Kokkos::Cuda().cuda_device();
#endif
  return -1;
}

template <class DeviceType>
void PairUMAKokkos<DeviceType>::compute(int eflag, int vflag) {
  if (!in_place_) {  // host path: pair_style uma on synced host arrays
    atomKK->sync(Host, datamask_read);
    PairUMA::compute(eflag, vflag);
    atomKK->modified(Host, datamask_modify);
    return;
  }
  // Already there in the steady state: LAMMPS's Kokkos integrators keep x,
  // type and f on this execution space.
  atomKK->sync(execution_space, X_MASK | F_MASK | TYPE_MASK);
#ifdef KOKKOS_ENABLE_CUDA
  // The rule on CUDA: every LibTorch kernel of the step runs on the stream of
  // Kokkos's default instance, the one LAMMPS's kernels use, so LibTorch
  // reads x after the kernels that wrote it and the kernels after compute()
  // see the forces it added, with no synchronisation of the host.  The
  // autograd passes replay on the streams the forward pass used.
  std::optional<c10::cuda::CUDAStreamGuard> on_kokkos_stream;
  if constexpr (on_cuda<DeviceType>())
    on_kokkos_stream.emplace(c10::cuda::getStreamFromExternal(
        Kokkos::Cuda().cuda_stream(), static_cast<c10::DeviceIndex>(data_gpu())));
#endif
  PairUMA::compute(eflag, vflag);
  atomKK->modified(execution_space, F_MASK);
}

template <class DeviceType>
torch::TensorOptions PairUMAKokkos<DeviceType>::device_options() const {
  return torch::TensorOptions().device(engine_->options().device);
}

// The engine's atoms, rebuilt when LAMMPS reneighbors (the only time atoms
// move between ranks, change order or change type): rows [0, nrows) of the
// type view through the type table, less NULL types.
template <class DeviceType>
void PairUMAKokkos<DeviceType>::refresh_layout(int nrows) {
  const int nlocal = atom->nlocal, nall = atom->nlocal + atom->nghost;
  if (neighbor->ncalls == layout_builds_) {
    if (nlocal != layout_nlocal_ || nall != layout_nall_)
      error->one(FLERR, "Pair style {}: internal: the atoms changed without reneighboring",
                 style_name_);
    return;
  }
  layout_builds_ = neighbor->ncalls;
  layout_nlocal_ = nlocal;
  layout_nall_ = nall;
  ++layout_id_;
  auto type = atomKK->k_type.view<DeviceType>();
  const torch::Tensor types =
      torch::from_blob(type.data(), {nrows}, device_options().dtype(torch::kInt));  // device view
  auto z = type_z_table_.index_select(0, types.to(torch::kLong));                   // [nrows]
  std::vector<int> &index = engine_index_;
  if (all_mapped_) {
    rows_ = torch::Tensor();
    numbers_ = z;
    index.resize(nrows);
    std::iota(index.begin(), index.end(), 0);
  } else {  // one counted read and one upload per reneighboring
    const torch::Tensor host = uma::to_host(z);
    const int64_t *zs = host.data_ptr<int64_t>();  // host data
    index.clear();
    for (int i = 0; i < nrows; ++i)
      if (zs[i] > 0) index.push_back(i);
    rows_ = uma::upload(std::vector<int64_t>(index.begin(), index.end()),
                        device_options().dtype(torch::kLong));
    numbers_ = z.index_select(0, rows_);
  }
  n_owned_ = static_cast<int>(std::lower_bound(index.begin(), index.end(), nlocal) - index.begin());
  if (comm->nprocs == 1) return;  // the engine counts a whole system's composition itself
  if (n_owned_ ==
      0) {  // a rank without atoms evaluates nothing (and takes part in every collective)
    index.clear();
    numbers_ = numbers_.narrow(0, 0, 0);
    if (rows_.defined()) rows_ = rows_.narrow(0, 0, 0);
  }
  const int64_t Z = engine_->model()->config().backbone.max_num_elements;
  auto owned = uma::to_host(
      uma::count_atomic_numbers(numbers_.narrow(0, 0, n_owned_), Z));  // one counted read
  const int64_t *owned_counts = owned.data_ptr<int64_t>();             // host data
  std::vector<long long> counts(owned_counts, owned_counts + Z);
  counts = sum_over_ranks(std::move(counts));
  composition_.assign(counts.begin(), counts.end());
}

// Rows [0, nrows) of the x view as a float64 tensor over the view's own
// memory (a gather only when some types are NULL).
template <class DeviceType>
torch::Tensor PairUMAKokkos<DeviceType>::positions(int nrows) {
  auto x = atomKK->k_x.view<DeviceType>();
  const std::vector<int64_t> strides{static_cast<int64_t>(x.stride(0)),
                                     static_cast<int64_t>(x.stride(1))};
  const auto f64 = device_options().dtype(torch::kFloat64);
  auto all = torch::from_blob(x.data(), {nrows, 3}, strides, f64);  // device view
  return rows_.defined() ? all.index_select(0, rows_) : all;
}

// Adds engine forces [n, 3] into the f view, on the device.
template <class DeviceType>
void PairUMAKokkos<DeviceType>::add_forces(const torch::Tensor &forces) {
  auto f = atomKK->k_f.view<DeviceType>();
  const std::vector<int64_t> strides{static_cast<int64_t>(f.stride(0)),
                                     static_cast<int64_t>(f.stride(1))};
  const int64_t rows = static_cast<int64_t>(f.extent(0));
  const auto f64 = device_options().dtype(torch::kFloat64);
  auto all = torch::from_blob(f.data(), {rows, 3}, strides, f64);  // device view
  const auto add = forces.to(torch::kFloat64);
  if (rows_.defined())
    all.index_add_(0, rows_, add);
  else
    all.narrow(0, 0, add.size(0)).add_(add);
}

// One rank: the owned atoms as one periodic system.
template <class DeviceType>
void PairUMAKokkos<DeviceType>::compute_whole(int eflag, int vflag) {
  if (!in_place_) return PairUMA::compute_whole(eflag, vflag);
  refresh_layout(atom->nlocal);
  const int n = static_cast<int>(numbers_.size(0));
  if (n == 0) return;
  uma::Atoms a;
  a.on_device.numbers = numbers_;
  a.on_device.layout_id = layout_id_;
  a.on_device.origin = {domain->boxlo[0], domain->boxlo[1], domain->boxlo[2]};
  a.positions = positions(atom->nlocal);
  set_whole_system(a);

  uma::Request what = read_request();
  what.forces = false;  // they stay on the device
  uma::HostEvaluation r;
  uma::Evaluation ev;
  uma::until_capacity_fits([&] {
    ev = engine_->evaluate({a}, what);
    return engine_->read(ev, r);
  });
  add_forces(ev.forces);
  tally(r, n, n);
}

// Several ranks (newton on): owned atoms and every mapped ghost, with the
// halo exchange.  Forces and per-atom virials land on ghost rows too; LAMMPS
// folds them onto their owners (its reverse communication of f, and the
// per-atom computes' own).
template <class DeviceType>
void PairUMAKokkos<DeviceType>::compute_local(int eflag, int vflag) {
  if (!in_place_) return PairUMA::compute_local(eflag, vflag);
  const int nall = atom->nlocal + atom->nghost;
  refresh_layout(nall);
  const int n = static_cast<int>(numbers_.size(0));
  uma::Atoms local;
  local.piece.n_owned = n_owned_;
  local.piece.n_targets = n_owned_;
  if (n > 0) {
    local.on_device.numbers = numbers_;
    local.on_device.layout_id = layout_id_;
    double origin[3];
    subdomain_corner(origin);  // as pair_style uma's: the same float32 inputs
    local.on_device.origin = {origin[0], origin[1], origin[2]};
    local.positions = positions(nall);
  } else {
    local.positions = torch::zeros({0, 3}, torch::kFloat64);
  }
  local.piece.composition = composition_;
  set_piece_inputs(local);
  halo_.set_atoms(&engine_index_, n_owned_, nall);
  local.piece.exchange_ghosts = halo_.functions();
  halo_.reset_counts();

  uma::Request what = read_request();
  what.forces = false;  // they stay on the device
  uma::HostEvaluation r;
  const uma::Evaluation ev = evaluate_on_every_rank(
      *engine_, local, what, r, world, [this](const std::exception &e) { return describe(e); });
  add_forces(ev.forces);
  tally(r, n_owned_, n);
  pvector[kGhostAtoms] = n - n_owned_;
  pvector[kHaloBytes] = static_cast<double>(halo_.rows_packed() * halo_.row_bytes());
}

namespace LAMMPS_NS {
template class PairUMAKokkos<LMPDeviceType>;
#ifdef LMP_KOKKOS_GPU
template class PairUMAKokkos<LMPHostType>;
#endif
}  // namespace LAMMPS_NS
