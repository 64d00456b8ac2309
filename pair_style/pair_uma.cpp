#include "pair_uma.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <torch/torch.h>

#include "atom.h"
#include "comm.h"
#include "domain.h"
#include "error.h"
#include "force.h"
#include "memory.h"
#include "neighbor.h"
#include "update.h"
#include "utils.h"

#include "api/uma.h"
#include "halo_exchange.h"
#include "rank_agreement.h"
#include "rank_share.h"

using namespace LAMMPS_NS;

namespace {

// Sum of a small tensor over the ranks of a communicator: one counted read
// and one upload per call.
torch::Tensor tensor_sum_over_ranks(const torch::Tensor& x, MPI_Comm comm) {
  auto host = uma::to_host(x);
  const MPI_Datatype type = host.scalar_type() == torch::kFloat64 ? MPI_DOUBLE : MPI_FLOAT;
  void* data = host.data_ptr();  // host data
  MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(host.numel()), type, MPI_SUM, comm);
  return uma::upload(host, x.options());
}

// Adds a 3x3 virial in LAMMPS's component order xx yy zz xy xz yz.
template <typename Matrix>
void add_virial(double* out, const Matrix& w) {
  out[0] += w[0][0];
  out[1] += w[1][1];
  out[2] += w[2][2];
  out[3] += w[0][1];
  out[4] += w[0][2];
  out[5] += w[1][2];
}

}  // namespace

PairUMA::PairUMA(LAMMPS* lmp) : Pair(lmp) {
  single_enable = 0;
  restartinfo = 0;
  one_coeff = 1;
  manybody_flag = 1;
  no_virial_fdotr_compute = 1;
  centroidstressflag = CENTROID_NOTAVAIL;
  comm_reverse = 9;
  comm_reverse_off = 9;  // ghost rows are sent home with newton off too
  nextra = kPairValues;  // compute pair ... uma (transfer_stats.h)
  pvector = new double[nextra]();
  fold_ = std::make_unique<GhostFold>();
  halo_ = std::make_unique<HaloExchange>();
  halo_->forward_comm = [this](int width) { forward_comm_host(width); };
  halo_->reverse_comm = [this](int width) { reverse_comm_host(*halo_, width); };
}

// LAMMPS's Kokkos communication calls a device-side pair's Kokkos pack/unpack
// functions; this style's rows and folds live in host buffers, so it always
// takes the host callbacks.  A LAMMPS before 2025 (CMake's
// UMA_LAMMPS_COMM_UNSIZED) takes no width with the call: it moves
// comm_forward / comm_reverse values per atom, set to the width for the call.
#ifdef UMA_LAMMPS_COMM_UNSIZED
#define UMA_COMM_ROWS(pair, width) pair
#else
#define UMA_COMM_ROWS(pair, width) pair, width
#endif

std::string PairUMA::engine_device() const { return engine_->options().device.str(); }

template <typename Exchange>
void PairUMA::exchange_on_host(int &per_atom, int width, Exchange exchange) {
  const ExecutionSpace declared = execution_space;
  const int set_up = per_atom;
  execution_space = Host;
  per_atom = width;
  exchange();
  per_atom = set_up;
  execution_space = declared;
}

void PairUMA::forward_comm_host(int width) {
  exchange_on_host(comm_forward, width,
                   [&] { comm->forward_comm(UMA_COMM_ROWS(this, width)); });
}

void PairUMA::reverse_comm_host(ReverseRows &rows, int width) {
  reverse_rows_ = &rows;
  exchange_on_host(comm_reverse, width,
                   [&] { comm->reverse_comm(UMA_COMM_ROWS(this, width)); });
  reverse_rows_ = nullptr;
}

PairUMA::~PairUMA() {
  if (copymode) return;
  delete[] pvector;
  if (allocated) {
    memory->destroy(setflag);
    memory->destroy(cutsq);
  }
  // The next pair style gets the ghost cutoff the user had before this one.
  if (user_cutghost_ >= 0.0) comm->cutghostuser = user_cutghost_;
}

