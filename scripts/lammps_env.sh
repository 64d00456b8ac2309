#!/usr/bin/env bash
# Builds, once, the LAMMPS environment the plugin is built against, cached
# under $UMA_CACHE:
#   - a Debian sid root (debootstrap; Debian ships no Kokkos source and bookworm
#     no Kokkos at all, so LAMMPS is built inside sid), keyed by the suite;
#   - the root's packages, keyed by their list (added to, never remade): g++ and
#     clang (the engine, the plugin and the fuzzers are built here, scripts/build.sh),
#     CMake and Ninja, Open MPI, Kokkos >= 5.1 (libkokkos-dev), ccache, python3
#     with ASE;
#   - LAMMPS 4 Jul 2026 from Debian's source package, keyed by its CMake flags,
#     installed to /opt/lammps inside the root, and LAMMPS's Python module for
#     the root's python3.
# It needs no Python environment: the torch wheel's LibTorch is placed in the
# root by scripts/build.sh.  Prints the root's path on stdout.  Run commands
# inside with scripts/in_sid.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export UMA_CACHE="${UMA_CACHE:-$HOME/.cache/lammps-uma}"
mkdir -p "$UMA_CACHE"   # a fresh machine has none; the logs below go there
scripts/host_packages.sh
source scripts/root_layout.sh      # the paths inside the root
log() { printf '[lammps-env] %s\n' "$*" >&2; }

packages="g++ clang libclang-rt-dev cmake ninja-build make ca-certificates libopenmpi-dev openmpi-bin
  libkokkos-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev ccache python3 python3-dev python3-ase"
# Each package is here because something the project ships uses it:
#   PLUGIN     umaplugin.so itself
#   KOKKOS     pair_style uma/kk (cases_kokkos.py, bench/lammps_kokkos.py); external Kokkos, OpenMP
#              (BUILD_OMP is what Kokkos's OpenMP backend requires)
#   MANYBODY   pair_style eam, the reference of fix uma/train (examples cu_otf, cu_otf_gated,
#              cases_fix_train.py, cases_gate.py) and the MC workflows
#   MC         fix atom/swap and fix gcmc (examples mc_cuni_swap, gcmc_ar_cu; cases_workflows.py)
#   REPLICA    neb and fix pimd/langevin (example neb_cu_vacancy; cases_workflows.py)
#   PYTHON     LAMMPS's Python module and python commands (example python_ase; cases_workflows.py)
# With KOKKOS, LAMMPS compiles the Kokkos version of each enabled style that has one: every
# package left out also leaves out its Kokkos styles.
lammps_flags="-G Ninja -D CMAKE_BUILD_TYPE=Release -D BUILD_SHARED_LIBS=on -D CMAKE_INSTALL_PREFIX=$UMA_ROOT_LAMMPS
  -D BUILD_MPI=on -D BUILD_OMP=on -D PKG_PLUGIN=on -D PKG_KOKKOS=on -D EXTERNAL_KOKKOS=on
  -D Kokkos_ENABLE_OPENMP=on -D PKG_MANYBODY=on -D PKG_MC=on -D PKG_REPLICA=on -D PKG_PYTHON=on
  -D CMAKE_CXX_COMPILER_LAUNCHER=ccache -D CMAKE_C_COMPILER_LAUNCHER=ccache"
# -O1: the model, not LAMMPS, takes the time of a step with pair_style uma (LAMMPS's
# own parts, Neigh, Comm, Output and Other, are under 1% of the tests' runs at -O2),
# and LAMMPS compiles in about 70% of -O2's time (CMake's Release, -O3, is slower still).
lammps_optimisation="-O1 -DNDEBUG"
# With KOKKOS, LAMMPS compiles a Kokkos version of every enabled style that has one; those of
# the styles below, which nothing the project ships runs (tests/, examples/, bench/), are taken
# out of the source before the build (their plain versions stay; -sf kk falls back to them):
# nearly a third of the build's compile time.
# Each must be there: a LAMMPS whose KOKKOS package has changed stops here.
kokkos_unused="pair_adp pair_born pair_buck pair_buck_coul_cut pair_coul_cut pair_coul_debye pair_coul_dsf
  pair_coul_wolf pair_lj_cut_coul_cut pair_lj_expand pair_morse pair_soft pair_sw pair_table pair_tersoff
  pair_tersoff_mod pair_tersoff_zbl pair_vashishta pair_yukawa pair_zbl fix_wall_harmonic fix_wall_lj1043
  fix_wall_lj126 fix_wall_lj93 fix_wall_morse fix_wall_reflect fix_wall_region compute_coord_atom
  compute_orientorder_atom pair_eam_fs pair_hybrid_scaled fix_addforce fix_aveforce fix_deform fix_dt_reset
  fix_efield fix_enforce2d fix_external fix_gravity fix_lineforce fix_momentum fix_nph fix_nph_sphere
  fix_npt_sphere fix_nve_limit fix_nve_noforce fix_nve_sphere fix_nvt_sllod fix_nvt_sphere fix_planeforce
  fix_recenter fix_spring fix_spring_self fix_temp_berendsen fix_temp_rescale fix_viscous
  compute_erotate_sphere compute_temp_com compute_temp_deform compute_temp_sphere min_fire region_sphere
  atom_vec_charge atom_vec_sphere"
