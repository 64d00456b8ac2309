#include "fix_uma_train.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numeric>

#include "atom.h"
#include "atom_masks.h"
#include "comm.h"
#include "domain.h"
#include "error.h"
#include "exceptions.h"
#include "force.h"
#include "input.h"
#include "lammps.h"
#include "library.h"
#include "pair.h"
#include "universe.h"
#include "update.h"
#include "utils.h"

#include "first_failure.h"
#include "reference_labeller.h"
#include "uma_model_handle.h"

#include "engine.h"
#include "train/option_table.h"
#include "model.h"
#include "train/sampler.h"
#include "train/trainer.h"
#include "training_data.h"
#include "transfers.h"

using namespace LAMMPS_NS;
using namespace FixConst;

namespace {

enum Stat { LOSS, ENERGY_MAE, FORCES_MAE, STRESS_MAE, GRAD_NORM, LR, STEPS, FRAMES, SKIPPED, HELD_ENERGY_MAE, HELD_FORCES_MAE,
            READS_PER_STEP, UNCERTAINTY, REFERENCE_CALLS, RANK_CORRELATION, NSTATS };

constexpr double kRestartFormat = -2;   // first value of the restart list (older files start with a step count >= 0)
// The restart list after the marker; files older than the marker hold the first four.
constexpr double FixUMATrain::Resumed::*kRestartFields[] = {
    &FixUMATrain::Resumed::steps,  &FixUMATrain::Resumed::epoch,  &FixUMATrain::Resumed::position,
    &FixUMATrain::Resumed::calls,  &FixUMATrain::Resumed::frames, &FixUMATrain::Resumed::last_label_step,
    &FixUMATrain::Resumed::planned_samples};
constexpr int kRestartFieldCount = sizeof(kRestartFields) / sizeof(kRestartFields[0]);
constexpr int kOldRestartFieldCount = 4;

// The fix's own keywords; the training options (lr, ema, committee, ...) come
// from uma::train's option table, shared with `uma train`.
bool is_fix_keyword(const std::string &w) {
  static const char *words[] = {"data", "label", "reference", "task", "max_atoms", "steps", "use", "shuffle",
                                "write_frames", "checkpoint", "print", "state", "holdout", "check", "min_interval",
                                "max_interval", "holdout_data", "calibration"};
  return std::find_if(std::begin(words), std::end(words), [&](const char *k) { return w == k; }) != std::end(words);
}

bool is_table_option(const std::string &w) {
  const auto &specs = uma::train::train_option_specs();
  return std::any_of(specs.begin(), specs.end(), [&](const auto &s) { return s.name == w; });
}

}  // namespace

