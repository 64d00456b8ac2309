#!/usr/bin/env bash
# Builds the engine, the uma tool, the engine tests and umaplugin.so inside the
# LAMMPS root (g++ 16, the torch wheel's LibTorch in /opt/torch, against
# /opt/lammps) from a copy of this tree in ROOT/src/uma-check; the build
# folder there persists between runs.
# usage: build_plugin.sh ROOT
set -euo pipefail
root="$1"
src="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/src/uma-check"
mkdir -p "$dest"
# the sources (not build trees), with their own timestamps: unchanged files
# are not rebuilt; files deleted or moved here go there too
find "$dest" -mindepth 1 -maxdepth 1 ! -name 'build-*' -exec rm -rf {} +
tar -C "$src" --exclude=./build --exclude='./build-*' --exclude=.git -cf - . | tar -C "$dest" -xf -
"$src/scripts/in_sid.sh" "$root" bash -c '
  set -e
  cd /src/uma-check
  launcher=""
  if command -v ccache >/dev/null; then
    export CCACHE_DIR=/var/cache/uma-ccache CCACHE_BASEDIR=/src/uma-check
    launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  fi
  kokkos=OFF; /opt/lammps/bin/lmp -h | grep -A2 "Installed packages" | grep -qw KOKKOS && kokkos=ON
  cmake -S . -B build-root -DCMAKE_BUILD_TYPE=Release -DUMA_BUILD_PLUGIN=ON -DUMA_FUZZ=OFF -DUMA_KOKKOS=$kokkos $launcher \
    -DUMA_TORCH_DIR=/opt/torch/site-packages/torch \
    -DCMAKE_PREFIX_PATH=/opt/lammps -DUMA_LAMMPS_SOURCE_DIR=/src/lammps/src > build-root.log 2>&1 ||
    { tail -20 build-root.log; exit 1; }
  cmake --build build-root -j"$(nproc)" >> build-root.log 2>&1 || { grep -m5 -A5 error build-root.log; exit 1; }'
echo "built /src/uma-check/build-root/umaplugin.so in $root"