void PairUMA::allocate() {
  allocated = 1;
  const int n = atom->ntypes + 1;
  memory->create(setflag, n, n, "pair:setflag");
  memory->create(cutsq, n, n, "pair:cutsq");
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) setflag[i][j] = 0;
}

/* pair_style uma [task NAME] [charge Q] [spin S] [precision fp32|fp64|tf32] [device auto|cpu|cuda|cuda:N]
                  [memory GB] [cuda_graph yes|no] [ghosts halo|deep] */

void PairUMA::settings(int narg, char** arg) {
  task_given_.clear();
  charge_ = 0;
  spin_ = -1;
  charge_set_ = spin_set_ = false;
  precision_ = "fp32";
  device_ = "auto";
  memory_gb_ = 0.0;
  cuda_graph_ = false;
  deep_shell_ = false;
  int iarg = 0;
  while (iarg < narg) {
    const std::string key = arg[iarg];
    if (iarg + 1 >= narg)
      error->all(FLERR, "Pair style {}: keyword '{}' needs a value", style_name_, key);
    const std::string value = arg[iarg + 1];
    if (key == "task") {
      task_given_ = value;
    } else if (key == "charge") {
      charge_ = utils::inumeric(FLERR, value, false, lmp);
      charge_set_ = true;
    } else if (key == "spin") {
      spin_ = utils::inumeric(FLERR, value, false, lmp);
      if (spin_ < 0)
        error->all(FLERR, "Pair style {}: spin is a multiplicity (2S+1 >= 1), got {}", style_name_,
                   spin_);
      spin_set_ = true;
    } else if (key == "precision") {
      try {
        uma::parse_precision(value);
      } catch (const std::exception& e) {
        error->all(FLERR, "Pair style {}: {}", style_name_, e.what());
      }
      precision_ = value;
    } else if (key == "device") {
      if (value != "auto" && value != "cpu" && value != "cuda" && value.rfind("cuda:", 0) != 0)
        error->all(FLERR, "Pair style {}: device must be auto, cpu, cuda or cuda:N, got '{}'",
                   style_name_, value);
      device_ = value;  // cuda:N is checked against the GPUs when the engine is made
    } else if (key == "memory") {
      memory_gb_ = utils::numeric(FLERR, value, false, lmp);
      if (!(memory_gb_ > 0.0))
        error->all(FLERR, "Pair style {}: memory is a budget in GB and must be positive, got {}",
                   style_name_, value);
    } else if (key == "cuda_graph") {
      if (value != "yes" && value != "no")
        error->all(FLERR, "Pair style {}: cuda_graph must be yes or no, got '{}'", style_name_,
                   value);
      cuda_graph_ = value == "yes";
    } else if (key == "ghosts") {
      if (value != "halo" && value != "deep")
        error->all(FLERR, "Pair style {}: ghosts must be halo or deep, got '{}'", style_name_,
                   value);
      deep_shell_ = value == "deep";
    } else {
      error->all(FLERR,
                 "Pair style {}: unknown keyword '{}' (expected task, charge, spin, precision, "
                 "device, memory, cuda_graph or ghosts)",
                 style_name_, key);
    }
    iarg += 2;
  }
  // Rebuilt with the new settings at the next init, from the weights a fix
  // uma/train trained where there are any (not from the model file again).
  if (engine_ && trained_) kept_model_ = std::make_shared<uma::UmaModel>(engine_->model());
  engine_.reset();
}

/* pair_coeff * * MODEL ELEM|NULL ... (one entry per atom type) */

