#!/usr/bin/env bash
# Builds the engine and the uma tool with the host's toolchain into build/, for
# the benchmarks (scripts/bench.sh), which run it side by side with fairchem in
# the host's Python environment.  The tests and the plugin are built in the
# LAMMPS root instead (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/host_packages.sh --compile
source scripts/env.sh
export CCACHE_DIR="$UMA_CACHE/ccache" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DUMA_BUILD_TESTS=OFF \
  -DCMAKE_PREFIX_PATH="$UMA_TORCH_CMAKE" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build -j"$(nproc)"
