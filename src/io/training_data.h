// Labelled structures for training, read from extended XYZ (as ASE writes
// them): energy (info `energy`, eV), forces (per-atom column `forces`, eV/A),
// stress (info `stress`, 9 values or ASE's 6-value Voigt xx yy zz yz xz xy,
// eV/A^3 with ASE's sign, +(1/V) dE/d strain), and the system inputs task,
// charge and spin.  A missing label is allowed: its mask is false and the
// loss skips it.  A label of the wrong shape is an error.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/atoms.h"
#include "core/task_rules.h"
#include "io/extxyz.h"

namespace uma {

struct Labels {
  bool any() const { return has_energy || has_forces || has_stress; }
  bool has_energy = false, has_forces = false, has_stress = false;
  double energy = 0.0;             // eV
  std::vector<double> forces;      // [N * 3] eV/A (empty without forces)
  std::array<double, 9> stress{};  // row-major 3x3, eV/A^3
};

struct Sample {
  Atoms atoms;
  Labels labels;
};

// A frame's atoms: numbers, positions (host, float64), cell and
// periodicity; task, charge and spin are the caller's (labels or options).
Atoms frame_atoms(const Frame& f);

// What a caller gives of a frame's task, charge and spin, over the frame's
// own labels: each set one replaces the frame's label; `default_task` is the
// task where neither gives one.
struct SystemInputs {
  std::string task, default_task;
  std::optional<int64_t> charge, spin;
};

// frame_atoms with the task, charge and spin that `given` and the frame's
// labels 'task', 'charge' and 'spin' say (charge 0 and the task's spin where
// neither does), checked by validate_given_charge_spin.  The task may come
// out empty: the caller says what was missing.  Throws uma::Error naming
// `where` (the file and frame) on a malformed label or a charge or spin the
// task refuses.
Atoms frame_system(const Frame& f, const std::string& where, const SystemInputs& given = {});

// Reads every frame of `path` (frame_system, with `default_task`).  Throws
// uma::Error naming the file and frame on a malformed label or a frame
// without a task.
std::vector<Sample> read_training_data(const std::string& path,
                                       const std::string& default_task = "");

// Throws uma::Error when no sample of `path` carries a label (energy, forces
// or stress): a file that can neither train nor be scored.
void require_labels(const std::vector<Sample>& samples, const std::string& path);

// Writes samples as extended XYZ that read_training_data reads back (stress
// as 9 numbers); appends when `append`.  Throws uma::Error when the path
// cannot be written.
void write_training_data(const std::string& path, const std::vector<Sample>& samples,
                         bool append = false);

}  // namespace uma
