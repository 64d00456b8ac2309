# Where things live inside the LAMMPS root that scripts/lammps_env.sh builds.
# The one place these paths are written: the scripts source this file, and
# tests/lammps/harness.py and bench/ read it (NAME=value lines, no quoting).
UMA_ROOT_LAMMPS=/opt/lammps
UMA_ROOT_TORCH=/opt/torch
UMA_ROOT_LAMMPS_SOURCE=/src/lammps
UMA_ROOT_PROJECT=/src/uma-check
UMA_ROOT_BUILD=/src/uma-check/build-root
UMA_ROOT_CCACHE=/var/cache/uma-ccache
# UMA_ROOT_LAMMPS: the LAMMPS install (bin/lmp, lib/, share/lammps/potentials)
# UMA_ROOT_TORCH: the torch wheel's LibTorch, hard-linked (site-packages/torch)
# UMA_ROOT_LAMMPS_SOURCE: the LAMMPS source tree it was built from
# UMA_ROOT_PROJECT: this project's copy (scripts/build.sh)
# UMA_ROOT_BUILD: its build with the root's toolchain (umaplugin.so, uma, the engine tests)
# UMA_ROOT_CCACHE: the compiler cache of that build