FixUMATrain::FixUMATrain(LAMMPS *lmp, int narg, char **arg) : Fix(lmp, narg, arg), options_(std::make_unique<uma::train::TrainOptions>()) {
  if (narg < 4) utils::missing_cmd_args(FLERR, "fix uma/train", error);
  // Under -partition each replica (NEB, PIMD, tempering) would train its own
  // copy of the model: the replicas would no longer share one potential.
  if (universe->nworlds > 1)
    error->all(FLERR, "Fix uma/train cannot run under -partition ({} partitions): each replica would train its own "
                      "copy of the model and the replicas would no longer share one potential; train without "
                      "partitions, then run the replicas with the trained model file", universe->nworlds);
  train_every_ = utils::inumeric(FLERR, arg[3], false, lmp);
  if (train_every_ < 1) error->all(FLERR, "Fix uma/train: N (train every N steps) must be >= 1, got {}", train_every_);
  auto &o = *options_;
  state_file_ = std::string(id) + ".uma-train.state";
  auto need = [&](int i, int n, const char *what) {
    if (i + n >= narg) utils::missing_cmd_args(FLERR, std::string("fix uma/train ") + what, error);
  };
  auto number = [&](int i) { return utils::numeric(FLERR, arg[i], false, lmp); };
  auto positive = [&](int i, const char *key) {
    const double v = number(i);
    if (!(v > 0)) error->all(FLERR, "Fix uma/train: {} must be > 0, got {}", key, arg[i]);
    return v;
  };
  auto non_negative = [&](int i, const char *key) {
    const double v = number(i);
    if (!(v >= 0)) error->all(FLERR, "Fix uma/train: {} must be >= 0, got {}", key, arg[i]);
    return v;
  };
  bool committee_given = false;
  std::string reference_style;
  std::vector<std::string> reference_args, coeff_args;
  int i = 4;
  while (i < narg) {
    const std::string key = arg[i];
    if (key == "reference") {
      // reference STYLE [style args] coeff COEFF ARGS ...  (the rest of the line)
      need(i, 1, "reference");
      reference_style = arg[i + 1];
      int j = i + 2;
      while (j < narg && strcmp(arg[j], "coeff") != 0) reference_args.emplace_back(arg[j++]);
      if (j >= narg)
        error->all(FLERR, "Fix uma/train: reference needs 'coeff ARGS' after the style, e.g. "
                          "'reference eam/alloy coeff * * Cu_u3.eam Cu'");
      for (++j; j < narg; ++j) coeff_args.emplace_back(arg[j]);
      if (coeff_args.empty()) error->all(FLERR, "Fix uma/train: reference coeff needs arguments");
      i = narg;
      continue;
    }
    if (!is_fix_keyword(key) && !is_table_option(key))
      error->all(FLERR, "Fix uma/train: unknown keyword '{}'", key);
    if (key == "checkpoint") {
      need(i, 2, "checkpoint");
      checkpoint_file_ = arg[i + 1];
      checkpoint_every_ = utils::inumeric(FLERR, arg[i + 2], false, lmp);
      if (checkpoint_every_ < 1) error->all(FLERR, "Fix uma/train: checkpoint interval must be >= 1");
      i += 3;
      continue;
    }
    need(i, 1, key.c_str());
    const std::string value = arg[i + 1];
    if (key == "data") data_files_.push_back(value);
    else if (key == "label" && value == "auto") {
      // label auto THRESHOLD: the uncertainty gate
      need(i, 2, "label auto");
      label_auto_ = true;
      label_every_ = 0;
      threshold_ = utils::numeric(FLERR, arg[i + 2], false, lmp);
      if (!(threshold_ > 0)) error->all(FLERR, "Fix uma/train: label auto THRESHOLD must be > 0 eV, got {}", arg[i + 2]);
      i += 3;
      continue;
    } else if (key == "label") {
      label_every_ = utils::inumeric(FLERR, arg[i + 1], false, lmp);
      if (label_every_ < 0) error->all(FLERR, "Fix uma/train: label interval must be >= 0");
      label_auto_ = false;
    } else if (is_table_option(key)) {
      try {
        uma::train::set_train_option(o, key, value);
      } catch (const std::exception &e) {
        error->all(FLERR, "Fix uma/train: {}", e.what());
      }
      if (key == "committee") committee_given = true;
    } else if (key == "check") check_every_ = static_cast<int>(positive(i + 1, "check"));
    else if (key == "min_interval") min_interval_ = static_cast<int>(non_negative(i + 1, "min_interval"));
    else if (key == "max_interval") max_interval_ = static_cast<int>(non_negative(i + 1, "max_interval"));
    else if (key == "holdout_data") holdout_files_.push_back(value);
    else if (key == "calibration") calibration_file_ = value;
    else if (key == "task") task_ = value;
    else if (key == "max_atoms") max_atoms_ = static_cast<long long>(positive(i + 1, "max_atoms"));
    else if (key == "steps") steps_per_call_ = static_cast<int>(positive(i + 1, "steps"));
    else if (key == "use") {
      if (value != "ema" && value != "raw") error->all(FLERR, "Fix uma/train: use must be 'ema' or 'raw', got '{}'", value);
      use_average_ = value == "ema";
    }
    else if (key == "shuffle") shuffle_ = utils::logical(FLERR, value, false, lmp) == 1;
    else if (key == "write_frames") frames_file_ = value;
    else if (key == "print") print_every_ = static_cast<int>(positive(i + 1, "print"));
    else if (key == "state") state_file_ = value;
    else if (key == "holdout") {
      holdout_every_ = utils::inumeric(FLERR, value, false, lmp);
      if (holdout_every_ < 0 || holdout_every_ == 1)
        error->all(FLERR, "Fix uma/train: holdout K keeps every K-th labelled frame out of training; K must be 0 or >= 2");
    }
    i += 2;
  }
  if (use_average_ && o.optimizer.ema_decay == 0) error->all(FLERR, "Fix uma/train: 'use ema' needs an ema decay > 0");
  if (label_every_ > 0 && reference_style.empty())
    error->all(FLERR, "Fix uma/train: label {} needs a reference pair style ('reference STYLE ... coeff ...')",
               label_every_);
  if (label_auto_ && reference_style.empty())
    error->all(FLERR, "Fix uma/train: label auto needs a reference pair style ('reference STYLE ... coeff ...')");
  if (label_every_ == 0 && !label_auto_ && data_files_.empty())
    error->all(FLERR, "Fix uma/train: nothing to train on; give 'data FILE' and/or 'label M reference ...'");
  committee_ = committee_given ? static_cast<int>(o.committee_members) : label_auto_ ? 4 : 0;   // the gate's default
  if (label_auto_ && committee_ == 0)
    error->all(FLERR, "Fix uma/train: label auto needs a committee (committee K with K >= 2; default 4)");
  if (!label_auto_ && (min_interval_ > 0 || max_interval_ > 0))
    error->all(FLERR, "Fix uma/train: min_interval and max_interval apply to 'label auto THRESHOLD' only");
  if (max_interval_ > 0 && max_interval_ % check_every_ != 0)
    error->all(FLERR, "Fix uma/train: max_interval {} must be a multiple of check {} (labels are decided on check "
                      "steps)", max_interval_, check_every_);
  if (max_interval_ > 0 && max_interval_ < min_interval_)
    error->all(FLERR, "Fix uma/train: max_interval {} is below min_interval {}", max_interval_, min_interval_);
  if (!calibration_file_.empty() && committee_ == 0)
    error->all(FLERR, "Fix uma/train: calibration FILE needs a committee (committee K, or label auto)");
  seed_ = o.seed;
  o.committee_members = committee_;
  labeller_ = ReferenceLabeller(reference_style, reference_args, coeff_args);

  vector_flag = 1;
  size_vector = NSTATS;
  global_freq = 1;
  extvector = 0;
  restart_global = 1;
  // Called only on steps where it labels, trains or checkpoints.  Under
  // KOKKOS, LAMMPS syncs what a fix reads to the host before each call and
  // what it modifies back: positions, types and IDs (to label frames), and
  // nothing back.
  nevery = std::gcd(std::gcd(std::gcd(train_every_, label_every_), checkpoint_every_), committee_ > 0 ? check_every_ : 0);
  datamask_read = X_MASK | TYPE_MASK | TAG_MASK;
  datamask_modify = EMPTY_MASK;
}

