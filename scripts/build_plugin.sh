#!/usr/bin/env bash
# Builds the engine, the uma tool, the engine tests and umaplugin.so inside the
# LAMMPS root (g++ 16, the torch wheel's LibTorch, against the root's LAMMPS)
# from a copy of this tree in the root's UMA_ROOT_PROJECT
# (scripts/root_layout.sh); the build folder there persists between runs.
# usage: build_plugin.sh ROOT
set -euo pipefail
root="$1"
src="$(cd "$(dirname "$0")/.." && pwd)"
source "$src/scripts/root_layout.sh"
dest="$root$UMA_ROOT_PROJECT"
build="$(basename "$UMA_ROOT_BUILD")"   # inside the project's copy
mkdir -p "$dest"
# the sources (not build trees), with their own timestamps: unchanged files
# are not rebuilt; files deleted or moved here go there too
find "$dest" -mindepth 1 -maxdepth 1 ! -name "$build*" -exec rm -rf {} +
tar -C "$src" --exclude=./build --exclude='./build-*' --exclude=.git -cf - . | tar -C "$dest" -xf -
"$src/scripts/in_sid.sh" "$root" bash -c '
  set -e
  cd "$UMA_ROOT_PROJECT"
  log="$UMA_ROOT_BUILD.log"
  launcher=""
  if command -v ccache >/dev/null; then
    export CCACHE_DIR="$UMA_ROOT_CCACHE" CCACHE_BASEDIR="$UMA_ROOT_PROJECT"
    launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  fi
  kokkos=OFF; "$UMA_ROOT_LAMMPS/bin/lmp" -h | grep -A2 "Installed packages" | grep -qw KOKKOS && kokkos=ON
  cmake -S . -B "$UMA_ROOT_BUILD" -DCMAKE_BUILD_TYPE=Release -DUMA_BUILD_PLUGIN=ON -DUMA_FUZZ=OFF -DUMA_KOKKOS=$kokkos $launcher \
    -DUMA_TORCH_DIR="$UMA_ROOT_TORCH/site-packages/torch" \
    -DCMAKE_PREFIX_PATH="$UMA_ROOT_LAMMPS" -DUMA_LAMMPS_SOURCE_DIR="$UMA_ROOT_LAMMPS_SOURCE/src" > "$log" 2>&1 ||
    { tail -20 "$log"; exit 1; }
  cmake --build "$UMA_ROOT_BUILD" -j"$(nproc)" >> "$log" 2>&1 || { grep -m5 -A5 error "$log"; exit 1; }'
echo "built $UMA_ROOT_BUILD/umaplugin.so in $root"
