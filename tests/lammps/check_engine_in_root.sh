#!/usr/bin/env bash
# Builds the engine, its test suite and umaplugin.so inside the LAMMPS root
# (scripts/build_plugin.sh) and runs the engine suite there.  The LAMMPS tests
# use the plugin this leaves in /src/uma-check/build-root.
# usage: check_engine_in_root.sh ROOT [FIXTURES_DIR]
set -euo pipefail
root="$1"; fixtures="${2:-}"
here="$(cd "$(dirname "$0")" && pwd)"
"$here/../../scripts/build_plugin.sh" "$root"
dest="$root/src/uma-check"
env_fixtures=""
if [ -n "$fixtures" ] && [ -f "$fixtures/fixtures.json" ]; then
  rm -rf "$dest/fresh-fixtures" && cp -r "$fixtures" "$dest/fresh-fixtures"
  env_fixtures="UMA_FIXTURES_DIR=/src/uma-check/fresh-fixtures"
fi
"$here/../../scripts/in_sid.sh" "$root" env $env_fixtures bash -c \
  'cd /src/uma-check/build-root && ctest --output-on-failure 2>&1 | tail -4'
