# Sets up (once) and exports the project's build environment.  Source it:
#   source scripts/env.sh
# What it provides, all cached outside the work tree under $UMA_CACHE
# (default ~/.cache/lammps-uma) and keyed by their inputs:
#   - Debian packages: compilers (clang with libFuzzer too), CMake, GoogleTest, nlohmann-json, CLI11, Open MPI, ccache
#   - a Python virtual environment with the pinned fairchem-core + torch
#     (tests/reference/requirements.txt); its torch wheel is the LibTorch we link
#   - ccache for the C++ build
# Exports: UMA_CACHE, UMA_PYTHON, UMA_TORCH_CMAKE, CCACHE_DIR.

_uma_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export UMA_CACHE="${UMA_CACHE:-$HOME/.cache/lammps-uma}"
mkdir -p "$UMA_CACHE"

_uma_log() { printf '[env] %s\n' "$*" >&2; }

# 1. Debian packages (installed only when missing).
_uma_debs=(build-essential cmake ccache git pkg-config python3-venv python3-dev
           libgtest-dev libgmock-dev googletest nlohmann-json3-dev libcli11-dev
           libopenmpi-dev openmpi-bin clang libclang-rt-dev)
_uma_missing=()
for _p in "${_uma_debs[@]}"; do
  dpkg-query -W -f='${Status}' "$_p" 2>/dev/null | grep -q "install ok installed" || _uma_missing+=("$_p")
done
if [ "${#_uma_missing[@]}" -gt 0 ]; then
  _uma_log "installing Debian packages: ${_uma_missing[*]}"
  _sudo=""; [ "$(id -u)" -ne 0 ] && _sudo="sudo"
  $_sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $_sudo apt-get install -y -qq "${_uma_missing[@]}" >/dev/null
fi

# 2. Python reference environment, keyed by the requirements and the interpreter.
_uma_py="${UMA_BASE_PYTHON:-python3}"
_uma_key=$( (cat "$_uma_root/tests/reference/requirements.txt"; "$_uma_py" --version) | sha256sum | cut -c1-16)
_uma_venv="$UMA_CACHE/venv-$_uma_key"
if [ ! -f "$_uma_venv/.complete" ]; then
  _uma_log "creating Python environment $_uma_venv (fairchem-core, torch; several GB, once)"
  rm -rf "$_uma_venv"
  "$_uma_py" -m venv "$_uma_venv"
  "$_uma_venv/bin/pip" install -q --upgrade pip >/dev/null
  "$_uma_venv/bin/pip" install -q -r "$_uma_root/tests/reference/requirements.txt"
  touch "$_uma_venv/.complete"
fi
export UMA_PYTHON="$_uma_venv/bin/python"
export UMA_TORCH_CMAKE="$("$UMA_PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"

# 3. Compiler cache.
export CCACHE_DIR="$UMA_CACHE/ccache"
export CCACHE_BASEDIR="$_uma_root"   # hits across clones in other folders
export CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"

# One BLAS/OpenMP thread pool per core; tests and benchmarks are sized for that.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
_uma_log "ready: python $UMA_PYTHON, LibTorch $UMA_TORCH_CMAKE"