void PairUMA::coeff(int narg, char** arg) {
  if (!allocated) allocate();
  const int ntypes = atom->ntypes;
  if (narg != 3 + ntypes)
    error->all(FLERR,
               "Pair coeff for uma: expected '* * MODEL' and {} element symbols or NULL (one "
               "per atom type), got {} after the model file",
               ntypes, narg - 3);
  if (strcmp(arg[0], "*") != 0 || strcmp(arg[1], "*") != 0)
    error->all(FLERR, "Pair coeff for uma must start with '* *' (one call maps all types)");
  model_path_ = arg[2];
  engine_.reset();
  uma::UmaModel model{nullptr};
  try {
    model = uma::load_model(model_path_);
  } catch (const std::exception& e) {
    error->all(FLERR, "Pair coeff for uma: cannot load model file '{}': {}", model_path_, e.what());
  }
  const int zmax = static_cast<int>(model->config().backbone.max_num_elements) - 1;
  type_z_.assign(ntypes + 1, 0);
  int mapped = 0;
  for (int t = 1; t <= ntypes; ++t) {
    const std::string sym = arg[2 + t];
    if (sym == "NULL") continue;
    const int z = uma::atomic_number(sym);
    if (z == 0)
      error->all(FLERR, "Pair coeff for uma: '{}' (type {}) is not an element symbol", sym, t);
    if (z > zmax)
      error->all(
          FLERR,
          "Pair coeff for uma: element {} (type {}) is not in the model (it covers Z = 1..{})", sym,
          t, zmax);
    type_z_[t] = z;
    ++mapped;
  }
  if (mapped == 0) error->all(FLERR, "Pair coeff for uma: every type is NULL");
  for (int i = 1; i <= ntypes; ++i)
    for (int j = i; j <= ntypes; ++j) setflag[i][j] = (type_z_[i] > 0 && type_z_[j] > 0) ? 1 : 0;
  const auto& bb = model->config().backbone;
  cutoff_ = bb.cutoff;
  layers_ = bb.num_layers;
  feature_width_ = (bb.lmax + 1) * (bb.lmax + 1) * bb.sphere_channels;
  coeff_model_ = std::make_shared<uma::UmaModel>(model);  // the engine takes it: read once
  if (trained_ && comm->me == 0)
    error->warning(FLERR,
                   "Pair coeff for {}: reads {} again: the weights fix uma/train trained are "
                   "replaced by the file's (a fix uma/train still defined hands its weights back "
                   "at the next run; its checkpoint keyword writes them)",
                   style_name_, model_path_);
  trained_ = false;
  kept_model_.reset();
}

std::string PairUMA::device_name() {
  // one GPU per rank: the node-local rank picks the device
  MPI_Comm node;
  int local = 0, node_ranks = 1;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, comm->me, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  MPI_Comm_size(node, &node_ranks);
  MPI_Comm_free(&node);
  try {
    const auto device = uma::resolve_device(device_, local, data_gpu());
    uma::make_current(device);
    // The ranks of this node that share the device's memory.
    const int devices = device.is_cuda() ? std::max<int>(1, torch::cuda::device_count()) : 1;
    memory_sharers_ = (node_ranks + devices - 1) / devices;
    return device.str();
  } catch (const std::exception& e) {
    error->all(FLERR, "Pair style {}: {}", style_name_, e.what());
  }
  return "cpu";
}

