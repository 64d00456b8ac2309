#!/usr/bin/env bash
# Builds the project once, with the LAMMPS root's toolchain (g++ for the engine,
# the uma tool, the engine tests and umaplugin.so, which must match LAMMPS's
# compiler; clang for the fuzzers), in one build tree: the root's UMA_ROOT_BUILD
# (scripts/root_layout.sh).  Sets up what it needs first: the LAMMPS root
# (scripts/lammps_env.sh) and the Python environment whose torch wheel is the
# LibTorch linked (scripts/python_env.sh), which it places in the root.
#   build.sh [TARGET...]     default: everything; scripts/run.sh asks for umaplugin only
# The sources are synced into the root by content (rsync --checksum): a file whose
# bytes did not change keeps its time stamp there, so a clone in any folder
# rebuilds only what differs from the last build; the compiler cache
# (<root>.ccache) is keyed by content too.
set -euo pipefail
cd "$(dirname "$0")/.."
export UMA_CACHE="${UMA_CACHE:-$HOME/.cache/lammps-uma}"
source scripts/root_layout.sh
root="${UMA_SID_ROOT:-$(scripts/lammps_env.sh)}"
python="${UMA_PYTHON:-$(scripts/python_env.sh)}"
log() { printf '[build] %s\n' "$*" >&2; }

# The torch wheel's LibTorch and its CUDA libraries, keyed by the Python
# environment (hard links: no copy of the 4 GB where the file system allows).
venv="$(basename "$(dirname "$(dirname "$python")")")"
if [ ! -f "$root$UMA_ROOT_TORCH/.complete-$venv" ]; then
  log "placing the torch wheel's LibTorch in the root ($UMA_ROOT_TORCH)"
  site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  rm -rf "${root:?}$UMA_ROOT_TORCH" && mkdir -p "$root$UMA_ROOT_TORCH/site-packages"
  for d in torch nvidia; do
    cp -al "$site/$d" "$root$UMA_ROOT_TORCH/site-packages/" 2>/dev/null || cp -a "$site/$d" "$root$UMA_ROOT_TORCH/site-packages/"
  done
  touch "$root$UMA_ROOT_TORCH/.complete-$venv"
fi

# The sources: what git tracks or would track (.gitignore'd outputs stay out).
dest="$root$UMA_ROOT_PROJECT"
mkdir -p "$dest"
rsync -rlc --delete --filter=':- .gitignore' --exclude=/.git --exclude="/$(basename "$UMA_ROOT_BUILD")" \
  --exclude=/fresh-fixtures ./ "$dest/"

log "building ${*:-everything} in $UMA_ROOT_BUILD (the root's toolchain)"
scripts/in_sid.sh "$root" env TARGETS="$*" bash -c '
  set -e
  cd "$UMA_ROOT_PROJECT"
  log="$UMA_ROOT_BUILD.log"
  export CCACHE_BASEDIR="$UMA_ROOT_PROJECT" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=8G
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime   # the torch PCH
  kokkos=OFF; "$UMA_ROOT_LAMMPS/bin/lmp" -h | grep -A2 "Installed packages" | grep -qw KOKKOS && kokkos=ON
  if [ ! -f "$UMA_ROOT_BUILD/build.ninja" ]; then
    cmake -S . -B "$UMA_ROOT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
      -DUMA_BUILD_PLUGIN=ON -DUMA_KOKKOS=$kokkos -DUMA_FUZZ=ON \
      -DUMA_TORCH_DIR="$UMA_ROOT_TORCH/site-packages/torch" \
      -DCMAKE_PREFIX_PATH="$UMA_ROOT_LAMMPS" -DUMA_LAMMPS_SOURCE_DIR="$UMA_ROOT_LAMMPS_SOURCE/src" > "$log" 2>&1 ||
      { tail -20 "$log"; exit 1; }
  fi
  cmake --build "$UMA_ROOT_BUILD" -j"$(nproc)" ${TARGETS:+--target $TARGETS} > "$log" 2>&1 ||
    { grep -m5 -B2 -A8 "error" "$log" || tail -30 "$log"; exit 1; }'
log "built in $root$UMA_ROOT_BUILD"
