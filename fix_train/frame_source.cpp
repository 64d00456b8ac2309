#include "frame_source.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "atom.h"
#include "comm.h"
#include "domain.h"
#include "error.h"

#include "first_failure.h"

using namespace LAMMPS_NS;

void FrameSource::set_system(std::vector<int> type_z, std::string task, int charge, int spin) {
  type_z_ = std::move(type_z);
  task_ = std::move(task);
  charge_ = charge;
  spin_ = spin;
}

uma::Sample FrameSource::running_frame() {
  // Every rank gets every atom: [ID, type, x, y, z] per atom, ordered by ID.
  const int nlocal = atom->nlocal;
  std::vector<double> mine;
  for (int i = 0; i < nlocal; ++i) {
    double x[3] = {atom->x[i][0], atom->x[i][1], atom->x[i][2]};
    domain->remap(x);
    mine.insert(mine.end(), {static_cast<double>(atom->tag[i]), static_cast<double>(atom->type[i]),
                             x[0], x[1], x[2]});
  }
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(comm->nprocs), displs(comm->nprocs);
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, world);
  std::partial_sum(counts.begin(), counts.end() - 1, displs.begin() + 1);
  std::vector<double> all(displs.back() + counts.back());
  MPI_Allgatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(), displs.data(),
                 MPI_DOUBLE, world);
  const int n = static_cast<int>(all.size() / 5);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return all[5 * a] < all[5 * b]; });

  uma::Sample s;
  std::vector<double> pos;
  for (int k : order) {
    const int type = static_cast<int>(all[5 * k + 1]);
    if (type_z_[type] == 0)
      error->all(FLERR,
                 "Fix uma/train: atom type {} is not mapped to an element by pair_coeff (NULL); "
                 "frames for training must be whole UMA systems",
                 type);
    s.atoms.numbers.push_back(type_z_[type]);
    for (int c = 0; c < 3; ++c) pos.push_back(all[5 * k + 2 + c] - domain->boxlo[c]);
  }
  s.atoms.positions = torch::from_blob(pos.data(), {n, 3}, torch::kFloat64).clone();  // host data
  s.atoms.cell = {{{domain->xprd, 0.0, 0.0},
                   {domain->xy, domain->yprd, 0.0},
                   {domain->xz, domain->yz, domain->zprd}}};
  s.atoms.pbc = {domain->xperiodic != 0, domain->yperiodic != 0, domain->zperiodic != 0};
  s.atoms.task = task_;
  s.atoms.charge = charge_;
  s.atoms.spin = spin_;
  return s;
}

std::string FrameSource::label(uma::Sample &s) {
  const LabelBox box{domain->xprd, domain->yprd, domain->zprd, domain->xy,
                     domain->xz,   domain->yz,   atom->ntypes};
  const std::string failure = on_rank_zero(world, [&] {
    const std::string why = labeller_.label(s, box, type_z_);
    if (!why.empty()) throw std::runtime_error("the reference pair style failed: " + why);
  });
  if (!failure.empty()) return failure;
  ReferenceLabeller::broadcast(s.labels, static_cast<int>(s.atoms.numbers.size()), world);
  return {};
}

std::string FrameSource::record(const uma::Sample &s, long long count) {
  if (frames_file_.empty()) return {};
  return on_rank_zero(world, [&] { uma::write_training_data(frames_file_, {s}, count > 1); });
}

std::vector<uma::Sample> FrameSource::read(const std::string &file) const {
  return uma::read_training_data(file, task_);
}