FixUMATrain::~FixUMATrain() = default;

int FixUMATrain::setmask() { return END_OF_STEP; }

void FixUMATrain::init() {
  pair_ = nullptr;
  for (const char *name : {"uma", "uma/kk", "uma/kk/device", "uma/kk/host"})
    if (!pair_) pair_ = dynamic_cast<UMAModelHandle *>(force->pair_match(name, 1));
  if (!pair_) error->all(FLERR, "Fix uma/train requires pair_style uma or uma/kk (alone or in a hybrid)");
  if (!atom->tag_enable) error->all(FLERR, "Fix uma/train requires atom IDs");
  if (atom->natoms > std::numeric_limits<int>::max() / 3) error->all(FLERR, "Fix uma/train: too many atoms");
  if (!trainer_) create_trainer();
}

void FixUMATrain::create_trainer() {
  const auto setup = pair_->training_setup();
  type_z_ = setup.type_z;
  pair_task_ = task_.empty() ? setup.task : task_;
  charge_ = setup.charge;
  spin_ = setup.spin;
  auto &o = *options_;
  o.device = torch::Device(setup.device);
  const int nprocs = comm->nprocs;
  if (nprocs > 1) {
    MPI_Comm world_comm = world;
    o.sum_host = [world_comm](std::vector<double> &v) {
      MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM, world_comm);
    };
    o.first_failure = [world_comm](const std::string &mine) { return first_failure(world_comm, mine); };
    // Reduce to rank 0, then broadcast: every rank gets the very same bits.
    // On a GPU the gradient goes through one persistent pinned host mirror
    // (one counted read and one upload per step, nothing allocated per step;
    // no CUDA-aware MPI or NCCL yet); on the CPU it is reduced in place.
    // One mirror per gradient size: the model's and the committee's.
    o.sum_gradients = [world_comm, mirrors = std::make_shared<std::map<int64_t, uma::HostMirror>>()](torch::Tensor &g) {
      const bool on_host = g.device().is_cpu();
      uma::HostMirror *mirror = on_host ? nullptr : &(*mirrors)[g.numel()];
      torch::Tensor host = on_host ? g : mirror->read(g);
      int me = 0;
      MPI_Comm_rank(world_comm, &me);
      const int n = static_cast<int>(host.numel());
      void *data = host.data_ptr();   // host data
      const MPI_Datatype type = host.scalar_type() == torch::kFloat64 ? MPI_DOUBLE : MPI_FLOAT;
      MPI_Reduce(me == 0 ? MPI_IN_PLACE : data, data, n, type, MPI_SUM, 0, world_comm);
      MPI_Bcast(data, n, type, 0, world_comm);
      if (!on_host) mirror->write(g);
    };
  }
  try {
    torch::manual_seed(seed_);
    trainer_ = std::make_unique<uma::train::Trainer>(uma::load_model(setup.model_path), o);
    for (const auto &file : data_files_) {
      auto samples = uma::read_training_data(file, pair_task_);
      for (const auto &s : samples) add_sample(s, false);
      if (comm->me == 0) utils::logmesg(lmp, "fix uma/train: {} frames from {}\n", samples.size(), file);
    }
    for (const auto &file : holdout_files_) {
      auto samples = uma::read_training_data(file, pair_task_);
      for (const auto &s : samples) add_sample(s, true);
      if (comm->me == 0) utils::logmesg(lmp, "fix uma/train: {} held-out frames from {}\n", samples.size(), file);
    }
  } catch (const std::exception &e) {
    error->all(FLERR, "Fix uma/train: {}", e.what());
  }
  if (max_atoms_ == 0) max_atoms_ = std::max<long long>(atom->natoms, 1);
  sampler_ = std::make_unique<uma::train::MaxAtomsSampler>(max_atoms_, seed_, nprocs, comm->me, shuffle_);
  if (comm->me == 0)
    utils::logmesg(lmp, "fix uma/train: training {} on {} rank(s), task {}, every {} steps, {} optimizer step(s) "
                        "of at most {} atoms per rank, lr {}, EMA {}, pair style uses the {} weights\n",
                   setup.model_path, nprocs, pair_task_, train_every_, steps_per_call_, max_atoms_,
                   o.optimizer.lr, o.optimizer.ema_decay, use_average_ ? "averaged" : "raw");
  if (comm->me == 0 && committee_ > 0)
    utils::logmesg(lmp, "fix uma/train: uncertainty committee of {} heads, checked every {} steps{}\n", committee_,
                   check_every_,
                   label_auto_ ? fmt::format("; label when it exceeds {} eV (max over atoms), at most every {} and at "
                                             "least every {} steps", threshold_, std::max(min_interval_, check_every_),
                                             max_interval_ > 0 ? std::to_string(max_interval_) : std::string("inf"))
                               : std::string());
}

