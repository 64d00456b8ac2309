#!/usr/bin/env bash
# Runs a command inside the sid root, in a mount namespace of its own: /proc,
# /dev and /sys (Open MPI and hwloc read them) and the root's compiler cache
# (kept beside the root, so that it outlives a rebuilt root) are bound there
# and vanish with the command, so any number of these may run at once.  The
# command sees the paths of scripts/root_layout.sh as UMA_ROOT_* variables.
# Everything in the root runs on this one machine: Open MPI uses shared memory
# only (OMPI_MCA_btl=self,sm); probing the network for its TCP transport cost
# about a second per process.
# usage: in_sid.sh ROOT CMD...
set -euo pipefail
set -a; source "$(dirname "$0")/root_layout.sh"; set +a
root="$(cd "$1" && pwd)"; shift
ccache_dir="$root.ccache"
mkdir -p "$ccache_dir" "$root$UMA_ROOT_CCACHE"
cp -f /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
exec unshare --mount --propagation private bash -c '
  root="$1"; ccache_dir="$2"; shift 2
  for d in proc dev sys; do mount --rbind "/$d" "$root/$d"; done
  mount --bind "$ccache_dir" "$root$UMA_ROOT_CCACHE"
  exec chroot "$root" env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,sm \
    CCACHE_DIR="$UMA_ROOT_CCACHE" \
    UMA_ROOT_LAMMPS="$UMA_ROOT_LAMMPS" UMA_ROOT_TORCH="$UMA_ROOT_TORCH" UMA_ROOT_LAMMPS_SOURCE="$UMA_ROOT_LAMMPS_SOURCE" \
    UMA_ROOT_PROJECT="$UMA_ROOT_PROJECT" UMA_ROOT_BUILD="$UMA_ROOT_BUILD" UMA_ROOT_CCACHE="$UMA_ROOT_CCACHE" "$@"' bash "$root" "$ccache_dir" "$@"
