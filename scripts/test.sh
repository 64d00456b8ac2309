#!/usr/bin/env bash
# The test command: sets up the environment (including the LAMMPS build, cached
# after the first run), builds, regenerates the parity fixtures through
# fairchem-core, and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== LAMMPS environment (sid root with Kokkos and LibTorch; built once, then cached)"
UMA_SID_ROOT="$(scripts/lammps_env.sh)"
export UMA_SID_ROOT
scripts/build.sh
source scripts/env.sh
echo "== writing parity fixtures through fairchem-core $("$UMA_PYTHON" -c 'import importlib.metadata as m; print(m.version("fairchem-core"))')"
"$UMA_PYTHON" tests/reference/make_fixtures.py build/fixtures
"$UMA_PYTHON" tests/reference/make_train_fixture.py build/fixtures
echo "== running the tests"
UMA_FIXTURES_DIR="$PWD/build/fixtures" ctest --test-dir build --output-on-failure
