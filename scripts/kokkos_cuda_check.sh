#!/usr/bin/env bash
# Compiles every project source that includes Kokkos headers, as one translation
# unit, for Kokkos's CUDA backend (Serial host + CUDA device, Hopper sm_90) with
# the host's nvcc and g++,
# against the LAMMPS root's Kokkos 5 headers, LAMMPS's src/ and src/KOKKOS and
# the torch wheel's headers; and the engine's CUDA kernels (the launch template
# instantiated for every lean kernel, src/edges/cuda/ops.cu), their GPU check and
# their timing (src/**/cuda/*.cu, tests/cuda/*.cu, bench/cuda/*.cu) with nvcc, so
# that a CUDA-only error fails here.
# Debian's libkokkos-dev installs the headers of every backend; only five
# headers that Kokkos's configuration writes name the enabled ones, and this
# script writes those five for CUDA into a staging copy.
#
# What it proves: the CUDA instantiations of pair_style uma/kk (PairUMAKokkos<Kokkos::Cuda>)
# and of the plugin entry compile, and the kernels compile to sm_90 device code.  What it
# does not: no CUDA Kokkos library exists here (no Kokkos source on these machines), so
# nothing is linked or run.
#
# Each compile is cached: its key hashes the flags, the compilers' versions and
# the bytes of every file the previous compile read (nvcc's dependency list);
# an unchanged key costs seconds.  usage: kokkos_cuda_check.sh ROOT PYTHON
set -euo pipefail
root="$(cd "$1" && pwd)"; python="$2"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/root_layout.sh"
cache="${UMA_CACHE:-$HOME/.cache/lammps-uma}/kokkos-cuda"
fail() { echo "FAIL: $*"; exit 1; }
nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
[ -x "$nvcc" ] || fail "nvcc not found (the CUDA toolkit is on PATH on this project's machines)"
project="$root$UMA_ROOT_PROJECT"      # the copy scripts/build.sh synced: a path that does not move
lammps_src="$root$UMA_ROOT_LAMMPS_SOURCE/src"
[ -f "$project/pair_style/pair_uma_kokkos.cpp" ] || fail "no project copy in $project (run scripts/build.sh)"
[ -f "$lammps_src/KOKKOS/kokkos_type.h" ] || fail "no LAMMPS source in $lammps_src (run scripts/lammps_env.sh)"
torch_include="$("$python" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "include"))')"

# The staging copy: the root's Kokkos, nlohmann-json and Open MPI headers, with Kokkos's
# five configuration headers for Serial + CUDA.
kokkos_version=$(chroot "$root" dpkg-query -W -f='${Version}' libkokkos-dev)
# (keyed by the Kokkos package and the version of the rewrite below: bump v1 when changing it)
stage="$cache/include-$(printf 'v1 %s' "$kokkos_version" | sha256sum | cut -c1-12)"
if [ ! -f "$stage/.complete" ]; then
  rm -rf "$cache"/include-* && mkdir -p "$stage/mpi"
  cp -r "$root/usr/include/kokkos" "$root/usr/include/nlohmann" "$stage/"
  cp -r "$root/usr/lib/x86_64-linux-gnu/openmpi/include/." "$stage/mpi/"
  k="$stage/kokkos"
  grep -q '^#define KOKKOS_ENABLE_OPENMP$' "$k/KokkosCore_config.h" || fail "unexpected KokkosCore_config.h in the root"
  sed -i 's/^#define KOKKOS_ENABLE_OPENMP$/#define KOKKOS_ENABLE_CUDA\n#define KOKKOS_ENABLE_SERIAL\n#define KOKKOS_ARCH_HOPPER\n#define KOKKOS_ARCH_HOPPER90\n#define KOKKOS_IMPL_ARCH_NVIDIA_GPU 90/' \
    "$k/KokkosCore_config.h"
  sed -i 's/^#define DESUL_IMPL_BUILD_SHARED_LIBS$/&\n#define DESUL_ATOMICS_ENABLE_CUDA/' "$k/desul/atomics/Config.hpp"
  sed -i 's#^\#include <fwd/Kokkos_Fwd_OPENMP.hpp>$#\#include <fwd/Kokkos_Fwd_SERIAL.hpp>\n\#include <fwd/Kokkos_Fwd_CUDA.hpp>#' \
    "$k/KokkosCore_Config_FwdBackend.hpp"
  sed -i 's#^\#include <decl/Kokkos_Declare_OPENMP.hpp>$#\#include <decl/Kokkos_Declare_SERIAL.hpp>\n\#include <decl/Kokkos_Declare_CUDA.hpp>#' \
    "$k/KokkosCore_Config_DeclareBackend.hpp"
  sed -i 's#^\#define KOKKOS_SETUP_HPP_$#&\n\#include <setup/Kokkos_Setup_Cuda.hpp>#' "$k/KokkosCore_Config_SetupBackend.hpp"
  for f in KokkosCore_config.h desul/atomics/Config.hpp KokkosCore_Config_FwdBackend.hpp \
           KokkosCore_Config_DeclareBackend.hpp KokkosCore_Config_SetupBackend.hpp; do
    grep -q "CUDA\|Cuda" "$k/$f" || fail "$f was not rewritten for CUDA"
  done
  touch "$stage/.complete"
fi

