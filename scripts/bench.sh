#!/usr/bin/env bash
# CPU benchmark, lammps-uma vs fairchem-core, side by side (see doc/benchmarks.md).
# Not a test: takes tens of minutes and ~20 GB of memory at 1000 atoms.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
source scripts/env.sh
exec "$UMA_PYTHON" bench/run.py "$@"
