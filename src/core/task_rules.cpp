#include "core/task_rules.h"

#include "core/uma_error.h"

namespace uma {

bool takes_charge_spin(const std::string& task) { return task == "omol"; }

int64_t default_spin(const std::string& task) { return takes_charge_spin(task) ? 1 : 0; }

void validate_charge_spin(const std::string& task, int64_t charge, int64_t spin) {
  if (charge < -100 || charge > 100)
    throw Error("charge " + std::to_string(charge) + " is outside -100..100");
  if (spin < 0 || spin > 100)
    throw Error("spin multiplicity " + std::to_string(spin) + " is outside 0..100");
  if (spin == 0 && takes_charge_spin(task))
    throw Error("task '" + task +
                "' needs a spin multiplicity 2S+1 >= 1 (1 singlet, 2 doublet, 3 triplet, ...), "
                "got 0");
}

void validate_given_charge_spin(const std::string& task, int64_t charge, int64_t spin) {
  validate_charge_spin(task, charge, spin);
  if (!takes_charge_spin(task) && (charge != 0 || spin != default_spin(task)))
    throw Error("task '" + task + "' takes no charge or spin input (only omol reads them), got charge " +
                std::to_string(charge) + " and spin " + std::to_string(spin));
}

}  // namespace uma
