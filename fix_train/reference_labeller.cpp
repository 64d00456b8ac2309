#include "reference_labeller.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "exceptions.h"
#include "force.h"
#include "input.h"
#include "lammps.h"
#include "library.h"

namespace LAMMPS_NS {

ReferenceLabeller::ReferenceLabeller(std::string style, std::vector<std::string> style_args,
                                     std::vector<std::string> coeff_args)
    : style_(std::move(style)), style_args_(std::move(style_args)), coeff_args_(std::move(coeff_args)) {}

std::string ReferenceLabeller::label(uma::Sample &s, const LabelBox &box, const std::vector<int> &type_z) const {
  const int n = static_cast<int>(s.atoms.numbers.size());
  const char *args[] = {"uma-reference", "-log", "none", "-screen", "none", "-nocite"};
  std::unique_ptr<LAMMPS> ref;
  try {
    ref = std::make_unique<LAMMPS>(6, const_cast<char **>(args), MPI_COMM_SELF);
    auto cmd = [&](const std::string &line) { ref->input->one(line); };
    cmd("units metal");
    cmd("atom_style atomic");
    cmd("atom_modify map array");
    std::string boundary = "boundary";
    for (int c = 0; c < 3; ++c) boundary += s.atoms.pbc[c] ? " p" : " s";
    cmd(boundary);
    cmd(fmt::format("region uma_box prism {} {} {} {} {} {} {} {} {} units box", 0.0, box.xprd, 0.0, box.yprd, 0.0,
                    box.zprd, box.xy, box.xz, box.yz));
    cmd(fmt::format("create_box {} uma_box", box.ntypes));
    cmd("mass * 1.0");
    std::vector<tagint> ids(n);
    std::iota(ids.begin(), ids.end(), 1);
    std::vector<int> types;
    for (int64_t z : s.atoms.numbers)
      types.push_back(static_cast<int>(std::find(type_z.begin() + 1, type_z.end(), z) - type_z.begin()));
    const auto *x = s.atoms.positions.data_ptr<double>();   // host data
    if (lammps_create_atoms(ref.get(), n, ids.data(), types.data(), x, nullptr, nullptr, 0) != n)
      return "not every atom of the frame could be placed in the reference's box";
    std::string style = "pair_style " + style_;
    for (const auto &a : style_args_) style += " " + a;
    cmd(style);
    std::string coeff = "pair_coeff";
    for (const auto &a : coeff_args_) coeff += " " + a;
    cmd(coeff);
    cmd("compute uma_virial all pressure NULL virial");
    cmd("thermo_style custom step pe c_uma_virial[1]");
    cmd("run 0 post no");
    s.labels.has_energy = s.labels.has_forces = true;
    s.labels.energy = lammps_get_thermo(ref.get(), "pe");
    s.labels.forces.assign(3 * n, 0.0);
    lammps_gather_atoms(ref.get(), "f", 1, 3, s.labels.forces.data());
    // Stress = +(1/V) dE/d strain = -(virial pressure) / nktv2p.
    s.labels.has_stress = s.atoms.pbc[0] && s.atoms.pbc[1] && s.atoms.pbc[2];
    auto *p = static_cast<double *>(lammps_extract_compute(ref.get(), "uma_virial", LMP_STYLE_GLOBAL, LMP_TYPE_VECTOR));
    const double k = ref->force->nktv2p;
    const double xx = -p[0] / k, yy = -p[1] / k, zz = -p[2] / k, xy = -p[3] / k, xz = -p[4] / k, yz = -p[5] / k;
    s.labels.stress = {xx, xy, xz, xy, yy, yz, xz, yz, zz};
    for (double f : s.labels.forces)
      if (!std::isfinite(f)) return "it gave non-finite forces";
  } catch (const LAMMPSException &e) {
    // A style that failed half-way may not survive its destructor (pair eam
    // with an unreadable file frees a pointer it never allocated); the run is
    // ending with an error, so the instance is left alone.
    (void)ref.release();
    return e.what();
  }
  return {};
}

std::vector<double> ReferenceLabeller::pack(const uma::Labels &labels, int natoms) {
  std::vector<double> v(1 + 3 * static_cast<size_t>(natoms) + 9 + 1, 0.0);
  v[0] = labels.energy;
  std::copy(labels.forces.begin(), labels.forces.end(), v.begin() + 1);
  std::copy(labels.stress.begin(), labels.stress.end(), v.begin() + 1 + 3 * natoms);
  v.back() = labels.has_stress ? 1 : 0;
  return v;
}

void ReferenceLabeller::unpack(const std::vector<double> &v, int natoms, uma::Labels &labels) {
  labels.has_energy = labels.has_forces = true;
  labels.energy = v[0];
  labels.forces.assign(v.begin() + 1, v.begin() + 1 + 3 * natoms);
  std::copy(v.begin() + 1 + 3 * natoms, v.begin() + 10 + 3 * natoms, labels.stress.begin());
  labels.has_stress = v.back() != 0;
}

}    // namespace LAMMPS_NS
