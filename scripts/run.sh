#!/usr/bin/env bash
# The main job: builds if needed, then evaluates bulk copper with the shipped
# model (energy, forces, stress).  Extra arguments go to `uma eval`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
exec build/uma eval potentials/uma-s-tiny-random.safetensors examples/structures/cu_bulk.extxyz --task omat "$@"