void PairUMA::create_engine() {
  uma::UmaModel model = coeff_model_ ? *coeff_model_ : uma::UmaModel{nullptr};
  coeff_model_.reset();
  const bool kept = !model && kept_model_;
  if (kept) model = *kept_model_;
  try {
    if (!model) model = uma::load_model(model_path_);  // an engine made again (new settings)
  } catch (const std::exception& e) {
    error->all(FLERR, "Pair style {}: cannot load model file '{}': {}", style_name_, model_path_,
               e.what());
  }
  const auto& cfg = model->config();
  const auto tasks = cfg.dataset_names();
  task_ = task_given_;  // resolved again for every model: pair_coeff may load another
  if (task_.empty()) {
    if (tasks.size() != 1)
      error->all(FLERR,
                 "Pair style {}: this model has several tasks ({}); choose one with "
                 "'pair_style uma task NAME'",
                 style_name_, cfg.dataset_list());
    task_ = tasks[0];
  }
  if (!model->has_dataset(task_))
    error->all(FLERR, "Pair style {}: {}", style_name_, cfg.unknown_task(task_));
  if ((charge_set_ || spin_set_) && !uma::takes_charge_spin(task_))
    error->all(FLERR,
               "Pair style {}: task '{}' takes no charge or spin input (only omol does); "
               "remove the charge/spin keywords",
               style_name_, task_);
  if (!spin_set_) spin_ = static_cast<int>(uma::default_spin(task_));
  try {
    uma::validate_charge_spin(task_, charge_, spin_);
  } catch (const std::exception& e) {
    error->all(FLERR, "Pair style {}: {}", style_name_, e.what());
  }
  const auto& out = model->outputs(task_);
  if (out.energy_rmsd != out.forces_rmsd || out.stress_mean != 0.0)
    error->all(FLERR,
               "Pair style {}: task '{}' has force/energy normalisers that differ ({} vs {}), "
               "so its forces are not -dE/dx of its energy; MD with it cannot conserve energy",
               style_name_, task_, out.forces_rmsd, out.energy_rmsd);

  uma::EngineOptions opts;
  opts.set_precision(uma::parse_precision(precision_));
  opts.device = torch::Device(device_name());
  opts.memory_budget = memory_gb_ * 1e9;
  opts.memory_sharers = memory_sharers_;
  if (cuda_graph_ && comm->nprocs > 1)
    error->all(
        FLERR,
        "Pair style {}: cuda_graph yes applies to one MPI rank (on several, the halo exchange "
        "runs between the autograd passes, which one CUDA graph cannot hold); use cuda_graph no",
        style_name_);
  opts.cuda_graph = cuda_graph_;
  try {
    engine_ = std::make_unique<uma::Engine>(model, opts);
  } catch (const std::exception& e) {
    error->all(FLERR, "Pair style {}: {}", style_name_, e.what());
  }
  merges_logged_ = 0;
  kept_model_.reset();  // the engine holds them now
  if (comm->me == 0)
    utils::logmesg(lmp,
                   "pair {}: model {} ({}, {} layers, cutoff {} A), task {}, charge {}, spin {}, "
                   "{} on {}{}\n",
                   style_name_, model_path_, cfg.model_id, cfg.backbone.num_layers,
                   cfg.backbone.cutoff, task_, charge_, spin_, precision_, opts.device.str(),
                   kept ? ", with the weights fix uma/train trained (not the file's)" : "");
}

/* The memory plan, in the log: at the first step of a run and whenever the
   path changes (stored <-> recomputed).  Rank 0's plan stands for all. */

void PairUMA::log_memory_plan() {
  const uma::MemoryPlan plan = engine_->stats().memory_plan;
  if (plan_logged_ && plan.recompute == plan_logged_recompute_) return;
  if (comm->me == 0)
    utils::logmesg(lmp, "pair {}: memory plan{} at step {}: {}\n", style_name_,
                   comm->nprocs > 1 ? " of rank 0" : "", update->ntimestep, plan.describe());
  plan_logged_ = true;
  plan_logged_recompute_ = plan.recompute;
}

/* At the end of a run on a GPU: the most memory LibTorch held on it during
   the run (the largest over the ranks), beside the memory plan's prediction
   for one evaluation and its budget, so that a `memory` budget can be
   checked against what the run used. */

void PairUMA::finish() {
  if (!engine_ || !engine_->options().device.is_cuda()) return;
  double peak[2] = {uma::device_peak_bytes(engine_->options().device), run_start_device_bytes_},
         largest[2] = {0.0, 0.0};
  MPI_Allreduce(peak, largest, 2, MPI_DOUBLE, MPI_MAX, world);
  if (comm->me != 0) return;
  const uma::EngineStats stats = engine_->stats();
  utils::logmesg(lmp,
                 "pair {}: peak GPU memory of the run {:.3f} GB{}, of which {:.3f} GB were held "
                 "when it began (the model, kept buffers); the memory plan predicted {:.3f} GB "
                 "for one evaluation (budget {:.3f} GB, {})\n",
                 style_name_, largest[0] * 1e-9,
                 comm->nprocs > 1 ? " (the largest of " + std::to_string(comm->nprocs) + " ranks)"
                                   : std::string(),
                 largest[1] * 1e-9, stats.memory_plan.predicted_bytes * 1e-9,
                 stats.memory_budget * 1e-9,
                 stats.memory_plan.recompute ? "recomputed" : "stored");
}

