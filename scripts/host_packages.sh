#!/usr/bin/env bash
# Installs the host's Debian packages that are missing (apt-get as root, else sudo).
#   host_packages.sh          what the test command needs on the host: the LAMMPS root is made
#                             with debootstrap and fed with rsync; CMake's ctest drives the
#                             tests; python3-venv holds the fairchem reference and the pip
#                             route's environment, whose build needs g++ and CLI11 (the uma tool)
#   host_packages.sh --compile  also a host toolchain, for scripts/build_host.sh (benchmarks)
set -euo pipefail
debs=(cmake debootstrap rsync git python3-venv python3-dev g++ libcli11-dev)
[ "${1:-}" = "--compile" ] && debs+=(build-essential ccache pkg-config libgtest-dev libgmock-dev googletest
                                     nlohmann-json3-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
printf '[host] installing Debian packages: %s\n' "${missing[*]}" >&2
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
