#include "train_settings.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "error.h"
#include "universe.h"
#include "utils.h"

#include "api/uma.h"

using namespace LAMMPS_NS;

namespace {

// The fix's own keywords; the training options (lr, ema, committee, ...) come
// from uma::train's option table, shared with `uma train`.
bool is_fix_keyword(const std::string &w) {
  static const char *words[] = {
      "data",    "label",   "reference",    "task",         "max_atoms",    "steps",
      "use",     "shuffle", "write_frames", "checkpoint",   "print",        "state",
      "holdout", "check",   "min_interval", "max_interval", "holdout_data", "calibration"};
  return std::find_if(std::begin(words), std::end(words), [&](const char *k) { return w == k; }) !=
         std::end(words);
}

bool is_table_option(const std::string &w) {
  const auto &specs = uma::train::train_option_specs();
  return std::any_of(specs.begin(), specs.end(), [&](const auto &s) { return s.name == w; });
}

}  // namespace

FixTrainSettings LAMMPS_NS::parse_fix_train(LAMMPS *lmp, const std::string &fix_id, int narg,
                                            char **arg) {
  if (narg < 4) utils::missing_cmd_args(FLERR, "fix uma/train", lmp->error);
  // Under -partition each replica (NEB, PIMD, tempering) would train its own
  // copy of the model: the replicas would no longer share one potential.
  if (lmp->universe->nworlds > 1)
    lmp->error->all(
        FLERR,
        "Fix uma/train cannot run under -partition ({} partitions): each replica "
        "would train its own copy of the model and the replicas would no longer share one "
        "potential; train without partitions, then run the replicas with the trained model "
        "file",
        lmp->universe->nworlds);
  FixTrainSettings s;
  s.train_every = utils::inumeric(FLERR, arg[3], false, lmp);
  if (s.train_every < 1)
    lmp->error->all(FLERR, "Fix uma/train: N (train every N steps) must be >= 1, got {}",
                    s.train_every);
  auto &o = s.options;
  s.state_file = fix_id + ".uma-train.state";
  auto need = [&](int i, int n, const char *what) {
    if (i + n >= narg)
      utils::missing_cmd_args(FLERR, std::string("fix uma/train ") + what, lmp->error);
  };
  // Counts and intervals are integers (utils::inumeric refuses "0.5" or "1e10"
  // beyond int's range); a count of 0 would divide by zero later.
  auto at_least = [&](int i, const char *key, int least) {
    const int v = utils::inumeric(FLERR, arg[i], false, lmp);
    if (v < least)
      lmp->error->all(FLERR, "Fix uma/train: {} must be an integer >= {}, got {}", key, least,
                      arg[i]);
    return v;
  };
  bool committee_given = false;
  std::string &reference_style = s.reference_style;
  std::vector<std::string> &reference_args = s.reference_args, &coeff_args = s.coeff_args;
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
        lmp->error->all(FLERR,
                        "Fix uma/train: reference needs 'coeff ARGS' after the style, e.g. "
                        "'reference eam coeff 1 1 Cu_u3.eam'");
      for (++j; j < narg; ++j) coeff_args.emplace_back(arg[j]);
      if (coeff_args.empty())
        lmp->error->all(FLERR, "Fix uma/train: reference coeff needs arguments");
      i = narg;
      continue;
    }
    if (!is_fix_keyword(key) && !is_table_option(key))
      lmp->error->all(FLERR, "Fix uma/train: unknown keyword '{}'", key);
    if (key == "checkpoint") {
      need(i, 2, "checkpoint");
      s.checkpoint_file = arg[i + 1];
      s.checkpoint_every = utils::inumeric(FLERR, arg[i + 2], false, lmp);
      if (s.checkpoint_every < 1)
        lmp->error->all(FLERR, "Fix uma/train: checkpoint interval must be >= 1");
      i += 3;
      continue;
    }
    need(i, 1, key.c_str());
    const std::string value = arg[i + 1];
    if (key == "data")
      s.data_files.push_back(value);
    else if (key == "label" && value == "auto") {
      // label auto THRESHOLD: the uncertainty gate
      need(i, 2, "label auto");
      s.label_auto = true;
      s.label_every = 0;
      s.threshold = utils::numeric(FLERR, arg[i + 2], false, lmp);
      if (!(s.threshold > 0))
        lmp->error->all(FLERR, "Fix uma/train: label auto THRESHOLD must be > 0 eV, got {}",
                        arg[i + 2]);
      i += 3;
      continue;
    } else if (key == "label") {
      s.label_every = utils::inumeric(FLERR, arg[i + 1], false, lmp);
      if (s.label_every < 0) lmp->error->all(FLERR, "Fix uma/train: label interval must be >= 0");
      s.label_auto = false;
    } else if (is_table_option(key)) {
      try {
        uma::train::set_train_option(o, key, value);
      } catch (const std::exception &e) {
        lmp->error->all(FLERR, "Fix uma/train: {}", e.what());
      }
      if (key == "committee") committee_given = true;
    } else if (key == "check")
      s.check_every = at_least(i + 1, "check", 1);
    else if (key == "min_interval")
      s.min_interval = at_least(i + 1, "min_interval", 0);
    else if (key == "max_interval")
      s.max_interval = at_least(i + 1, "max_interval", 0);
    else if (key == "holdout_data")
      s.holdout_files.push_back(value);
    else if (key == "calibration")
      s.calibration_file = value;
    else if (key == "task")
      s.task = value;
    else if (key == "max_atoms") {
      s.max_atoms = utils::bnumeric(FLERR, arg[i + 1], false, lmp);
      if (s.max_atoms < 1)
        lmp->error->all(FLERR, "Fix uma/train: max_atoms must be an integer >= 1, got {}", value);
    }
    else if (key == "steps")
      s.steps_per_call = at_least(i + 1, "steps", 1);
    else if (key == "use") {
      if (value != "ema" && value != "raw")
        lmp->error->all(FLERR, "Fix uma/train: use must be 'ema' or 'raw', got '{}'", value);
      s.use_average = value == "ema";
    } else if (key == "shuffle")
      s.shuffle = utils::logical(FLERR, value, false, lmp) == 1;
    else if (key == "write_frames")
      s.frames_file = value;
    else if (key == "print")
      s.print_every = at_least(i + 1, "print", 1);
    else if (key == "state") {
      s.state_file = value;
      s.state_given = true;
    }
    else if (key == "holdout") {
      s.holdout_every = utils::inumeric(FLERR, value, false, lmp);
      if (s.holdout_every < 0 || s.holdout_every == 1)
        lmp->error->all(FLERR,
                        "Fix uma/train: holdout K keeps every K-th labelled frame out of training; "
                        "K must be 0 or >= 2");
    }
    i += 2;
  }
  if (s.use_average && o.optimizer.ema_decay == 0)
    lmp->error->all(FLERR, "Fix uma/train: 'use ema' needs an ema decay > 0");
  if (s.label_every > 0 && reference_style.empty())
    lmp->error->all(
        FLERR,
        "Fix uma/train: label {} needs a reference pair style ('reference STYLE ... coeff ...')",
        s.label_every);
  if (s.label_auto && reference_style.empty())
    lmp->error->all(
        FLERR,
        "Fix uma/train: label auto needs a reference pair style ('reference STYLE ... coeff ...')");
  if (s.label_every == 0 && !s.label_auto && s.data_files.empty())
    lmp->error->all(
        FLERR,
        "Fix uma/train: nothing to train on; give 'data FILE' and/or 'label M reference ...'");
  s.committee = committee_given ? static_cast<int>(o.committee_members)
                : s.label_auto  ? 4
                                : 0;  // the gate's default
  if (s.label_auto && s.committee == 0)
    lmp->error->all(
        FLERR, "Fix uma/train: label auto needs a committee (committee K with K >= 2; default 4)");
  if (!s.label_auto && (s.min_interval > 0 || s.max_interval > 0))
    lmp->error->all(
        FLERR, "Fix uma/train: min_interval and max_interval apply to 'label auto THRESHOLD' only");
  if (s.max_interval > 0 && s.max_interval % s.check_every != 0)
    lmp->error->all(FLERR,
                    "Fix uma/train: max_interval {} must be a multiple of check {} (labels are "
                    "decided on check "
                    "steps)",
                    s.max_interval, s.check_every);
  if (s.max_interval > 0 && s.max_interval < s.min_interval)
    lmp->error->all(FLERR, "Fix uma/train: max_interval {} is below min_interval {}",
                    s.max_interval, s.min_interval);
  if (!s.calibration_file.empty() && s.committee == 0)
    lmp->error->all(
        FLERR, "Fix uma/train: calibration FILE needs a committee (committee K, or label auto)");
  o.committee_members = s.committee;
  return s;
}
