#!/usr/bin/env bash
# The main job: builds if needed, then evaluates bulk copper with the shipped
# model (energy, forces, stress).  Extra arguments go to `uma eval`.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
if ! scripts/build.sh > build/build.log 2>&1; then
  tail -n 40 build/build.log >&2
  echo "run.sh: the build failed (full log: build/build.log)" >&2
  exit 1
fi
exec build/uma eval potentials/uma-s-tiny-random.safetensors examples/structures/cu_bulk.extxyz --task omat "$@"