/* CUDA-graph replay, in the log: the first capture, and every new reason a
   step could not be captured (it then runs eagerly). */

void PairUMA::log_cuda_graph() {
  if (!cuda_graph_ || comm->me != 0) return;
  const uma::EngineStats stats = engine_->stats();
  if (stats.graph_captures == 1 && stats.graph_replays == 0)
    utils::logmesg(
        lmp, "pair {}: step {} captured as a CUDA graph; later steps of this layout replay it\n",
        style_name_, update->ntimestep);
  const std::string& why = stats.graph_refusal;
  if (!why.empty() && why != graph_refusal_logged_) {
    utils::logmesg(lmp, "pair {}: no CUDA graph at step {}, evaluating eagerly: {}\n", style_name_,
                   update->ntimestep, why);
    graph_refusal_logged_ = why;
  }
}

void PairUMA::init_style() {
  if (strcmp(update->unit_style, "metal") != 0)
    error->all(FLERR,
               "Pair style {} requires 'units metal' (the model works in eV and Angstrom), "
               "not units {}",
               style_name_, update->unit_style);
  if (domain->dimension != 3)
    error->all(FLERR,
               "Pair style {} requires 'dimension 3': the model sees atoms in three "
               "dimensions, and a 2d box's z length would change the energy",
               style_name_);
  if (model_path_.empty())
    error->all(FLERR, "Pair style {}: pair_coeff * * MODEL ... is missing", style_name_);
  if (!engine_) create_engine();
  for (int k = 0; k < nextra; ++k) pvector[k] = 0.0;  // the run's transfer totals start here
  uma::reset_device_peak(engine_->options().device);  // and its peak GPU memory (finish)
  run_start_device_bytes_ = std::max(0.0, uma::device_allocated_bytes(engine_->options().device));
  plan_logged_ = false;
  if (comm->nprocs > 1) {
    if (deep_shell_) {
      // An owned atom's energy depends on everything within (layers + 1) x
      // cutoff: the edge-degree embedding is one message-passing hop before
      // the layers.  The ghosts must cover that between reneighborings.
      const double needed = (layers_ + 1) * cutoff_ + neighbor->skin;
      if (comm->cutghostuser < needed) {
        if (user_cutghost_ < 0.0) user_cutghost_ = comm->cutghostuser;
        comm->cutghostuser = needed;
      }
      if (comm->me == 0)
        utils::logmesg(lmp,
                       "pair {}: ghosts deep: no halo exchange; ghost cutoff {} A "
                       "((1 + {} layers) x {} A + skin) on {} ranks\n",
                       style_name_, std::max(needed, comm->cutghostuser), layers_, cutoff_,
                       comm->nprocs);
    } else {
      // The halo exchange needs the usual ghost shell (cutoff + skin), and
      // feature rows in the communication buffers.
      if (user_cutghost_ >= 0.0) {  // a deep shell raised it before
        comm->cutghostuser = user_cutghost_;
        user_cutghost_ = -1.0;
      }
      comm_forward = feature_width_;
      comm_reverse = comm_reverse_off = std::max(9, feature_width_);
      // pair_style hybrid took its sub-styles' sizes when it was set up,
      // before pair_coeff gave this style its row width; LAMMPS sizes its
      // buffers from the top-level style.
      if (force->pair && force->pair != this) {
        force->pair->comm_forward = std::max(force->pair->comm_forward, comm_forward);
        force->pair->comm_reverse = std::max(force->pair->comm_reverse, comm_reverse);
        force->pair->comm_reverse_off = std::max(force->pair->comm_reverse_off, comm_reverse_off);
      }
      if (comm->me == 0)
        utils::logmesg(lmp,
                       "pair {}: halo exchange on {} ranks: {} values per ghost atom after the "
                       "embedding and {} of the {} blocks; ghost cutoff {} A + skin\n",
                       style_name_, comm->nprocs, feature_width_, layers_ - 1, layers_, cutoff_);
    }
  }
}

