#include "in_place_evaluation.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <vector>

#include <torch/torch.h>

#include "atom.h"
#include "comm.h"
#include "domain.h"
#include "error.h"
#include "neighbor.h"

#include "api/uma.h"
#include "halo_exchange.h"
#include "pair_uma.h"
#include "rank_agreement.h"

using namespace LAMMPS_NS;

// The engine's atoms, rebuilt when LAMMPS reneighbors (the only time atoms
// move between ranks, change order or change type).
struct InPlaceEvaluation::Layout {
  torch::Tensor type_z_table;  // [ntypes + 1] int64 atomic number per type, on the model's device
  bool all_mapped = true;      // no NULL types: engine rows are LAMMPS indices
  bigint builds = -1;          // neighbor->ncalls it was built at (-1: the first step builds it)
  int64_t id = 0;              // the engine's name for it (layout_ids: unique in the process)
  int nlocal = -1, nall = -1;
  int n_owned = 0;
  torch::Tensor numbers;             // [n] int64 atomic numbers of the engine's atoms
  torch::Tensor rows;                // [n] int64 LAMMPS index per engine atom (undefined: identity)
  std::vector<int64_t> composition;  // whole system, per atomic number (several ranks)
};

namespace {

// A layout's id tells the engine whether its device constants still hold: unique
// over every evaluation of the process, so that a new one (each init_style)
// never repeats an id the engine has seen.
std::atomic<int64_t> layout_ids{0};

torch::TensorOptions on_device(const uma::Engine &engine) {
  return torch::TensorOptions().device(engine.options().device);
}

// Rows [0, nrows) of a [rows, 3] float64 view as a tensor over its own memory.
torch::Tensor rows_of(const double *data, int64_t nrows, const int64_t stride[2],
                      const torch::TensorOptions &options) {
  const auto f64 = options.dtype(torch::kFloat64);
  void *memory = const_cast<double *>(data);
  return torch::from_blob(memory, {nrows, 3}, {stride[0], stride[1]}, f64);  // device view
}

}  // namespace

InPlaceEvaluation::InPlaceEvaluation(PairUMA &pair)
    : pair_(pair), layout_(std::make_unique<Layout>()) {
  const std::vector<int> &type_z = pair.type_z_;
  const std::vector<int64_t> table(type_z.begin(), type_z.end());
  layout_->type_z_table = uma::upload(table, on_device(*pair.engine_).dtype(torch::kLong));
  layout_->all_mapped = std::find(type_z.begin() + 1, type_z.end(), 0) == type_z.end();
}

InPlaceEvaluation::~InPlaceEvaluation() = default;

// Rows [0, nrows) of the type view through the type table, less NULL types.
void InPlaceEvaluation::refresh_layout(const DeviceViews &views, int nrows) {
  PairUMA &p = pair_;
  Layout &l = *layout_;
  const int nlocal = p.atom->nlocal, nall = p.atom->nlocal + p.atom->nghost;
  if (p.neighbor->ncalls == l.builds) {
    if (nlocal != l.nlocal || nall != l.nall)
      p.error->one(FLERR, "Pair style {}: internal: the atoms changed without reneighboring",
                   p.style_name_);
    return;
  }
  l.builds = p.neighbor->ncalls;
  l.nlocal = nlocal;
  l.nall = nall;
  l.id = ++layout_ids;
  const auto options = on_device(*p.engine_);
  const auto i32 = options.dtype(torch::kInt);
  const torch::Tensor types =
      torch::from_blob(const_cast<int *>(views.type), {nrows}, i32);  // device view
  auto z = l.type_z_table.index_select(0, types.to(torch::kLong));    // [nrows]
  std::vector<int> &index = p.engine_index_;
  if (l.all_mapped) {
    l.rows = torch::Tensor();
    l.numbers = z;
    index.resize(nrows);
    std::iota(index.begin(), index.end(), 0);
  } else {  // one counted read and one upload per reneighboring
    const torch::Tensor host = uma::to_host(z);
    const int64_t *zs = host.data_ptr<int64_t>();  // host data
    index.clear();
    for (int i = 0; i < nrows; ++i)
      if (zs[i] > 0) index.push_back(i);
    l.rows =
        uma::upload(std::vector<int64_t>(index.begin(), index.end()), options.dtype(torch::kLong));
    l.numbers = z.index_select(0, l.rows);
  }
  l.n_owned =
      static_cast<int>(std::lower_bound(index.begin(), index.end(), nlocal) - index.begin());
  if (p.comm->nprocs == 1) return;  // the engine counts a whole system's composition itself
  if (l.n_owned ==
      0) {  // a rank without atoms evaluates nothing (and takes part in every collective)
    index.clear();
    l.numbers = l.numbers.narrow(0, 0, 0);
    if (l.rows.defined()) l.rows = l.rows.narrow(0, 0, 0);
  }
  const int64_t Z = p.engine_->model()->config().backbone.max_num_elements;
  auto owned = uma::to_host(
      uma::count_atomic_numbers(l.numbers.narrow(0, 0, l.n_owned), Z));  // one counted read
  const int64_t *owned_counts = owned.data_ptr<int64_t>();               // host data
  std::vector<long long> counts(owned_counts, owned_counts + Z);
  counts = p.sum_over_ranks(std::move(counts));
  l.composition.assign(counts.begin(), counts.end());
}

