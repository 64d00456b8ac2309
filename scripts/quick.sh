#!/usr/bin/env bash
# The developer's loop between full runs of scripts/test.sh (which must have run
# once on this machine: it sets up the root and the fixtures).
#   scripts/quick.sh engine [GTEST_FILTER]   rebuild the engine and its tests in the root
#                                           (only what changed) and run the engine's unit
#                                           tests, two processes at once, or those FILTER picks
#   scripts/quick.sh case NAME [--suite train]  rebuild the plugin and run one LAMMPS case
#                                           (the names: tests/lammps/run_case.py --list)
set -euo pipefail
cd "$(dirname "$0")/.."
export UMA_CACHE="${UMA_CACHE:-$HOME/.cache/lammps-uma}"
source scripts/root_layout.sh
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
what="${1:-}"; shift || true
root="$UMA_CACHE/sid-root-v2"
[ -x "$root$UMA_ROOT_LAMMPS/bin/lmp" ] || { echo "quick.sh: no LAMMPS root yet: run scripts/test.sh once" >&2; exit 1; }
python="$(scripts/python_env.sh)"
export UMA_SID_ROOT="$root" UMA_PYTHON="$python"
fixtures="$UMA_ROOT_PROJECT/fresh-fixtures"
case "$what" in
  engine)
    scripts/build.sh uma_tests uma_tool
    filter="${1:-*}"
    # two shards of the suite at once, one core each (the suite's tests are independent)
    scripts/in_sid.sh "$root" env UMA_FIXTURES_DIR="$fixtures" UMA_SOURCE_DIR="$UMA_ROOT_PROJECT" FILTER="$filter" bash -c '
      cd "$UMA_ROOT_BUILD/tests"
      [ -f "$UMA_FIXTURES_DIR/fixtures.json" ] || unset UMA_FIXTURES_DIR   # the committed ones, before a full run
      for shard in 0 1; do
        OMP_NUM_THREADS=1 GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$shard ./uma_tests --gtest_filter="$FILTER" \
          --gtest_brief=1 > shard$shard.log 2>&1 & done
      rc=0; wait %1 || rc=1; wait %2 || rc=1
      cat shard0.log shard1.log | grep -v "^\[ *OK \|^\[ RUN" ; exit $rc' ;;
  case)
    [ -n "${1:-}" ] || usage
    scripts/build.sh
    if [ "${2:-}" = "--suite" ]; then exec "$python" tests/lammps/run_case.py --suite "$3" "$root" "$1"; fi
    exec "$python" tests/lammps/run_case.py "$root" "$1" ;;
  *) usage ;;
esac
