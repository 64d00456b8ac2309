#!/usr/bin/env bash
# Runs a command inside the sid root with /proc, /dev and /sys bound (Open MPI
# and hwloc read them); unbinds afterwards.  The command sees the paths of
# scripts/root_layout.sh as UMA_ROOT_* variables.  usage: in_sid.sh ROOT CMD...
set -euo pipefail
source "$(dirname "$0")/root_layout.sh"
root="$1"; shift
mounted=()
cleanup() { for ((i=${#mounted[@]}-1; i>=0; i--)); do umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" || true; done; }
trap cleanup EXIT
for d in proc dev sys; do
  if ! mountpoint -q "$root/$d"; then mount --bind "/$d" "$root/$d"; mounted+=("$root/$d"); fi
done
cp -f /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
chroot "$root" env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  UMA_ROOT_LAMMPS="$UMA_ROOT_LAMMPS" UMA_ROOT_TORCH="$UMA_ROOT_TORCH" UMA_ROOT_LAMMPS_SOURCE="$UMA_ROOT_LAMMPS_SOURCE" \
  UMA_ROOT_PROJECT="$UMA_ROOT_PROJECT" UMA_ROOT_BUILD="$UMA_ROOT_BUILD" UMA_ROOT_CCACHE="$UMA_ROOT_CCACHE" "$@"