namespace {

// Rows [0, nrows) of x as the engine's positions (a gather only when some types are NULL).
torch::Tensor positions(const DeviceViews &views, int nrows, const torch::Tensor &rows,
                        const torch::TensorOptions &options) {
  auto all = rows_of(views.x, nrows, views.x_stride, options);
  return rows.defined() ? all.index_select(0, rows) : all;
}

// Adds engine forces [n, 3] into the f view, on the device.
void add_forces(const DeviceViews &views, const torch::Tensor &rows, const torch::Tensor &forces,
                const torch::TensorOptions &options) {
  auto all = rows_of(views.f, views.f_rows, views.f_stride, options);
  const auto add = forces.to(torch::kFloat64);
  if (rows.defined())
    all.index_add_(0, rows, add);
  else
    all.narrow(0, 0, add.size(0)).add_(add);
}

}  // namespace

void InPlaceEvaluation::compute_whole(const DeviceViews &views) {
  PairUMA &p = pair_;
  const Layout &l = *layout_;
  refresh_layout(views, p.atom->nlocal);
  const int n = static_cast<int>(l.numbers.size(0));
  if (n == 0) return;
  const auto options = on_device(*p.engine_);
  uma::Atoms a;
  a.on_device.numbers = l.numbers;
  a.on_device.layout_id = l.id;
  a.on_device.origin = {p.domain->boxlo[0], p.domain->boxlo[1], p.domain->boxlo[2]};
  a.positions = positions(views, p.atom->nlocal, l.rows, options);
  p.set_whole_system(a);

  uma::Request what = p.read_request();
  what.forces = false;  // they stay on the device
  uma::HostEvaluation r;
  uma::Evaluation ev;
  uma::until_capacity_fits([&] {
    ev = p.engine_->evaluate({a}, what);
    return p.engine_->read(ev, r);
  });
  add_forces(views, l.rows, ev.forces, options);
  p.tally(r, n, n);
}

void InPlaceEvaluation::compute_local(const DeviceViews &views) {
  PairUMA &p = pair_;
  const Layout &l = *layout_;
  const int nall = p.atom->nlocal + p.atom->nghost;
  refresh_layout(views, nall);
  const int n = static_cast<int>(l.numbers.size(0));
  const auto options = on_device(*p.engine_);
  uma::Atoms local;
  local.piece.n_owned = l.n_owned;
  local.piece.n_targets = l.n_owned;
  if (n > 0) {
    local.on_device.numbers = l.numbers;
    local.on_device.layout_id = l.id;
    double origin[3];
    p.subdomain_corner(origin);  // as pair_style uma's: the same float32 inputs
    local.on_device.origin = {origin[0], origin[1], origin[2]};
    local.positions = positions(views, nall, l.rows, options);
  } else {
    local.positions = torch::zeros({0, 3}, torch::kFloat64);
  }
  local.piece.composition = l.composition;
  p.set_piece_inputs(local);
  p.halo_->set_atoms(&p.engine_index_, l.n_owned, nall);
  local.piece.exchange_ghosts = p.halo_->functions();
  p.halo_->reset_counts();

  uma::Request what = p.read_request();
  what.forces = false;  // they stay on the device
  uma::HostEvaluation r;
  const uma::Evaluation ev = evaluate_on_every_rank(
      *p.engine_, local, what, r, p.world, [&p](const std::exception &e) { return p.describe(e); });
  add_forces(views, l.rows, ev.forces, options);
  p.tally(r, l.n_owned, n);
  p.pvector[kGhostAtoms] = n - l.n_owned;
  p.pvector[kHaloBytes] = static_cast<double>(p.halo_->rows_packed() * p.halo_->row_bytes());
}