root="$UMA_CACHE/sid-root-v2"
packages_done="$root/.packages-$(printf '%s' "$packages" | sha256sum | cut -c1-12)"
lammps_done="$root$UMA_ROOT_LAMMPS/.built-$(printf '20260704 %s %s %s' "$lammps_flags" "$lammps_optimisation" "$kokkos_unused" |
                                            sha256sum | cut -c1-12)"
export UMA_SID_ROOT="$root"

if [ ! -f "$root/.base-complete" ]; then
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

if [ ! -f "$packages_done" ]; then
  log "installing the toolchains, Open MPI, Kokkos and python3 in the sid root"
  scripts/in_sid.sh "$root" env PACKAGES="$packages" bash -c '
    set -e
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null
    # Kokkos CMake files name two archives the package does not ship.
    libdir=$(dirname "$(find / -xdev -name libkokkoscore.so -print -quit)")
    for a in libkokkosalgorithms.a libkokkossimd.a; do [ -e "$libdir/$a" ] || ar rcs "$libdir/$a"; done'
  rm -f "$root"/.packages-*
  touch "$packages_done"
fi
if [ ! -f "$lammps_done" ]; then
  log "fetching the LAMMPS 4 Jul 2026 source package"
  scripts/in_sid.sh "$root" env UNUSED="$kokkos_unused" bash -c '
    set -e
    mkdir -p /src && cd /src
    ls lammps_20260704*.orig.tar.* >/dev/null 2>&1 || apt-get source --download-only lammps >/dev/null 2>&1 || true
    tarball=$(ls lammps_20260704*.orig.tar.* 2>/dev/null | head -1)
    [ -n "$tarball" ] || { echo "the LAMMPS 20260704 source archive could not be fetched" >&2; exit 1; }
    rm -rf lammps && mkdir lammps && tar -xf "$tarball" -C lammps
    for style in $UNUSED; do
      for f in "lammps/src/KOKKOS/${style}_kokkos.cpp" "lammps/src/KOKKOS/${style}_kokkos.h"; do
        [ -f "$f" ] || { echo "$f is not in the LAMMPS source: update kokkos_unused in scripts/lammps_env.sh" >&2; exit 1; }
        rm "$f"
      done
    done'
  log "building LAMMPS with PLUGIN, KOKKOS, MANYBODY, MC, REPLICA and PYTHON (minutes with a warm ccache)"
  # (ccache in depend mode: a compile it has not seen is not preprocessed a second time for its key)
  scripts/in_sid.sh "$root" env FLAGS="$lammps_flags" OPTIMISATION="$lammps_optimisation" CCACHE_DEPEND=1 bash -c '
    set -e
    cd /src
    rm -rf build
    cmake -S lammps/cmake -B build $FLAGS -D CMAKE_CXX_FLAGS_RELEASE="$OPTIMISATION" \
      -D CMAKE_C_FLAGS_RELEASE="$OPTIMISATION" > /src/cmake.log 2>&1 || { tail -30 /src/cmake.log >&2; exit 1; }
    cmake --build build -j"$(nproc)" > /src/build.log 2>&1 || { grep -m5 -B2 -A5 "error" /src/build.log >&2; exit 1; }
    cmake --install build > /dev/null
    # LAMMPS'"'"'s Python module (pure Python; it loads /opt/lammps/lib/liblammps.so through the
    # loader cache) into the root'"'"'s python3
    site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()[\"purelib\"])")
    rm -rf "$site/lammps" && mkdir -p "$site" && cp -r lammps/python/lammps "$site/lammps"'
  touch "$lammps_done"
fi
# the installed lmp and the plugin find liblammps through the loader cache
if [ ! -f "$root/etc/ld.so.conf.d/lammps.conf" ]; then
  echo "$UMA_ROOT_LAMMPS/lib" > "$root/etc/ld.so.conf.d/lammps.conf"
  chroot "$root" ldconfig
fi
echo "$root"