void FixUMATrain::setup(int) {
  if (restarted_) {
    restarted_ = false;
    try {
      trainer_->load_state(state_file_);
    } catch (const std::exception &e) {
      error->all(FLERR, "Fix uma/train: cannot restart from the optimizer state: {}", e.what());
    }
    sampler_->resume(static_cast<int64_t>(resumed_.epoch), static_cast<int64_t>(resumed_.position),
                     resumed_.planned_samples > 0 ? static_cast<int64_t>(resumed_.planned_samples) : -1);
    calls_ = static_cast<long long>(resumed_.calls);
    frames_collected_ = static_cast<long long>(resumed_.frames);
    last_label_step_ = static_cast<long long>(resumed_.last_label_step);
    stats_[REFERENCE_CALLS] = static_cast<double>(frames_collected_);
    push_weights();
    if (comm->me == 0)
      utils::logmesg(lmp, "fix uma/train: restarted after {} optimizer steps from {}\n", trainer_->steps(),
                     state_file_);
  }
  // The first frame checks the reference style before any MD happens.
  if ((label_every_ > 0 || label_auto_) && frames_collected_ == 0) {
    auto s = gather_frame();
    collect_frame(s);
  }
}

void FixUMATrain::end_of_step() {
  const bigint step = update->ntimestep;
  const bool check = committee_ > 0 && step % check_every_ == 0;
  const bool fixed = label_every_ > 0 && step % label_every_ == 0;
  if (check || fixed) {
    auto s = gather_frame();
    const bool gate = check && check_uncertainty(s);
    if (fixed || gate) collect_frame(s);
  }
  if (step % train_every_ == 0) train();
  if (checkpoint_every_ > 0 && step % checkpoint_every_ == 0) write_checkpoint();
}

