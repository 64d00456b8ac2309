#!/usr/bin/env bash
# Builds the engine, its test suite and umaplugin.so inside the LAMMPS root
# (scripts/build_plugin.sh) and runs the engine suite there.  The LAMMPS tests
# use the plugin this leaves in the root's UMA_ROOT_BUILD (scripts/root_layout.sh).
# usage: check_engine_in_root.sh ROOT [FIXTURES_DIR]
set -euo pipefail
root="$1"; fixtures="${2:-}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../scripts/root_layout.sh"
"$here/../../scripts/build_plugin.sh" "$root"
dest="$root$UMA_ROOT_PROJECT"
env_fixtures=""
if [ -n "$fixtures" ] && [ -f "$fixtures/fixtures.json" ]; then
  rm -rf "$dest/fresh-fixtures" && cp -r "$fixtures" "$dest/fresh-fixtures"
  env_fixtures="UMA_FIXTURES_DIR=$UMA_ROOT_PROJECT/fresh-fixtures"
fi
"$here/../../scripts/in_sid.sh" "$root" env $env_fixtures bash -c \
  'cd "$UMA_ROOT_BUILD" && ctest --output-on-failure 2>&1 | tail -4'
