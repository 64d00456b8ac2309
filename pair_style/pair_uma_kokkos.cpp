#include "pair_uma_kokkos.h"

#include <optional>
#include <string>
#include <type_traits>

#include "atom_kokkos.h"
#include "atom_masks.h"
#include "comm.h"
#include "fix.h"
#include "force.h"
#include "modify.h"
#include "utils.h"

#include "uma_kk_styles.h"

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
  const std::string device = engine_device();
  constexpr bool host_views =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename DeviceType::memory_space>::accessible;
  std::string why_not;
  if (host_views != (device == "cpu"))
    why_not = fmt::format("the model runs on {} but the Kokkos views live {}", device,
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
  // LAMMPS's Kokkos integrators sync the atoms to this space before compute()
  // and mark them modified there after it: the host when this style runs
  // pair_style uma's host path.
  execution_space = why_not.empty() ? ExecutionSpaceFromDevice<DeviceType>::space : Host;
  // (a new one: the first step builds the layout)
  in_place_ = why_not.empty() ? std::make_unique<InPlaceEvaluation>(*this) : nullptr;
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

// x, f and type where DeviceType keeps them.
template <class DeviceType>
DeviceViews PairUMAKokkos<DeviceType>::views() {
  auto x = atomKK->k_x.view<DeviceType>();
  auto f = atomKK->k_f.view<DeviceType>();
  DeviceViews v;
  v.x = x.data();
  v.x_stride[0] = static_cast<int64_t>(x.stride(0));
  v.x_stride[1] = static_cast<int64_t>(x.stride(1));
  v.f = f.data();
  v.f_stride[0] = static_cast<int64_t>(f.stride(0));
  v.f_stride[1] = static_cast<int64_t>(f.stride(1));
  v.f_rows = static_cast<int64_t>(f.extent(0));
  v.type = atomKK->k_type.view<DeviceType>().data();
  return v;
}

template <class DeviceType>
void PairUMAKokkos<DeviceType>::compute_whole(int eflag, int vflag) {
  if (!in_place_) return PairUMA::compute_whole(eflag, vflag);
  in_place_->compute_whole(views());
}

template <class DeviceType>
void PairUMAKokkos<DeviceType>::compute_local(int eflag, int vflag) {
  if (!in_place_) return PairUMA::compute_local(eflag, vflag);
  in_place_->compute_local(views());
}

namespace LAMMPS_NS {
template class PairUMAKokkos<LMPDeviceType>;
#ifdef LMP_KOKKOS_GPU
template class PairUMAKokkos<LMPHostType>;
#endif
}  // namespace LAMMPS_NS

namespace uma::plugin {

void *create_pair_uma_kk_device(LAMMPS *lmp) { return new PairUMAKokkos<LMPDeviceType>(lmp); }
#ifdef LMP_KOKKOS_GPU
void *create_pair_uma_kk_host(LAMMPS *lmp) { return new PairUMAKokkos<LMPHostType>(lmp); }
#else
void *create_pair_uma_kk_host(LAMMPS *lmp) { return new PairUMAKokkos<LMPDeviceType>(lmp); }
#endif

}  // namespace uma::plugin
