#include "output_files.h"

#include <algorithm>
#include <filesystem>
#include <string>

#include "comm.h"
#include "error.h"
#include "platform.h"
#include "update.h"
#include "utils.h"

#include "api/uma.h"
#include "data_parallel.h"
#include "rank_zero.h"

using namespace LAMMPS_NS;

namespace {

// Whether two paths name the same file (both existing), however spelled.
bool same_file(const std::string &a, const std::string &b) {
  std::error_code ec;
  return !a.empty() && !b.empty() && std::filesystem::equivalent(a, b, ec);
}

}  // namespace

void LAMMPS_NS::check_output_files(LAMMPS *lmp, const FixTrainSettings &set) {
  train_on_rank_zero(lmp, "an output file", [&] {
    for (const auto *path : {&set.checkpoint_file, &set.calibration_file, &set.frames_file})
      if (!path->empty()) uma::check_output_path(*path);
  });
}

void LAMMPS_NS::check_run_files(LAMMPS *lmp, const FixTrainSettings &set, bool restarted,
                                const std::string &model_file) {
  if (lmp->comm->me == 0 && same_file(set.checkpoint_file, model_file))
    lmp->error->warning(FLERR,
                        "Fix uma/train: checkpoint {} is the model file pair_coeff read: the first "
                        "checkpoint overwrites its weights",
                        set.checkpoint_file);
  if (set.state_given && !restarted)
    train_on_rank_zero(lmp, "the state file", [&] { uma::check_output_path(set.state_file); });
  const auto &file = set.frames_file;
  if (file.empty() || restarted) return;
  for (const auto *files : {&set.data_files, &set.holdout_files})
    if (std::any_of(files->begin(), files->end(),
                    [&](const std::string &data) { return same_file(data, file); }))
      lmp->error->all(FLERR,
                      "Fix uma/train: write_frames {} is also a data file: the first labelled "
                      "frame would replace its frames; name another file (a restarted run "
                      "appends to it)",
                      file);
  if (lmp->comm->me == 0 && platform::file_is_readable(file))
    utils::logmesg(lmp, "fix uma/train: write_frames {} exists: this run replaces it\n", file);
}

void LAMMPS_NS::write_checkpoint_file(LAMMPS *lmp, uma::train::Trainer &trainer,
                                     const FixTrainSettings &set) {
  const auto hash = static_cast<unsigned long long>(trainer.weights_hash());
  if (!same_on_every_rank(hash, lmp->world))
    lmp->error->all(FLERR, "Fix uma/train: the ranks hold different weights at step {}",
                    lmp->update->ntimestep);
  train_on_rank_zero(lmp, "cannot write checkpoint",
                     [&] { trainer.save_model(set.checkpoint_file, set.use_average); });
  if (lmp->comm->me == 0)
    utils::logmesg(lmp,
                   "fix uma/train: checkpoint {} at step {} ({} weights, identical on {} "
                   "rank(s), hash {:016x})\n",
                   set.checkpoint_file, lmp->update->ntimestep,
                   set.use_average ? "averaged" : "raw", lmp->comm->nprocs, hash);
}