uma::Sample FixUMATrain::gather_frame() {
  // Every rank gets every atom, ordered by ID.
  const int nlocal = atom->nlocal;
  std::vector<double> mine;
  for (int i = 0; i < nlocal; ++i) {
    double x[3] = {atom->x[i][0], atom->x[i][1], atom->x[i][2]};
    domain->remap(x);
    mine.insert(mine.end(), {static_cast<double>(atom->tag[i]), static_cast<double>(atom->type[i]), x[0], x[1], x[2]});
  }
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(comm->nprocs), displs(comm->nprocs);
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, world);
  std::partial_sum(counts.begin(), counts.end() - 1, displs.begin() + 1);
  std::vector<double> all(displs.back() + counts.back());
  MPI_Allgatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, world);
  const int n = static_cast<int>(all.size() / 5);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return all[5 * a] < all[5 * b]; });

  uma::Sample s;
  std::vector<double> pos;
  for (int k : order) {
    const int type = static_cast<int>(all[5 * k + 1]);
    if (type_z_[type] == 0)
      error->all(FLERR, "Fix uma/train: atom type {} is not mapped to an element by pair_coeff (NULL); "
                        "frames for training must be whole UMA systems", type);
    s.atoms.numbers.push_back(type_z_[type]);
    for (int c = 0; c < 3; ++c) pos.push_back(all[5 * k + 2 + c] - domain->boxlo[c]);
  }
  s.atoms.positions = torch::from_blob(pos.data(), {n, 3}, torch::kFloat64).clone();   // host data
  s.atoms.cell = {{{domain->xprd, 0.0, 0.0}, {domain->xy, domain->yprd, 0.0}, {domain->xz, domain->yz, domain->zprd}}};
  s.atoms.pbc = {domain->xperiodic != 0, domain->yperiodic != 0, domain->zperiodic != 0};
  s.atoms.task = pair_task_;
  s.atoms.charge = charge_;
  s.atoms.spin = spin_;
  return s;
}

bool FixUMATrain::check_uncertainty(const uma::Sample &s) {
  // Rank 0 evaluates; the estimate goes to every rank, which all take the
  // same decision from it.
  double u[2] = {0, 0};   // max, mean
  on_rank_zero(fmt::format("uncertainty at step {}", update->ntimestep), [&] {
    const auto e = trainer_->uncertainty(s);
    u[0] = e.max;
    u[1] = e.mean;
  });
  MPI_Bcast(u, 2, MPI_DOUBLE, 0, world);
  uncertainty_[0] = u[0];
  uncertainty_[1] = u[1];
  stats_[UNCERTAINTY] = u[0];
  ++checks_;
  if (!label_auto_) return false;
  const long long since = update->ntimestep - last_label_step_;
  const bool forced = max_interval_ > 0 && since >= max_interval_;
  const bool unsure = u[0] > threshold_ && since >= min_interval_;
  if (!forced && !unsure) return false;
  ++gated_labels_;
  if (comm->me == 0) {
    if (unsure)
      utils::logmesg(lmp, "fix uma/train: step {} labelled: uncertainty {:.4g} eV > {} eV\n", update->ntimestep,
                     u[0], threshold_);
    else
      utils::logmesg(lmp, "fix uma/train: step {} labelled: {} steps since the last label (max_interval; "
                          "uncertainty {:.4g} eV)\n", update->ntimestep, since, u[0]);
  }
  return true;
}

