#include "reference_labeller.h"

#include "api/uma.h"

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
    : style_(std::move(style)),
      style_args_(std::move(style_args)),
      coeff_args_(std::move(coeff_args)) {}

std::string ReferenceLabeller::label(uma::Sample &s, const LabelBox &box,
                                     const std::vector<int> &type_z) const {
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
    cmd(fmt::format("region uma_box prism {} {} {} {} {} {} {} {} {} units box", 0.0, box.xprd, 0.0,
                    box.yprd, 0.0, box.zprd, box.xy, box.xz, box.yz));
    cmd(fmt::format("create_box {} uma_box", box.ntypes));
    cmd("mass * 1.0");
    std::vector<tagint> ids(n);
    std::iota(ids.begin(), ids.end(), 1);
    std::vector<int> types;
    for (int64_t z : s.atoms.numbers)
      types.push_back(
          static_cast<int>(std::find(type_z.begin() + 1, type_z.end(), z) - type_z.begin()));
    const auto *x = s.atoms.positions.data_ptr<double>();  // host data
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
    auto *p = static_cast<double *>(
        lammps_extract_compute(ref.get(), "uma_virial", LMP_STYLE_GLOBAL, LMP_TYPE_VECTOR));
    const double k = ref->force->nktv2p;
    const double xx = -p[0] / k, yy = -p[1] / k, zz = -p[2] / k, xy = -p[3] / k, xz = -p[4] / k,
                 yz = -p[5] / k;
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

void ReferenceLabeller::broadcast(uma::Labels &labels, int natoms, MPI_Comm world) {
  int me = 0;
  MPI_Comm_rank(world, &me);
  // the labels' values as host tensors of their shapes (never on a device)
  auto host = [](std::vector<double> v, std::vector<int64_t> shape) {
    return torch::tensor(v, torch::kFloat64).view(shape);  // host data
  };
  uma::PackedRead packed;  // the labels by name: energy, forces [n, 3], stress [3, 3], has_stress
  std::vector<double> buffer;
  if (me == 0) {
    packed.add("energy", host({labels.energy}, {}));
    packed.add("forces", host(labels.forces, {natoms, 3}));
    packed.add("stress", host({labels.stress.begin(), labels.stress.end()}, {9}));
    packed.add("has_stress", host({labels.has_stress ? 1.0 : 0.0}, {}));
    const auto flat = packed.flat();
    buffer.assign(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());  // host data
  } else {
    packed.declare("energy", {});
    packed.declare("forces", {natoms, 3});
    packed.declare("stress", {9});
    packed.declare("has_stress", {});
    buffer.resize(static_cast<size_t>(packed.size()));
  }
  MPI_Bcast(buffer.data(), static_cast<int>(buffer.size()), MPI_DOUBLE, 0, world);
  packed.unpack(std::move(buffer));
  labels.has_energy = labels.has_forces = true;
  labels.energy = packed.scalar("energy");
  labels.forces = packed.vector("forces");
  const auto stress = packed.vector("stress");
  std::copy(stress.begin(), stress.end(), labels.stress.begin());
  labels.has_stress = packed.scalar("has_stress") != 0;
}

}  // namespace LAMMPS_NS
