#!/usr/bin/env bash
# Builds, once, the LAMMPS environment the plugin is built against, cached
# under $UMA_CACHE and keyed by this script's contents:
#   - a Debian sid root (debootstrap) with g++, CMake, Open MPI and Kokkos
#     >= 5.1 (libkokkos-dev; Debian ships no Kokkos source and bookworm no
#     Kokkos at all, so LAMMPS is built inside sid);
#   - the LibTorch of the project's pinned PyPI torch wheel (CUDA-capable, it
#     runs on CPUs too), hard-linked into /opt/torch from the Python
#     environment scripts/env.sh made: the engine and the plugin link the same
#     LibTorch everywhere;
#   - LAMMPS 4 Jul 2026 from Debian's source package, with PLUGIN, KOKKOS
#     (external Kokkos, OpenMP), MOLECULE, MANYBODY, KSPACE, EXTRA-FIX, MC,
#     REPLICA, PYTHON and MPI, installed to /opt/lammps inside the root, and
#     LAMMPS's Python module installed for the root's python3 (with ASE from
#     Debian, for the workflow tests).
# Prints the root's path on stdout.  Run commands inside with scripts/in_sid.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh >/dev/null   # its progress lines go to stderr
source scripts/root_layout.sh      # the paths inside the root
log() { printf '[lammps-env] %s\n' "$*" >&2; }

packages="g++ cmake make ca-certificates libopenmpi-dev openmpi-bin libkokkos-dev
  nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev python3"
lammps_flags="-D CMAKE_BUILD_TYPE=Release -D BUILD_SHARED_LIBS=on -D CMAKE_INSTALL_PREFIX=$UMA_ROOT_LAMMPS
  -D BUILD_MPI=on -D BUILD_OMP=on -D PKG_PLUGIN=on -D PKG_KOKKOS=on -D EXTERNAL_KOKKOS=on
  -D Kokkos_ENABLE_OPENMP=on -D PKG_MOLECULE=on -D PKG_MANYBODY=on -D PKG_KSPACE=on
  -D PKG_EXTRA-FIX=on -D PKG_MC=on -D PKG_REPLICA=on -D PKG_PYTHON=on -D FFT=KISS
  -D CMAKE_CXX_COMPILER_LAUNCHER=ccache -D CMAKE_C_COMPILER_LAUNCHER=ccache"
# the root is keyed by its package list, the LAMMPS build by its flags
root="$UMA_CACHE/sid-root-$(printf 'v1 %s' "$packages" | sha256sum | cut -c1-12)"
lammps_done="$root$UMA_ROOT_LAMMPS/.built-$(printf '20260704 %s' "$lammps_flags" | sha256sum | cut -c1-12)"
export UMA_SID_ROOT="$root"

if [ ! -f "$root/.base-complete" ]; then
  command -v debootstrap >/dev/null || { apt-get update -qq; apt-get install -y -qq debootstrap >/dev/null; }
  rm -rf "$root"
  # The mirror the host already uses for Debian.
  mirror=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1)
  [ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list)
  log "debootstrap sid into $root"
  debootstrap --variant=minbase sid "$root" "$mirror" >"$UMA_CACHE/debootstrap.log" 2>&1 ||
    { tail -20 "$UMA_CACHE/debootstrap.log" >&2; exit 1; }
  sed -n 's/^deb /deb-src /p' "$root/etc/apt/sources.list" >> "$root/etc/apt/sources.list"
  # The registry serves a dated snapshot of sid whose Release file may be past
  # its Valid-Until date; signatures are still checked.
  echo 'Acquire::Check-Valid-Until "false";' > "$root/etc/apt/apt.conf.d/99uma-snapshot"
  touch "$root/.base-complete"
fi

if [ ! -f "$root/.packages-complete" ]; then
  log "installing the toolchain, Open MPI, LibTorch and Kokkos in the sid root"
  scripts/in_sid.sh "$root" env PACKAGES="$packages" bash -c '
    set -e
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null
    # Kokkos CMake files name two archives the package does not ship.
    libdir=$(dirname "$(find / -xdev -name libkokkoscore.so -print -quit)")
    for a in libkokkosalgorithms.a libkokkossimd.a; do [ -e "$libdir/$a" ] || ar rcs "$libdir/$a"; done'
  touch "$root/.packages-complete"