void FixUMATrain::collect_frame(uma::Sample &s) {
  const int n = static_cast<int>(s.atoms.numbers.size());
  // Rank 0 labels; the labels go to every rank.
  const LabelBox box{domain->xprd, domain->yprd, domain->zprd, domain->xy, domain->xz, domain->yz, atom->ntypes};
  on_rank_zero("the reference pair style failed", [&] {
    const std::string failure = labeller_.label(s, box, type_z_);
    if (!failure.empty()) throw std::runtime_error(failure);
  });
  ReferenceLabeller::broadcast(s.labels, n, world);
  ++frames_collected_;
  last_label_step_ = update->ntimestep;
  stats_[REFERENCE_CALLS] = static_cast<double>(frames_collected_);
  try {
    add_sample(s, holdout_every_ > 0 && frames_collected_ % holdout_every_ == 0);
    if (!frames_file_.empty() && comm->me == 0) uma::write_training_data(frames_file_, {s}, frames_collected_ > 1);
  } catch (const std::exception &e) {
    error->all(FLERR, "Fix uma/train: frame at step {}: {}", update->ntimestep, e.what());
  }
}

void FixUMATrain::add_sample(const uma::Sample &s, bool held_out) {
  const int64_t id = trainer_->add_sample(s);
  if (held_out) {
    held_ids_.push_back(id);
  } else {
    train_ids_.push_back(id);
    train_atoms_.push_back(static_cast<int64_t>(s.atoms.numbers.size()));
  }
}

void FixUMATrain::train() {
  if (train_ids_.empty()) return;
  std::string failure;
  for (int k = 0; k < steps_per_call_ && failure.empty(); ++k) {
    auto picks = sampler_->next(train_atoms_);
    if (picks.empty()) {
      failure = fmt::format("no frame has at most max_atoms {} atoms; raise max_atoms", max_atoms_);
      break;
    }
    std::vector<int64_t> batch;
    for (int64_t p : picks) batch.push_back(train_ids_[p]);
    const long long reads0 = uma::host_read_count(), uploads0 = uma::upload_count();
    try {
      trainer_->step(batch);
    } catch (const std::exception &e) {
      failure = std::string("training step failed: ") + e.what();
    }
    step_reads_ += uma::host_read_count() - reads0;
    step_uploads_ += uma::upload_count() - uploads0;
    ++steps_counted_;
  }
  if (!failure.empty()) error->all(FLERR, "Fix uma/train: {}", failure);
  push_weights();
  ++calls_;
  if (calls_ % print_every_ == 0) print_stats();
}

void FixUMATrain::push_weights() {
  pair_->set_weights([&](uma::UmaModel &m) { trainer_->copy_weights(m, use_average_); });
}

