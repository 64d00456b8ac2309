#!/usr/bin/env bash
# scripts/gpu_check.sh takes uma/kk's KOKKOS-CUDA LAMMPS from the user
# (UMA_KOKKOS_LAMMPS, UMA_KOKKOS_LAMMPS_SOURCE): its --kokkos-lammps says what
# is missing, one line each, and accepts a complete one.  Checked with no
# variables, with a folder that is no LAMMPS, with the root's LAMMPS (KOKKOS,
# shared library, source tree) before and after naming its external Kokkos.
# usage: gpu_check_kokkos_input.sh ROOT
set -uo pipefail
root="$1"
check="$(cd "$(dirname "$0")/../.." && pwd)/scripts/gpu_check.sh"
source "$(dirname "$0")/../../scripts/root_layout.sh"
fails=0
expect() {   # RC PATTERN DESCRIPTION -- ENV...
  local want_rc="$1" pattern="$2" what="$3"; shift 4
  local out rc
  out="$(env -u UMA_KOKKOS_LAMMPS -u UMA_KOKKOS_LAMMPS_SOURCE -u Kokkos_ROOT "$@" bash "$check" --kokkos-lammps 2>&1)"
  rc=$?
  if [ "$rc" != "$want_rc" ] || ! grep -qE -- "$pattern" <<< "$out"; then
    echo "FAIL: $what: exit $rc (want $want_rc), output:"; echo "$out"; fails=$((fails + 1))
  else
    echo "ok: $what: $(tail -n +1 <<< "$out" | head -2 | tr '\n' ' ')"
  fi
}
expect 1 "UMA_KOKKOS_LAMMPS is not set.*" "no variables" --
expect 1 "UMA_KOKKOS_LAMMPS_SOURCE is not set" "no variables, the source" --
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
expect 1 "UMA_KOKKOS_LAMMPS=$tmp has no bin/lmp" "a folder that is no LAMMPS" -- UMA_KOKKOS_LAMMPS="$tmp" UMA_KOKKOS_LAMMPS_SOURCE="$tmp"
expect 1 "UMA_KOKKOS_LAMMPS_SOURCE=$tmp holds no LAMMPS source" "a source folder that is no LAMMPS" -- \
  UMA_KOKKOS_LAMMPS="$tmp" UMA_KOKKOS_LAMMPS_SOURCE="$tmp"
prefix="$root$UMA_ROOT_LAMMPS"; source_tree="$root$UMA_ROOT_LAMMPS_SOURCE"
# the root's LAMMPS has KOKKOS against Debian's Kokkos, which is not in its prefix
expect 1 "has no lib/cmake/Kokkos" "the root's LAMMPS without its Kokkos" -- \
  UMA_KOKKOS_LAMMPS="$prefix" UMA_KOKKOS_LAMMPS_SOURCE="$source_tree"
expect 0 "uma/kk on CUDA: LAMMPS $prefix" "the root's LAMMPS and its Kokkos" -- \
  UMA_KOKKOS_LAMMPS="$prefix" UMA_KOKKOS_LAMMPS_SOURCE="$source_tree" Kokkos_ROOT="$root/usr"
mkdir -p "$tmp/src"; touch "$tmp/src/lammpsplugin.h"
expect 1 "UMA_KOKKOS_LAMMPS_SOURCE=$tmp has no KOKKOS package" "a source tree without KOKKOS" -- \
  UMA_KOKKOS_LAMMPS="$prefix" UMA_KOKKOS_LAMMPS_SOURCE="$tmp" Kokkos_ROOT="$root/usr"
[ "$fails" = 0 ] && echo "gpu check kokkos input: all passed"
exit $(( fails > 0 ))