fi

# Packages added to the root after it was made, keyed separately (a new one
# does not make the root again): ccache for the LAMMPS and plugin builds,
# python3-dev for LAMMPS's PYTHON package, ASE for the Python workflow tests.
runtime_packages="ccache python3-dev python3-ase"
runtime_done="$root/.runtime-$(printf '%s' "$runtime_packages" | sha256sum | cut -c1-12)"
if [ ! -f "$runtime_done" ]; then
  log "installing $runtime_packages in the sid root"
  scripts/in_sid.sh "$root" env PACKAGES="$runtime_packages" bash -c '
    set -e
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null 2>&1 ||
      { apt-get update -qq && apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null; }'
  touch "$runtime_done"
fi
if [ ! -f "$lammps_done" ]; then
  log "fetching the LAMMPS 4 Jul 2026 source package"
  scripts/in_sid.sh "$root" bash -c '
    set -e
    mkdir -p /src && cd /src
    ls lammps_20260704*.orig.tar.* >/dev/null 2>&1 || apt-get source --download-only lammps >/dev/null 2>&1 || true
    tarball=$(ls lammps_20260704*.orig.tar.* 2>/dev/null | head -1)
    [ -n "$tarball" ] || { echo "the LAMMPS 20260704 source archive could not be fetched" >&2; exit 1; }
    rm -rf lammps && mkdir lammps && tar -xf "$tarball" -C lammps'
  log "building LAMMPS with KOKKOS, PLUGIN, MC, REPLICA and PYTHON (about 15 minutes on 2 cores, less with ccache)"
  scripts/in_sid.sh "$root" env FLAGS="$lammps_flags" CCACHE_DIR="$UMA_ROOT_CCACHE" bash -c '
    set -e
    cd /src
    rm -rf build
    cmake -S lammps/cmake -B build $FLAGS > /src/cmake.log 2>&1 || { tail -30 /src/cmake.log >&2; exit 1; }
    cmake --build build -j"$(nproc)" > /src/build.log 2>&1 || { grep -m5 -B2 -A5 "error" /src/build.log >&2; exit 1; }
    cmake --install build > /dev/null
    # LAMMPS'"'"'s Python module (pure Python; it loads /opt/lammps/lib/liblammps.so through the
    # loader cache) into the root'"'"'s python3
    site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()[\"purelib\"])")
    rm -rf "$site/lammps" && mkdir -p "$site" && cp -r lammps/python/lammps "$site/lammps"'
  touch "$lammps_done"
fi
# The torch wheel's LibTorch and its CUDA libraries, keyed by the Python
# environment (hard links: no copy of the 4 GB where the file system allows).
site=$("$UMA_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
torch_done="$root$UMA_ROOT_TORCH/.complete-$(basename "$(dirname "$(dirname "$UMA_PYTHON")")")"
if [ ! -f "$torch_done" ]; then
  log "placing the torch wheel's LibTorch in the sid root ($UMA_ROOT_TORCH)"
  rm -rf "${root:?}$UMA_ROOT_TORCH" && mkdir -p "$root$UMA_ROOT_TORCH/site-packages"
  for d in torch nvidia; do
    cp -al "$site/$d" "$root$UMA_ROOT_TORCH/site-packages/" 2>/dev/null || cp -a "$site/$d" "$root$UMA_ROOT_TORCH/site-packages/"
  done
  touch "$torch_done"
fi
# the installed lmp and the plugin find liblammps through the loader cache
if [ ! -f "$root/etc/ld.so.conf.d/lammps.conf" ]; then
  echo "$UMA_ROOT_LAMMPS/lib" > "$root/etc/ld.so.conf.d/lammps.conf"
  chroot "$root" ldconfig
fi
echo "$root"