# The sources: every .cpp of the styles, the plugin entry and the fix that includes Kokkos headers.
mapfile -t sources < <(cd "$project" && grep -l '#include.*[Kk]okkos' pair_style/*.cpp plugin/*.cpp fix_train/*.cpp)
for must in pair_style/pair_uma_kokkos.cpp plugin/uma_plugin.cpp; do
  [[ " ${sources[*]} " == *" $must "* ]] || fail "$must is not among the sources found to include Kokkos (${sources[*]})"
done
# They compile as one translation unit (LibTorch's and Kokkos's headers, which nvcc parses
# twice, for the host and for the device, parsed once for all of them, not once a source):
# a file of their #includes, rewritten only when the list changes.
styles=("${sources[@]}")
mkdir -p "$cache"
unit="$cache/kokkos_sources.cpp"   # (.cpp: not a kernel source, see own_flags)
printf '#include "%s"\n' "${styles[@]/#/$project/}" > "$unit.new"
cmp -s "$unit.new" "$unit" && rm "$unit.new" || mv "$unit.new" "$unit"
mapfile -t kernels < <(cd "$project" && find src tests bench -path '*/cuda/*.cu' | sort)
[ "${#kernels[@]}" -gt 0 ] || fail "no CUDA kernels (src/**/cuda/*.cu) in $project"
sources=("$unit" "${kernels[@]}")
cuda_include="$(dirname "$(dirname "$(readlink -f "$nvcc")")")/include"
[ -f "$cuda_include/cuda_runtime_api.h" ] || fail "no cuda_runtime_api.h in $cuda_include (beside nvcc)"
# the LAMMPS version the plugin declares (CMake passes it from version.h the same way)
lammps_version="$(sed -n 's/^#define LAMMPS_VERSION "\(.*\)"/\1/p' "$lammps_src/version.h")"
[ -n "$lammps_version" ] || fail "no LAMMPS_VERSION in $lammps_src/version.h"
flags=(-x cu -std=c++20 --extended-lambda --expt-relaxed-constexpr -arch=sm_90 -ccbin g++ -O1
       -DUMA_KOKKOS -DLMP_KOKKOS -DLMP_KOKKOS_DOUBLE_DOUBLE -DLMP_KOKKOS_LAYOUT_LEGACY -DLAMMPS_SMALLBIG
       "-DUMA_BUILT_FOR_LAMMPS=\"$lammps_version\""
       -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX
       -I"$lammps_src" -I"$lammps_src/KOKKOS" -I"$project/src" -I"$project/plugin" -I"$project/lammps_common" -I"$project/pair_style"
       -I"$project/fix_train" -isystem "$stage/kokkos" -isystem "$stage" -isystem "$stage/mpi"
       -isystem "$torch_include" -isystem "$torch_include/torch/csrc/api/include")
tools="$("$nvcc" --version | tail -1) $(g++ --version | head -1)"
mkdir -p "$cache/deps" "$cache/stamps"
# A compile's key: the source, flags, compilers and the bytes of every file its
# dependency list (nvcc -MD) names; fails if one of them is gone.
key_of() {
  local files hashes
  files=$(sed -e 's/^[^:]*://' -e 's/\\$//' "$2" | tr ' ' '\n' | sed '/^$/d' | sort -u)
  hashes=$(cd "$project" && xargs -r sha256sum <<< "$files") || return 1
  printf '%s\n%s\n%s\n%s\n' "$1" "${flags[*]} $(own_flags "$1")" "$tools" "$hashes" | sha256sum | cut -c1-16
}
# The kernels' own: a host-only call inside a __host__ __device__ body, which nvcc only warns
# about (20011-20015), is an error there (it would trap or misbehave on the device).
own_flags() { [[ "$1" == *.cu ]] && echo "--diag-error=20011,20012,20013,20014,20015" || true; }
status=0
for src in "${sources[@]}"; do
  if [ "$src" = "$unit" ]; then name=kokkos_sources; label="${styles[*]} (one unit)"
  else name="${src//\//_}"; label="$src"; fi
  deps="$cache/deps/$name.d"
  [ -f "$deps" ] && key=$(key_of "$src" "$deps" 2>/dev/null) || key=""
  if [ -n "$key" ] && [ -f "$cache/stamps/$name-$key" ]; then
    echo "$label: compiled for Kokkos CUDA (cached, key $key)"; continue
  fi
  echo "$label: compiling for Kokkos CUDA (nvcc, sm_90)"
  t0=$SECONDS
  compile=("$nvcc" "${flags[@]}" $(own_flags "$src") -c -o "$cache/$name.o")
  if (cd "$project" && "${compile[@]}" -MD -MF "$deps.new" "$src") > "$cache/$name.log" 2>&1; then
    mv "$deps.new" "$deps"
    if [ "$src" = "$unit" ] && ! nm -C "$cache/$name.o" | grep 'PairUMAKokkos<Kokkos::Cuda>' > /dev/null; then
      echo "FAIL: ${styles[*]} compiled, but their object holds no PairUMAKokkos<Kokkos::Cuda>"; status=1; continue
    fi
    # (grep reads to the end: with pipefail, grep -q's early exit would fail the pipe)
    if [[ "$src" == *.cu ]] && ! { readelf -S "$cache/$name.o" | grep '\.nv_fatbin' > /dev/null &&
                                   strings "$cache/$name.o" | grep -- '-arch sm_90' > /dev/null; }; then
      echo "FAIL: $label compiled, but its object holds no sm_90 device code"; status=1; continue
    fi
    key=$(key_of "$src" "$deps")
    rm -f "$cache/stamps/$name-"* && touch "$cache/stamps/$name-$key"
    echo "$label: compiled in $((SECONDS - t0)) s"
  else
    grep -m10 -B1 -A3 "error" "$cache/$name.log" || tail -20 "$cache/$name.log"
    echo "FAIL: $label does not compile for Kokkos CUDA (full log: $cache/$name.log)"
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "kokkos cuda compile: passed (${#styles[@]} sources that include Kokkos, as one unit, and ${#kernels[@]} of the engine's CUDA kernels and their checks; compiled, not linked or run)"
exit "$status"
