#!/usr/bin/env bash
# Benchmarks (not tests; see doc/benchmarks.md), side by side with fairchem-core.
#   scripts/bench.sh [bench/run.py options]       engine vs fairchem's calculator (single points)
#   scripts/bench.sh --lammps [--steps N]         LAMMPS pair_style uma: MD vs fairchem ASE MD,
#                                                 the in.eam-style Cu problem, peak memory
#   scripts/bench.sh --lammps --ranks [--steps N] 1 vs 2 ranks (halo exchange, deep ghost shell),
#                                                 500..4000 Cu atoms; computed scaling table
#   scripts/bench.sh --lammps --kokkos [--steps N] uma/kk vs uma (KOKKOS OpenMP), 108 and 1000 Cu atoms
#   scripts/bench.sh --train [--steps N] [--rounds R] [--recompute C]
#                                                 one training step vs fairchem's (K4L2, CPU)
#   scripts/bench.sh --memory [bench/memory.py options]
#                                                 peak memory and time against atoms (256..8000 Cu):
#                                                 fairchem checkpointed vs stored vs recomputed
# Takes tens of minutes and up to ~20 GB of memory.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build_host.sh >/dev/null
source scripts/env.sh
if [ "${1:-}" = "--lammps" ]; then
  shift
  root="$(scripts/lammps_env.sh)"
  UMA_SID_ROOT="$root" scripts/build.sh >/dev/null
  cache="$HOME/.cache/lammps-uma/bench"
  if [ "${1:-}" = "--ranks" ]; then
    shift
    exec "$UMA_PYTHON" bench/lammps_ranks.py "$root" "$@"
  fi
  if [ "${1:-}" = "--kokkos" ]; then
    shift
    exec "$UMA_PYTHON" bench/lammps_kokkos.py "$root" "$@"
  fi
  [ -f "$cache/uma-s-1p1-random.safetensors" ] || "$UMA_PYTHON" bench/make_model.py "$cache"
  exec "$UMA_PYTHON" bench/lammps_md.py "$root" "$@"
fi
if [ "${1:-}" = "--memory" ]; then
  shift
  cache="$HOME/.cache/lammps-uma/bench"
  [ -f "$cache/uma-s-1p1-random.safetensors" ] || "$UMA_PYTHON" bench/make_model.py "$cache"
  exec "$UMA_PYTHON" bench/memory.py build/uma "$cache" doc/benchmark_results_memory_cpu.json \
    --plot doc/memory_vs_atoms.png "$@"
fi
if [ "${1:-}" = "--train" ]; then
  shift
  exec "$UMA_PYTHON" bench/train_step.py build/uma doc/benchmark_results_train_cpu.json "$@"
fi
exec "$UMA_PYTHON" bench/run.py "$@"
