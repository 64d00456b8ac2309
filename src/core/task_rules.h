// The rules of the task (dataset head), total charge and spin multiplicity
// that every reader of a system applies: the engine, the extxyz training
// data, the command line and the LAMMPS styles.
#pragma once

#include <cstdint>
#include <string>

namespace uma {

// Whether a task reads the total charge and spin multiplicity (omol).
bool takes_charge_spin(const std::string& task);
// Default spin for a task: 1 (singlet) for the tasks that take spin, else 0.
int64_t default_spin(const std::string& task);
// Throws uma::Error if the charge or the spin multiplicity is outside the
// range the model's embeddings cover (-100..100, 0..100), or if a task that
// reads the spin (omol) is given 0, which is no multiplicity (the other
// tasks' fixed value).
void validate_charge_spin(const std::string& task, int64_t charge, int64_t spin);
// What a frame or a command line may give: validate_charge_spin, and no
// charge or spin other than the defaults (0, 0) for a task that does not read
// them; the engine itself evaluates any charge and spin in range.
void validate_given_charge_spin(const std::string& task, int64_t charge, int64_t spin);

}  // namespace uma