void FixUMATrain::print_stats() {
  const auto s = trainer_->read_stats();
  stats_[LOSS] = s.loss;
  stats_[ENERGY_MAE] = s.energy_mae;
  stats_[FORCES_MAE] = s.forces_mae;
  stats_[STRESS_MAE] = s.stress_mae;
  stats_[GRAD_NORM] = s.grad_norm;
  stats_[LR] = s.lr;
  stats_[STEPS] = static_cast<double>(trainer_->steps());
  stats_[FRAMES] = static_cast<double>(trainer_->num_samples());
  stats_[SKIPPED] = static_cast<double>(s.skipped);
  stats_[HELD_ENERGY_MAE] = stats_[HELD_FORCES_MAE] = stats_[RANK_CORRELATION] = std::nan("");
  // Host transfers of this rank's optimizer steps (training itself reads
  // nothing; on several GPU ranks the gradient reduction reads and uploads once).
  const double counted = static_cast<double>(std::max<long long>(steps_counted_, 1));
  const double reads_per_step = static_cast<double>(step_reads_) / counted;
  const double uploads_per_step = static_cast<double>(step_uploads_) / counted;
  stats_[READS_PER_STEP] = reads_per_step;
  const long long counted_steps = steps_counted_;
  step_reads_ = step_uploads_ = steps_counted_ = 0;
  if (!held_ids_.empty()) {
    double held[2] = {0, 0};
    if (comm->me == 0) {
      const auto e = trainer_->errors(held_ids_, use_average_);
      held[0] = e.energy;
      held[1] = e.forces;
    }
    MPI_Bcast(held, 2, MPI_DOUBLE, 0, world);
    stats_[HELD_ENERGY_MAE] = held[0];
    stats_[HELD_FORCES_MAE] = held[1];
    if (committee_ > 0) stats_[RANK_CORRELATION] = held_out_calibration();
  }
  if (comm->me == 0) {
    utils::logmesg(lmp, "fix uma/train: step {} optimizer step {} frames {} loss {:.10g} MAE energy {:.5g} eV/atom "
                        "forces {:.5g} eV/A stress {:.5g} eV/A^3 grad_norm {:.4g} lr {:.4g}\n",
                   update->ntimestep, trainer_->steps(), trainer_->num_samples(), s.loss, s.energy_mae,
                   s.forces_mae, s.stress_mae, s.grad_norm, s.lr);
    utils::logmesg(lmp, "fix uma/train: {:.3g} host reads and {:.3g} uploads per optimizer step ({} steps since "
                        "the last print)\n", reads_per_step, uploads_per_step, counted_steps);
    if (!held_ids_.empty())
      utils::logmesg(lmp, "fix uma/train: held-out ({} frames) MAE energy {:.5g} eV/atom forces {:.5g} eV/A\n",
                     held_ids_.size(), stats_[HELD_ENERGY_MAE], stats_[HELD_FORCES_MAE]);
    if (committee_ > 0) {
      utils::logmesg(lmp, "fix uma/train: uncertainty {:.4g} eV/atom (max over atoms; mean {:.4g}) at the latest of "
                          "{} checks since the last print; {} reference calls in all{}; committee loss {:.4g}\n",
                     uncertainty_[0], uncertainty_[1], checks_, frames_collected_,
                     label_auto_ ? fmt::format(", {} by the gate since the last print", gated_labels_) : std::string(),
                     s.committee_loss);
      if (std::isfinite(stats_[RANK_CORRELATION]))
        utils::logmesg(lmp, "fix uma/train: held-out rank correlation of uncertainty and force MAE {:.3f} "
                            "({} frames)\n", stats_[RANK_CORRELATION], held_ids_.size());
    }
    if (s.skipped > 0)
      utils::logmesg(lmp, "fix uma/train: WARNING: {} optimizer step(s) skipped so far (non-finite loss or "
                          "gradient); the weights were left unchanged by them\n", s.skipped);
  }
  checks_ = gated_labels_ = 0;
}