double PairUMA::init_one(int, int) { return cutoff_; }

PairUMA::Setup PairUMA::training_setup() {
  if (model_path_.empty())
    error->all(FLERR, "Pair style {}: pair_coeff * * MODEL ... is missing", style_name_);
  if (!engine_) create_engine();
  return {model_path_, task_, engine_->options().device.str(), charge_, spin_, type_z_};
}

void PairUMA::set_weights(const std::function<void(uma::UmaModel&)>& copy) {
  if (!engine_) create_engine();
  engine_->update_weights(copy);
  weights_updated_ = trained_ = true;
}

bool PairUMA::read_trained_weights(const std::function<void(const uma::UmaModel&)>& read) {
  if (!trained_) return false;
  if (!engine_) create_engine();
  read(engine_->model());
  return true;
}

void PairUMA::compute(int eflag, int vflag) {
  ev_init(eflag, vflag);
  transfers_.begin_step();
  try {
    if (comm->nprocs == 1)
      compute_whole(eflag, vflag);
    else
      compute_local(eflag, vflag);
  } catch (const AgreedFailure& e) {  // every rank, the same message
    error->all(FLERR, "Pair style {}: {}", style_name_, e.what());
  } catch (const std::exception& e) {  // uma::Error: bad input the engine refused
    error->one(FLERR, "Pair style {}: {}", style_name_, describe(e));
  }
  const long long merges = engine_->stats().merges;
  if (weights_updated_) {
    merges_logged_ = merges;
    weights_updated_ = false;
  }
  // The first few re-merges are logged: under Monte Carlo moves (fix atom/swap
  // semi-grand, fix gcmc) the composition changes with every accepted move.
  constexpr int kRemergeLines = 5;
  if (merges > merges_logged_ && merges_logged_ > 0 && remerges_logged_ < kRemergeLines &&
      comm->me == 0) {
    ++remerges_logged_;
    utils::logmesg(lmp, "pair {}: composition changed at step {}; experts merged again{}\n",
                   style_name_, update->ntimestep,
                   remerges_logged_ == kRemergeLines ? " (later re-merges are not logged)" : "");
  }
  merges_logged_ = merges;
  log_memory_plan();
  log_cuda_graph();
  transfers_.end_step(pvector);
}

// One rank: the owned atoms are the whole system, periodic as the box is.
void PairUMA::compute_whole(int, int) {
  double** x = atom->x;
  double** f = atom->f;
  const int* type = atom->type;
  const int nlocal = atom->nlocal;

  std::vector<int>& index = engine_index_;
  index.clear();
  uma::Atoms a;
  for (int i = 0; i < nlocal; ++i) {
    if (type_z_[type[i]] == 0) continue;
    index.push_back(i);
    a.numbers.push_back(type_z_[type[i]]);
  }
  const int n = static_cast<int>(index.size());
  if (n == 0) return;
  a.positions = torch::empty({n, 3}, torch::kFloat64);
  double* pos = a.positions.data_ptr<double>();  // host data
  for (int k = 0; k < n; ++k)
    for (int d = 0; d < 3; ++d) pos[3 * k + d] = x[index[k]][d] - domain->boxlo[d];
  set_whole_system(a);

  // One packed read: forces, and energy and virials only when LAMMPS asks.
  uma::HostEvaluation r;
  uma::until_capacity_fits(
      [&] { return engine_->read(engine_->evaluate({a}, read_request()), r); });
  const auto F = r.forces.accessor<double, 2>();  // host data
  for (int k = 0; k < n; ++k)
    for (int d = 0; d < 3; ++d) f[index[k]][d] += F[k][d];
  tally(r, n, n);
}

