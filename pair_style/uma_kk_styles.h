// The creators of pair_style uma/kk (uma/kk/device) and uma/kk/host, defined
// with the style (pair_uma_kokkos.cpp), for the plugin's registration
// (plugin/register_styles.cpp), which then includes no Kokkos header.
#pragma once

namespace LAMMPS_NS {
class LAMMPS;
}

namespace uma::plugin {

void *create_pair_uma_kk_device(LAMMPS_NS::LAMMPS *lmp);
void *create_pair_uma_kk_host(LAMMPS_NS::LAMMPS *lmp);

}  // namespace uma::plugin
