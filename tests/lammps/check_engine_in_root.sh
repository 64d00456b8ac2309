#!/usr/bin/env bash
# Builds the engine and its test suite inside the LAMMPS root (g++ 16,
# LibTorch 2.14: the toolchain the plugin is built with) and runs the suite
# there.  usage: check_engine_in_root.sh ROOT SOURCE_DIR [FIXTURES_DIR]
set -euo pipefail
root="$1"; src="$2"; fixtures="${3:-}"
here="$(cd "$(dirname "$0")" && pwd)"
dest="$root/src/uma-check"
mkdir -p "$dest"
# the sources (not build trees); the root keeps its own build dir between runs
tar -C "$src" --exclude=./build --exclude='./build-*' --exclude=.git -cf - . | tar -C "$dest" -xf -
env_fixtures=""
if [ -n "$fixtures" ] && [ -f "$fixtures/fixtures.json" ]; then
  rm -rf "$dest/fresh-fixtures" && cp -r "$fixtures" "$dest/fresh-fixtures"
  env_fixtures="UMA_FIXTURES_DIR=/src/uma-check/fresh-fixtures"
fi
"$here/../../scripts/in_sid.sh" "$root" env $env_fixtures bash -c '
  set -e
  cd /src/uma-check
  cmake -S . -B build-root -DCMAKE_BUILD_TYPE=Release > build-root.log 2>&1 || { tail -20 build-root.log; exit 1; }
  cmake --build build-root -j"$(nproc)" >> build-root.log 2>&1 || { grep -m5 -A5 error build-root.log; exit 1; }
  cd build-root && ctest --output-on-failure 2>&1 | tail -4'
