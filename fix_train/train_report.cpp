#include "train_report.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "comm.h"
#include "update.h"
#include "utils.h"

#include "api/uma.h"

using namespace LAMMPS_NS;

void TrainReport::count_step(long long reads, long long uploads) {
  step_reads_ += reads;
  step_uploads_ += uploads;
  ++steps_counted_;
}

void TrainReport::print(const uma::train::TrainStats &s, const Context &c) {
  const double values[] = {s.loss,
                           s.energy_mae,
                           s.forces_mae,
                           s.stress_mae,
                           s.grad_norm,
                           s.lr,
                           static_cast<double>(c.optimizer_steps),
                           static_cast<double>(c.frames),
                           static_cast<double>(s.skipped)};
  std::copy(std::begin(values), std::end(values), stats_ + LOSS);
  // Host transfers of this rank's optimizer steps (training itself reads
  // nothing; on several GPU ranks the gradient reduction reads and uploads once).
  const long long counted = steps_counted_;
  const double reads_per_step = static_cast<double>(step_reads_) / std::max(counted, 1LL);
  const double uploads_per_step = static_cast<double>(step_uploads_) / std::max(counted, 1LL);
  stats_[READS_PER_STEP] = reads_per_step;
  step_reads_ = step_uploads_ = steps_counted_ = 0;
  if (comm->me != 0) return;
  utils::logmesg(
      lmp,
      "fix uma/train: step {} optimizer step {} frames {} loss {:.10g} MAE energy {:.5g} eV/atom "
      "forces {:.5g} eV/A stress {:.5g} eV/A^3 grad_norm {:.4g} lr {:.4g}\n",
      update->ntimestep, c.optimizer_steps, c.frames, s.loss, s.energy_mae, s.forces_mae,
      s.stress_mae, s.grad_norm, s.lr);
  utils::logmesg(
      lmp,
      "fix uma/train: {:.3g} host reads and {:.3g} uploads per optimizer step ({} steps since "
      "the last print)\n",
      reads_per_step, uploads_per_step, counted);
  if (c.held_frames > 0)
    utils::logmesg(
        lmp, "fix uma/train: held-out ({} frames) MAE energy {:.5g} eV/atom forces {:.5g} eV/A\n",
        c.held_frames, stats_[HELD_ENERGY_MAE], stats_[HELD_FORCES_MAE]);
  if (c.committee) {
    utils::logmesg(
        lmp,
        "fix uma/train: uncertainty {:.4g} eV/atom (max over atoms; mean {:.4g}) at the latest of "
        "{} checks since the last print; {} reference calls in all{}; committee loss {:.4g}\n",
        c.gate.max, c.gate.mean, c.gate.checks, c.reference_calls,
        c.label_auto ? fmt::format(", {} by the gate since the last print", c.gate.gated)
                     : std::string(),
        s.committee_loss);
    if (std::isfinite(stats_[RANK_CORRELATION]))
      utils::logmesg(lmp,
                     "fix uma/train: held-out rank correlation of uncertainty and force MAE {:.3f} "
                     "({} frames)\n",
                     stats_[RANK_CORRELATION], c.held_frames);
  }
  if (s.skipped > 0)
    utils::logmesg(
        lmp,
        "fix uma/train: WARNING: {} optimizer step(s) skipped so far (non-finite loss or "
        "gradient); the weights were left unchanged by them\n",
        s.skipped);
}

void TrainReport::log_setup(const FixTrainSettings &s, const std::string &model,
                            const std::string &task) {
  if (comm->me != 0) return;
  utils::logmesg(
      lmp,
      "fix uma/train: training {} on {} rank(s), task {}, every {} steps, {} optimizer step(s) "
      "of at most {} atoms per rank, lr {}, EMA {}, pair style uses the {} weights\n",
      model, comm->nprocs, task, s.train_every, s.steps_per_call, s.max_atoms,
      s.options.optimizer.lr, s.options.optimizer.ema_decay, s.use_average ? "averaged" : "raw");
  if (s.committee > 0)
    utils::logmesg(
        lmp, "fix uma/train: uncertainty committee of {} heads, checked every {} steps{}\n",
        s.committee, s.check_every,
        s.label_auto
            ? fmt::format("; label when it exceeds {} eV (max over atoms), at most every {} and "
                          "at least every {} steps",
                          s.threshold, std::max(s.min_interval, s.check_every),
                          s.max_interval > 0 ? std::to_string(s.max_interval) : "inf")
            : std::string());
}
