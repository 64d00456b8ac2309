#!/usr/bin/env bash
# The main job: NVE molecular dynamics of bulk copper in LAMMPS with the
# shipped model through pair_style uma (examples/cu_nve/in.cu_nve), with
# LAMMPS's thermo output on the screen.  The first run sets up the LAMMPS
# environment and builds umaplugin.so (cached afterwards).  Extra arguments
# go to lmp, e.g. -var model /src/uma-check/potentials/OTHER.safetensors
# (the project's copy inside the root: scripts/root_layout.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
echo "== LAMMPS environment and the Python environment whose LibTorch the plugin links (built once, then cached)" >&2
scripts/python_env.sh > build/python_env.out 2> build/python_env.log &
python_pid=$!
root="$(scripts/lammps_env.sh)"
wait "$python_pid" || { cat build/python_env.log >&2; exit 1; }
echo "== building umaplugin.so in the LAMMPS environment" >&2
if ! UMA_SID_ROOT="$root" UMA_PYTHON="$(cat build/python_env.out)" scripts/build.sh umaplugin > build/plugin-build.log 2>&1; then
  tail -n 40 build/plugin-build.log >&2
  echo "run.sh: the plugin build failed (full log: build/plugin-build.log)" >&2
  exit 1
fi
echo "== lmp -in examples/cu_nve/in.cu_nve" >&2
exec scripts/in_sid.sh "$root" bash -c 'cd "$UMA_ROOT_PROJECT/examples/cu_nve" &&
  LAMMPS_PLUGIN_PATH="$UMA_ROOT_BUILD" OMP_NUM_THREADS="$(nproc)" \
  "$UMA_ROOT_LAMMPS/bin/lmp" -in in.cu_nve -log none "$@"' bash "$@"
