#!/usr/bin/env bash
# Builds the uma tool of another commit in the LAMMPS root, beside the project's own build, for
# bench/before_after.py:  bench/build_commit.sh COMMIT  ->  /src/uma-old/build-root/uma in the root.
# The same compiler, flags and relative paths as scripts/build.sh, so the root's compiler cache
# serves every object the two commits share.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: bench/build_commit.sh COMMIT" >&2; exit 2; }
export UMA_CACHE="${UMA_CACHE:-$HOME/.cache/lammps-uma}"
root="$UMA_CACHE/sid-root-v2"
[ -d "$root/opt/lammps" ] || { echo "no LAMMPS root yet: run scripts/test.sh once" >&2; exit 1; }
rm -rf "$root/src/uma-old" && mkdir -p "$root/src/uma-old"
git archive "$1" | tar -x -C "$root/src/uma-old"
scripts/in_sid.sh "$root" bash -c '
  set -e; cd /src/uma-old
  export CCACHE_BASEDIR=/src/uma-old CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=8G
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  cmake -S . -B build-root -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DUMA_BUILD_PLUGIN=ON -DUMA_KOKKOS=ON -DUMA_FUZZ=ON -DUMA_TORCH_DIR="$UMA_ROOT_TORCH/site-packages/torch" \
    -DCMAKE_PREFIX_PATH="$UMA_ROOT_LAMMPS" -DUMA_LAMMPS_SOURCE_DIR="$UMA_ROOT_LAMMPS_SOURCE/src" > /tmp/old-config.log
  cmake --build build-root --target uma_tool -j"$(nproc)" > /tmp/old-build.log'
echo "built /src/uma-old/build-root/uma (commit $1) in $root"
