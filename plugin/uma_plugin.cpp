// Entry point of umaplugin.so: checks that the LAMMPS it is loaded into is
// the one it was built against, then registers the styles (register_styles.cpp).
// Light on purpose: the test suite compiles it again for each copy of the
// plugin that makes another build claim.
#include <cstring>

#include "error.h"
#include "lammps.h"
#include "library.h"
#include "lmptype.h"

#include "register_styles.h"
#ifdef UMA_KOKKOS
#include <Kokkos_Macros.hpp>  // the backend macros (KOKKOS_ENABLE_CUDA, ...)
#endif

// UMA_BUILT_FOR_LAMMPS: the version string of the LAMMPS this plugin is
// built against (its LAMMPS_VERSION, "4 Jul 2026"), defined by CMake; the test
// suite builds a copy that declares another one to check the refusal below.
#ifndef UMA_BUILT_FOR_LAMMPS
#error "UMA_BUILT_FOR_LAMMPS (the LAMMPS version string) must be defined by the build"
#endif

using namespace LAMMPS_NS;

namespace {

void check_abi(LAMMPS* lmp) {
  // LAMMPS only logs a version mismatch and loads anyway; class layouts can
  // differ between versions, so refuse instead.
  if (strcmp(lmp->version, UMA_BUILT_FOR_LAMMPS) != 0)
    lmp->error->all(FLERR,
                    "umaplugin.so was built for LAMMPS '{}' but this is LAMMPS '{}'; rebuild "
                    "the plugin against this LAMMPS",
                    UMA_BUILT_FOR_LAMMPS, lmp->version);
  const struct {
    const char* name;
    int size;
  } sizes[] = {
      {"tagint", sizeof(tagint)}, {"bigint", sizeof(bigint)}, {"imageint", sizeof(imageint)}};
  for (const auto& s : sizes) {
    const int running = lammps_extract_setting(lmp, s.name);
    if (running != s.size)
      lmp->error->all(FLERR,
                      "umaplugin.so was built with {}-byte {} but this LAMMPS uses {} bytes "
                      "(-DLAMMPS_SIZES differs); rebuild the plugin with the same setting",
                      s.size, s.name, running);
  }
}

#ifdef UMA_KOKKOS
// uma/kk is compiled against one KOKKOS configuration; LAMMPS built with
// another would lay its views out differently.
void check_kokkos(LAMMPS* lmp) {
  if (!lammps_config_has_package("KOKKOS"))
    lmp->error->all(FLERR,
                    "umaplugin.so was built with pair_style uma/kk for a LAMMPS with the KOKKOS "
                    "package, and this LAMMPS has none; rebuild the plugin against this LAMMPS");
#if defined(LMP_KOKKOS_DOUBLE_DOUBLE) || defined(UMA_LAMMPS_KOKKOS_2024)
  const char* precision = "double";  // (a KOKKOS package of 2024 computes in double only)
#elif defined(LMP_KOKKOS_SINGLE_SINGLE)
  const char* precision = "single";
#else
  const char* precision = "mixed";
#endif
#if defined(UMA_KOKKOS_CLAIM_API)  // the test suite's copy that claims another backend
  const char* api = UMA_KOKKOS_CLAIM_API;
#elif defined(KOKKOS_ENABLE_CUDA)
  const char* api = "cuda";
#elif defined(KOKKOS_ENABLE_HIP)
  const char* api = "hip";
#elif defined(KOKKOS_ENABLE_SYCL)
  const char* api = "sycl";
#elif defined(KOKKOS_ENABLE_OPENMP)
  const char* api = "openmp";
#else
  const char* api = "serial";
#endif
  if (!lammps_config_accelerator("KOKKOS", "precision", precision) ||
      !lammps_config_accelerator("KOKKOS", "api", api))
    lmp->error->all(
        FLERR,
        "umaplugin.so was built for a KOKKOS package with the {} backend in {} precision, "
        "and this LAMMPS's KOKKOS differs (see 'lmp -h'); rebuild the plugin against it",
        api, precision);
#ifndef UMA_LAMMPS_KOKKOS_2024  // a KOKKOS package of 2024 has one layout, the legacy one
  // The layout of LAMMPS's device views (CMake KOKKOS_LAYOUT): with another
  // one, the force view's elements would be written in the wrong order.
#if defined(UMA_KOKKOS_CLAIM_LAYOUT)  // the test suite's copy that claims another layout
  const char* layout = UMA_KOKKOS_CLAIM_LAYOUT;
#elif defined(LMP_KOKKOS_LAYOUT_LEGACY)
  const char* layout = "legacy";
#else
  const char* layout = "default";
#endif
  if (!lammps_config_accelerator("KOKKOS", "layout", layout))
    lmp->error->all(
        FLERR,
        "umaplugin.so was built for KOKKOS views in the '{}' layout, and this LAMMPS's KOKKOS "
        "uses another (see 'KOKKOS package view layout' in 'lmp -h'); rebuild LAMMPS with "
        "-D KOKKOS_LAYOUT={} or the plugin against this LAMMPS",
        layout, layout);
#endif
}
#endif

}  // namespace

extern "C" void lammpsplugin_init(void* lmp_ptr, void* handle, void* regfunc) {
  auto* lmp = static_cast<LAMMPS*>(lmp_ptr);
  check_abi(lmp);
#ifdef UMA_KOKKOS
  check_kokkos(lmp);
#endif
  uma::plugin::register_styles(lmp, handle, reinterpret_cast<uma::plugin::RegisterStyle>(regfunc),
                               UMA_BUILT_FOR_LAMMPS);
}
