#!/usr/bin/env bash
# A LAMMPS with the KOKKOS package on CUDA (sm_90, Hopper), for pair_style
# uma/kk on the GPU machine, built here with this machine's nvcc (the GPU
# machine has none).  usage:
#
#   scripts/kokkos_cuda_lammps.sh KOKKOS_GIT LAMMPS_GIT MPIROOT PREFIX
#
# KOKKOS_GIT, LAMMPS_GIT: git directories of public snapshots (the search
# tool's `fetch github:kokkos/kokkos` and `fetch github:stanmoore1/lammps`;
# never committed here).  Why these: LAMMPS 4 Jul 2026's KOKKOS requires
# Kokkos >= 5.1, and no Kokkos 5 source reaches these machines (Debian's
# source packages answer 404, only its binary packages download; Debian's
# libkokkos-dev has no CUDA backend).  The Kokkos snapshot is 4.6.99 (June
# 2025); the LAMMPS snapshot is 29 Aug 2024 (development, October 2024),
# whose KOKKOS asks for Kokkos >= 4.4.01.
#
# What it does to them (in copies, in the cache):
#  - Kokkos: two calls in Cuda/Kokkos_Cuda_Instance.hpp take CUDA 13's
#    signatures (cudaGraphAddDependencies gained an edge-data argument,
#    cudaMemPrefetchAsync a cudaMemLocation and flags); its nvcc_wrapper's
#    default architecture becomes sm_90 (CUDA 13 has no sm_70).  Serial +
#    CUDA, C++20, shared libraries.
#  - LAMMPS: PLUGIN and KOKKOS with MPI (MPIROOT's Open MPI), C++20, shared;
#    the KOKKOS styles that uma/kk's checks do not use are left out (pair,
#    compute, fix and region styles other than hybrid, temp, nve, nh,
#    minimize, property/atom, neigh/history): 34 KOKKOS sources instead of
#    75.  Sources without a Kokkos include compile with g++, the others with
#    nvcc_wrapper (a compiler script, cxx_pick, written into the cache).
#
# Installs Kokkos into PREFIX/kokkos and LAMMPS into PREFIX/lammps (RUNPATHs
# there; libkokkoscore needs libcudart.so.13, which a run finds on
# LD_LIBRARY_PATH, e.g. the torch wheel's nvidia/cu13/lib).  Cached in $UMA_CACHE/kokkos-cuda-lammps-KEY (KEY: the snapshots'
# commits, nvcc's and g++'s versions, MPIROOT's Open MPI, PREFIX and this
# recipe's version); a warm cache only installs.  Prints the LAMMPS source
# folder (for the plugin's UMA_LAMMPS_SOURCE_DIR) on its last line.
set -euo pipefail
[ $# -eq 4 ] || { sed -n '2,9p' "$0"; exit 2; }
kokkos_git="$1"; lammps_git="$2"; mpiroot="$3"; prefix="$(realpath -m "$4")"
fail() { echo "kokkos_cuda_lammps: $*" >&2; exit 1; }
recipe=v1   # bump when changing what this script does to the sources or the flags
nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
[ -x "$nvcc" ] || fail "no nvcc (the CUDA toolkit) on this machine"
[ -x "$mpiroot/bin/mpicxx" ] || fail "no Open MPI in $mpiroot"
kokkos_commit="$(git -C "$kokkos_git" rev-parse HEAD)" || fail "$kokkos_git is not a git directory"
lammps_commit="$(git -C "$lammps_git" rev-parse HEAD)" || fail "$lammps_git is not a git directory"
key="$(printf '%s\n' "$recipe" "$kokkos_commit" "$lammps_commit" "$("$nvcc" --version | tail -1)" \
       "$(g++ --version | head -1)" "$(ls "$mpiroot"/lib/libmpi.so.* | head -1)" "$prefix" | sha256sum | cut -c1-16)"
cache="${UMA_CACHE:-$HOME/.cache/lammps-uma}/kokkos-cuda-lammps-$key"
jobs="${UMA_JOBS:-$(nproc)}"
mkdir -p "$cache/bin" "$cache/src"

# --- the sources
k_src="$cache/src/kokkos"; l_src="$cache/src/lammps"
if [ ! -f "$k_src/.complete" ]; then
  rm -rf "$k_src" && mkdir -p "$k_src"
  git -C "$kokkos_git" archive HEAD | tar -x -C "$k_src"
  grep -q 'set(Kokkos_VERSION_MAJOR 4)' "$k_src/CMakeLists.txt" || fail "the Kokkos snapshot is not a Kokkos 4"
  inst="$k_src/core/src/Cuda/Kokkos_Cuda_Instance.hpp"
  sed -i -e 's/return cudaGraphAddDependencies(graph, from, to, numDependencies);/return cudaGraphAddDependencies(graph, from, to, nullptr, numDependencies);/' \
         -e 's/return cudaMemPrefetchAsync(devPtr, count, dstDevice, m_stream);/return cudaMemPrefetchAsync(devPtr, count, cudaMemLocation{cudaMemLocationTypeDevice, dstDevice}, 0, m_stream);/' \
         "$inst"
  grep -q 'cudaGraphAddDependencies(graph, from, to, nullptr, numDependencies)' "$inst" &&
    grep -q 'cudaMemLocation{cudaMemLocationTypeDevice, dstDevice}' "$inst" ||
    fail "Kokkos_Cuda_Instance.hpp did not take CUDA 13's signatures (another Kokkos snapshot?)"
  touch "$k_src/.complete"
fi
if [ ! -f "$l_src/.complete" ]; then
  rm -rf "$l_src" && mkdir -p "$l_src"
  # each folder from its own tree: a snapshot may lack blobs elsewhere (the
  # fetched one lacks bench/POTENTIALS/data.gb), which `git archive HEAD PATHS` still reads
  for d in cmake src; do
    git -C "$lammps_git" archive --prefix="$d/" "HEAD:$d" | tar -x -C "$l_src" || fail "cannot extract $d/ from $lammps_git"
  done
  mkdir -p "$l_src/doc" && git -C "$lammps_git" show HEAD:doc/lammps.1 > "$l_src/doc/lammps.1"
  mkdir -p "$l_src/bench" "$l_src/potentials"   # installed as share/lammps/*; not used here
  grep -q 'find_package(Kokkos 4' "$l_src/cmake/Modules/Packages/KOKKOS.cmake" ||
    fail "the LAMMPS snapshot's KOKKOS does not take a Kokkos 4"
  keep=(pair_kokkos pair_hybrid_kokkos pair_hybrid_overlay_kokkos compute_temp_kokkos fix_nh_kokkos fix_nve_kokkos
        fix_nvt_kokkos fix_npt_kokkos fix_nph_kokkos fix_minimize_kokkos fix_property_atom_kokkos
        fix_neigh_history_kokkos)
  (cd "$l_src/src/KOKKOS" &&
   for f in pair_*_kokkos.cpp compute_*_kokkos.cpp fix_*_kokkos.cpp region_*_kokkos.cpp \
            {angle,bond,dihedral,improper}_hybrid_kokkos.cpp atom_vec_{charge,sphere}_kokkos.cpp; do
     b="${f%.cpp}"
     [[ " ${keep[*]} " == *" $b "* ]] || rm -f "$b.cpp" "$b.h"
   done)
  touch "$l_src/.complete"
fi

# --- the compilers
sed 's/^default_arch="sm_70"/default_arch="sm_90"/' "$k_src/bin/nvcc_wrapper" > "$cache/bin/nvcc_wrapper"
chmod +x "$cache/bin/nvcc_wrapper"
grep -q '^default_arch="sm_90"' "$cache/bin/nvcc_wrapper" || fail "nvcc_wrapper's default architecture not found"
cat > "$cache/bin/cxx_pick" <<'EOF'
#!/usr/bin/env bash
# LAMMPS's C++ compiler for a KOKKOS CUDA build: a source that includes a
# Kokkos header (by name), or lies in KOKKOS/, goes through nvcc_wrapper; the
# others through g++ without nvcc's flags (a g++ failure retries nvcc_wrapper).
here="$(cd "$(dirname "$0")" && pwd)"
src=""
for a in "$@"; do case "$a" in *.cpp|*.cxx|*.cc|*.cu) src="$a" ;; esac; done
if [ -n "$src" ] && [[ "$src" != */KOKKOS/* ]] &&
   ! grep -qiE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^">]*kokkos' "$src"; then
  args=()
  for a in "$@"; do
    case "$a" in -extended-lambda|--extended-lambda|-Wext-lambda-captures-this|-arch=*|--expt-*|-expt-*) ;;
                 *) args+=("$a") ;; esac
  done
  g++ "${args[@]}" 2>/dev/null && exit 0
fi
exec "$here/nvcc_wrapper" "$@"
EOF
chmod +x "$cache/bin/cxx_pick"

# libkokkoscore needs the CUDA driver (libcuda.so.1), which only a GPU machine
# has: lmp links against the toolkit's stub, found through -rpath-link (no
# RUNPATH is written for it; there the driver's own library loads).
mkdir -p "$cache/stubs"
ln -sf "$(dirname "$(readlink -f "$nvcc")")/../lib64/stubs/libcuda.so" "$cache/stubs/libcuda.so.1"
[ -e "$cache/stubs/libcuda.so.1" ] || fail "no libcuda.so stub in the CUDA toolkit"

# --- Kokkos
if [ ! -f "$cache/kokkos-build/.complete" ]; then   # (a failed build goes on where it stopped)
  cmake -S "$k_src" -B "$cache/kokkos-build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$cache/bin/nvcc_wrapper" -DCMAKE_CXX_STANDARD=20 \
    -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_SERIAL=ON -DKokkos_ARCH_HOPPER90=ON \
    -DKokkos_ENABLE_DEPRECATED_CODE_4=ON -DBUILD_SHARED_LIBS=ON \
    -DCMAKE_INSTALL_PREFIX="$prefix/kokkos" -DCMAKE_INSTALL_LIBDIR=lib > "$cache/kokkos-configure.log"
  cmake --build "$cache/kokkos-build" -j"$jobs"
  touch "$cache/kokkos-build/.complete"
fi
cmake --install "$cache/kokkos-build" > /dev/null

# --- LAMMPS
if [ ! -f "$cache/lammps-build/.complete" ]; then   # (a failed build goes on where it stopped)
  OMPI_CXX="$cache/bin/nvcc_wrapper" cmake -S "$l_src/cmake" -B "$cache/lammps-build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$cache/bin/cxx_pick" -DCMAKE_CXX_STANDARD=20 \
    -DBUILD_MPI=on -DMPI_C_COMPILER="$mpiroot/bin/mpicc" -DMPI_CXX_COMPILER="$mpiroot/bin/mpicxx" \
    -DBUILD_OMP=off -DBUILD_SHARED_LIBS=on -DPKG_PLUGIN=on -DPKG_KOKKOS=on -DEXTERNAL_KOKKOS=on \
    -DKokkos_DIR="$prefix/kokkos/lib/cmake/Kokkos" \
    -DBUILD_TOOLS=off -DBUILD_DOC=off -DENABLE_TESTING=off -DDOWNLOAD_POTENTIALS=off \
    -DWITH_JPEG=off -DWITH_PNG=off -DWITH_GZIP=off -DWITH_FFMPEG=off -DWITH_CURL=off \
    -DCMAKE_INSTALL_PREFIX="$prefix/lammps" -DCMAKE_INSTALL_LIBDIR=lib \
    -DCMAKE_INSTALL_RPATH="$prefix/lammps/lib;$prefix/kokkos/lib" \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$cache/stubs" > "$cache/lammps-configure.log"
  OMPI_CXX="$cache/bin/nvcc_wrapper" cmake --build "$cache/lammps-build" -j"$jobs"
  touch "$cache/lammps-build/.complete"
fi
cmake --install "$cache/lammps-build" > /dev/null
[ -x "$prefix/lammps/bin/lmp" ] || fail "no lmp in $prefix/lammps/bin"
echo "$l_src/src"