void PairUMA::set_whole_system(uma::Atoms& a) const {
  a.cell = {{{domain->xprd, 0.0, 0.0},
             {domain->xy, domain->yprd, 0.0},
             {domain->xz, domain->yz, domain->zprd}}};
  a.pbc = {domain->xperiodic != 0, domain->yperiodic != 0, domain->zperiodic != 0};
  a.charge = charge_;
  a.spin = spin_;
  a.task = task_;
}

void PairUMA::tally(const uma::HostEvaluation& r, int n_energy, int n_virial) {
  const std::vector<int>& index = engine_index_;
  if (eflag_global) eng_vdwl += r.energy[0];
  if (eflag_atom) {
    const auto Ea = r.atom_energy.accessor<double, 1>();  // host data
    for (int k = 0; k < n_energy; ++k) eatom[index[k]] += Ea[k];
  }
  if (vflag_global) add_virial(virial, r.virial.accessor<double, 3>()[0]);  // host data
  if (vflag_atom && n_virial > 0) {
    const auto V = r.atom_virial.accessor<double, 3>();  // host data
    for (int k = 0; k < n_virial; ++k) add_virial(vatom[index[k]], V[k]);
  }
}

// An engine error in LAMMPS's terms: close atoms are named by their atom IDs.
std::string PairUMA::describe(const std::exception& e) const {
  const auto* close = dynamic_cast<const uma::CloseAtomsError*>(&e);
  if (!close) return e.what();
  auto id = [&](int64_t k) {
    return k >= 0 && k < static_cast<int64_t>(engine_index_.size()) && atom->tag_enable
               ? static_cast<long long>(atom->tag[engine_index_[k]])
               : -1LL;
  };
  return fmt::format(
      "atoms with IDs {} and {} are {:.3g} A apart, closer than the {} A minimum "
      "(overlapping atoms: check the structure, or shorten the time step)",
      id(close->first), id(close->second), close->distance, uma::kMinAtomDistance);
}

uma::Request PairUMA::read_request() const {
  uma::Request what;
  what.energy = eflag_global != 0;
  what.forces = true;
  what.atom_energy = eflag_atom != 0;
  what.virial = vflag_global != 0;
  what.atom_virial = vflag_atom != 0;
  return what;
}

void PairUMA::subdomain_corner(double* origin) const {
  if (domain->triclinic)
    domain->lamda2x(domain->sublo_lamda, origin);
  else
    std::copy(domain->sublo, domain->sublo + 3, origin);
}

std::vector<long long> PairUMA::global_composition(const std::vector<int64_t>& numbers,
                                                   int nowned) const {
  std::vector<long long> counts(engine_->model()->config().backbone.max_num_elements, 0);
  for (int k = 0; k < nowned; ++k) ++counts[numbers[k]];
  return sum_over_ranks(std::move(counts));
}

std::vector<long long> PairUMA::sum_over_ranks(std::vector<long long> counts) const {
  MPI_Allreduce(MPI_IN_PLACE, counts.data(), static_cast<int>(counts.size()), MPI_LONG_LONG,
                MPI_SUM, world);
  return counts;
}

void PairUMA::set_piece_inputs(uma::Atoms& local) const {
  local.charge = charge_;
  local.spin = spin_;
  local.task = task_;
  const auto& bb = engine_->model()->config().backbone;
  if (bb.charge_channel_end > bb.charge_channel_begin ||
      bb.spin_channel_end > bb.spin_channel_begin) {
    MPI_Comm comm = world;
    local.piece.sum_over_processes = [comm](const torch::Tensor& t) {
      return tensor_sum_over_ranks(t, comm);
    };
  }
}

