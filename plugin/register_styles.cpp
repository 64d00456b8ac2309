#include "register_styles.h"

#include "lammps.h"

#include "fix_uma_train.h"
#include "pair_uma.h"
#ifdef UMA_KOKKOS
#include "uma_kk_styles.h"
#endif

using namespace LAMMPS_NS;

namespace {

void* create_pair_uma(LAMMPS* lmp) { return new PairUMA(lmp); }
void* create_fix_uma_train(LAMMPS* lmp, int argc, char** argv) {
  return new FixUMATrain(lmp, argc, argv);
}

}  // namespace

namespace uma::plugin {

void register_styles(void* lmp, void* handle, RegisterStyle register_style, const char* version) {
  StyleRecord plugin{};
  plugin.version = version;
  plugin.style = "pair";
  plugin.name = "uma";
  plugin.info = "UMA-S universal potential (fairchem eSCN-MD + MoLE) via lammps-uma";
  plugin.author = "lammps-uma developers";
  plugin.creator.v1 = reinterpret_cast<StyleFactory*>(&create_pair_uma);
  plugin.handle = handle;
  register_style(&plugin, lmp);
#ifdef UMA_KOKKOS
  plugin.info = "UMA-S universal potential, KOKKOS package variant";
  for (const char* name : {"uma/kk", "uma/kk/device"}) {
    plugin.name = name;
    plugin.creator.v1 = reinterpret_cast<StyleFactory*>(&create_pair_uma_kk_device);
    register_style(&plugin, lmp);
  }
  plugin.name = "uma/kk/host";
  plugin.creator.v1 = reinterpret_cast<StyleFactory*>(&create_pair_uma_kk_host);
  register_style(&plugin, lmp);
#endif

  plugin.style = "fix";
  plugin.name = "uma/train";
  plugin.info = "on-the-fly training of the UMA model pair_style uma evaluates";
  plugin.creator.v2 = reinterpret_cast<FixFactory*>(&create_fix_uma_train);
  register_style(&plugin, lmp);
}

}  // namespace uma::plugin
