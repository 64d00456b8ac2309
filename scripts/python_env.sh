#!/usr/bin/env bash
# Makes, once, the Python reference environment (the pinned fairchem-core and
# torch of tests/reference/requirements.txt; several GB) under $UMA_CACHE,
# keyed by the requirements and the interpreter, and prints its python.  Its
# torch wheel is also the LibTorch the engine links.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${UMA_CACHE:-$HOME/.cache/lammps-uma}"
py="${UMA_BASE_PYTHON:-python3}"
key=$( (cat "$here/../tests/reference/requirements.txt"; "$py" --version) | sha256sum | cut -c1-16)
venv="$cache/venv-$key"
if [ ! -f "$venv/.complete" ]; then
  printf '[python] creating %s (fairchem-core, torch; several GB, once)\n' "$venv" >&2
  rm -rf "$venv"
  mkdir -p "$cache"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip >/dev/null
  "$venv/bin/pip" install -q -r "$here/../tests/reference/requirements.txt"
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