// Several ranks: owned atoms, then ghosts (rank_share.h).
void PairUMA::compute_local(int, int) {
  double** x = atom->x;
  double** f = atom->f;
  const int* type = atom->type;
  const int nlocal = atom->nlocal, nall = atom->nlocal + atom->nghost;

  uma::Atoms local;
  double lo[3], hi[3];
  std::vector<int>& index = engine_index_;
  local.piece.n_owned = collect_owned(*atom, type_z_, index, lo, hi);
  if (deep_shell_) {
    add_ghosts_deep(*atom, type_z_, layers_, cutoff_, lo, hi, index, local);
  } else {
    add_ghosts_halo(*atom, type_z_, index, local);
    halo_->set_atoms(&index, static_cast<int>(local.piece.n_owned), nall);
    local.piece.exchange_ghosts = halo_->functions();
  }
  const int n = static_cast<int>(index.size()), n_owned = static_cast<int>(local.piece.n_owned);
  for (int k = 0; k < n; ++k) local.numbers.push_back(type_z_[type[index[k]]]);
  // float32 keeps 7 digits: coordinates relative to this rank's subdomain
  double o[3];
  subdomain_corner(o);
  local.positions = torch::empty({n, 3}, torch::kFloat64);
  double* pos = local.positions.data_ptr<double>();  // host data
  for (int k = 0; k < n; ++k)
    for (int d = 0; d < 3; ++d) pos[3 * k + d] = x[index[k]][d] - o[d];
  const auto counts = global_composition(local.numbers, n_owned);
  local.piece.composition.assign(counts.begin(), counts.end());
  set_piece_inputs(local);
  halo_->reset_counts();
  uma::HostEvaluation r;
  evaluate_on_every_rank(*engine_, local, read_request(), r, world,
                         [this](const std::exception& e) { return describe(e); });

  fold_->clear(nall, atom->nmax, vflag_atom != 0);
  const auto F = r.forces.accessor<double, 2>();  // host data
  for (int k = 0; k < n; ++k)
    for (int d = 0; d < 3; ++d) fold_->row(index[k])[d] = F[k][d];
  if (vflag_atom) {
    const auto V = r.atom_virial.accessor<double, 3>();                     // host data
    for (int k = 0; k < n; ++k) add_virial(fold_->row(index[k]) + 3, V[k]);  // rows zeroed above
  }
  // Ghost rows go home whatever newton_pair says; the ghosts keep nothing.
  reverse_comm_host(*fold_, fold_->width());
  pvector[kGhostAtoms] = n - n_owned;
  pvector[kHaloBytes] = static_cast<double>(halo_->rows_packed() * halo_->row_bytes());
  for (int i = 0; i < nlocal; ++i) {
    for (int d = 0; d < 3; ++d) f[i][d] += fold_->row(i)[d];
    if (vflag_atom)
      for (int d = 0; d < 6; ++d) vatom[i][d] += fold_->row(i)[3 + d];
  }
  tally(r, n_owned, 0);  // per-atom virials: folded above
}

int PairUMA::pack_forward_comm(int n, int* list, double* buf, int, int*) {
  return halo_->pack_forward(n, list, buf);  // node features: translation-invariant, no image shift
}

void PairUMA::unpack_forward_comm(int n, int first, double* buf) {
  halo_->unpack_forward(n, first, buf);
}

// The reverse communication is either the halo exchange's or the fold's
// (reverse_comm_host says which).
int PairUMA::pack_reverse_comm(int n, int first, double* buf) {
  if (!reverse_rows_)
    error->one(FLERR, "Pair style {}: internal: reverse communication outside compute",
               style_name_);
  return reverse_rows_->pack_reverse(n, first, buf);
}

void PairUMA::unpack_reverse_comm(int n, int* list, double* buf) {
  if (!reverse_rows_)
    error->one(FLERR, "Pair style {}: internal: reverse communication outside compute",
               style_name_);
  reverse_rows_->unpack_reverse(n, list, buf);
}

double PairUMA::memory_usage() {
  return Pair::memory_usage() + fold_->memory_usage() + halo_->memory_usage();
}
