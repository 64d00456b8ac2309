// The styles umaplugin.so adds to LAMMPS, handed over through LAMMPS's plugin
// ABI (plugin_abi.h).  Kept apart from the entry point (uma_plugin.cpp) so that
// the copies the test suite builds with other build claims share this part.
#pragma once

#include "plugin_abi.h"

namespace uma::plugin {

// Registers pair_style uma (with KOKKOS also uma/kk, uma/kk/device and
// uma/kk/host) and fix uma/train.  lmp and handle are what LAMMPS passed to
// lammpsplugin_init; version is the LAMMPS version the plugin was built for.
void register_styles(void* lmp, void* handle, RegisterStyle register_style, const char* version);

}  // namespace uma::plugin
