// The training options a user sets by name, in one table that fix uma/train
// (KEYWORD VALUE) and `uma train` (--KEYWORD VALUE, with '-' for '_') both
// read: their names, defaults, checks and help cannot drift apart.
#pragma once

#include <string>
#include <vector>

#include "train/trainer.h"

namespace uma::train {

struct TrainOptionSpec {
  std::string name;  // e.g. "lr", "forces_coef"
  std::string help;  // one line: what it sets and which values it takes
};

// Every option of the table, in the order the documentation lists them.
const std::vector<TrainOptionSpec>& train_option_specs();

// Sets option `name` of `o` from the text `value` after checking it; throws
// uma::Error naming the option and the values it takes when `value` is not
// one of them.  Returns false (and changes nothing) when no option has this name.
bool set_train_option(TrainOptions& o, const std::string& name, const std::string& value);

// The value of option `name` in `o` as text (for help lines: the defaults).
std::string train_option_value(const TrainOptions& o, const std::string& name);

}  // namespace uma::train