double FixUMATrain::held_out_calibration() {
  // Rank 0: per held-out frame the estimate and the true force MAE; their
  // rank correlation goes to every rank.
  double rho = std::nan("");
  if (comm->me == 0) {
    std::vector<double> u_max, u_mean, force_mae, energy_mae;
    try {
      for (int64_t id : held_ids_) {
        const auto u = trainer_->uncertainty(trainer_->sample(id));
        const auto e = trainer_->errors({id}, use_average_);
        u_max.push_back(u.max);
        u_mean.push_back(u.mean);
        force_mae.push_back(e.forces);
        energy_mae.push_back(e.energy);
      }
    } catch (const std::exception &e) {
      error->one(FLERR, "Fix uma/train: uncertainty on the held-out frames: {}", e.what());
    }
    rho = uma::train::rank_correlation(u_max, force_mae);
    if (!calibration_file_.empty()) {
      FILE *fp = fopen(calibration_file_.c_str(), calibration_written_ ? "a" : "w");
      if (!fp) error->one(FLERR, "Fix uma/train: cannot write calibration file {}: {}", calibration_file_, utils::getsyserror());
      if (!calibration_written_)
        utils::print(fp, "# step frame atoms uncertainty_max_eV uncertainty_mean_eV force_mae_eV_A energy_mae_eV_atom\n");
      for (size_t k = 0; k < held_ids_.size(); ++k)
        utils::print(fp, "{} {} {} {:.10g} {:.10g} {:.10g} {:.10g}\n", update->ntimestep, k,
                   trainer_->sample(held_ids_[k]).atoms.numbers.size(), u_max[k], u_mean[k], force_mae[k],
                   energy_mae[k]);
      fclose(fp);
      calibration_written_ = true;
    }
  }
  MPI_Bcast(&rho, 1, MPI_DOUBLE, 0, world);
  return rho;
}

void FixUMATrain::write_checkpoint() {
  const auto mine = static_cast<unsigned long long>(trainer_->weights_hash());
  unsigned long long low = 0, high = 0;
  MPI_Allreduce(&mine, &low, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, world);
  MPI_Allreduce(&mine, &high, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, world);
  if (low != high) error->all(FLERR, "Fix uma/train: the ranks hold different weights at step {}", update->ntimestep);
  on_rank_zero("cannot write checkpoint", [&] { trainer_->save_model(checkpoint_file_, use_average_); });
  if (comm->me == 0)
    utils::logmesg(lmp, "fix uma/train: checkpoint {} at step {} ({} weights, identical on {} rank(s), hash {:016x})\n",
                   checkpoint_file_, update->ntimestep, use_average_ ? "averaged" : "raw", comm->nprocs, mine);
}

double FixUMATrain::compute_vector(int i) { return stats_[i]; }

void FixUMATrain::on_rank_zero(const std::string &what, const std::function<void()> &work) {
  std::string mine;
  if (comm->me == 0) {
    try {
      work();
    } catch (const std::exception &e) {
      mine = e.what();
      if (mine.empty()) mine = "failed";
    }
  }
  const std::string failure = first_failure(world, mine);
  if (!failure.empty()) error->all(FLERR, "Fix uma/train: {}: {}", what, failure);
}

void FixUMATrain::write_restart(FILE *fp) {
  // Called on rank 0: the optimizer state goes to its own file.
  try {
    trainer_->save_state(state_file_);
  } catch (const std::exception &e) {
    error->one(FLERR, "Fix uma/train: cannot write the optimizer state for the restart: {}", e.what());
  }
  Resumed now;
  now.steps = static_cast<double>(trainer_->steps());
  now.epoch = static_cast<double>(sampler_->epoch());
  now.position = static_cast<double>(sampler_->position());
  now.calls = static_cast<double>(calls_);
  now.frames = static_cast<double>(frames_collected_);
  now.last_label_step = static_cast<double>(last_label_step_);
  now.planned_samples = static_cast<double>(sampler_->planned_samples());
  double list[1 + kRestartFieldCount] = {kRestartFormat};
  for (int k = 0; k < kRestartFieldCount; ++k) list[1 + k] = now.*kRestartFields[k];
  int size = sizeof(list);
  fwrite(&size, sizeof(int), 1, fp);
  fwrite(list, sizeof(list), 1, fp);
}

void FixUMATrain::restart(char *buf) {
  // Format -2: the fields after the marker; older files: the first four of them.
  double first = 0;
  std::memcpy(&first, buf, sizeof(double));
  const bool marked = first == kRestartFormat;
  const char *values = marked ? buf + sizeof(double) : buf;
  resumed_ = Resumed();
  for (int k = 0; k < (marked ? kRestartFieldCount : kOldRestartFieldCount); ++k)
    std::memcpy(&(resumed_.*kRestartFields[k]), values + k * sizeof(double), sizeof(double));
  restarted_ = true;
}
