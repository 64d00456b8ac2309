#include "io/training_data.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/uma_error.h"
#include "io/extxyz.h"
#include "runtime/transfers.h"

namespace uma {
namespace {

std::vector<double> numbers(const std::string& text, const std::string& where,
                            const std::string& key) {
  return parse_numbers(text, where + ": label '" + key + "'");
}

int64_t integer(const std::string& text, const std::string& where, const std::string& key) {
  return parse_integer(text, where + ": label '" + key + "'");
}

// The frame's info label `key`, or null.
const std::string* label(const Frame& f, const std::string& key) {
  auto it = f.info.find(key);
  return it == f.info.end() ? nullptr : &it->second;
}

}  // namespace

Atoms frame_atoms(const Frame& f) {
  Atoms a;
  a.numbers = f.numbers;
  const auto n = static_cast<int64_t>(f.numbers.size());
  a.positions = torch::tensor(f.positions, torch::kFloat64).view({n, 3});  // host data
  a.cell = f.cell;
  a.pbc = f.pbc;
  return a;
}

Atoms frame_system(const Frame& f, const std::string& where, const SystemInputs& given) {
  Atoms a = frame_atoms(f);
  auto info = [&](const std::string& key) { return label(f, key); };
  if (!given.task.empty())
    a.task = given.task;
  else
    a.task = info("task") ? *info("task") : given.default_task;
  if (given.charge)
    a.charge = *given.charge;
  else if (info("charge"))
    a.charge = integer(*info("charge"), where, "charge");
  if (given.spin)
    a.spin = *given.spin;
  else
    a.spin = info("spin") ? integer(*info("spin"), where, "spin") : default_spin(a.task);
  try {
    validate_given_charge_spin(a.task, a.charge, a.spin);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  return a;
}

void require_labels(const std::vector<Sample>& samples, const std::string& path) {
  if (std::none_of(samples.begin(), samples.end(), [](const Sample& s) { return s.labels.any(); }))
    throw Error(path + ": no frame carries a label (energy, forces or stress) to train on or test "
                       "against");
}

std::vector<Sample> read_training_data(const std::string& path, const std::string& default_task) {
  std::vector<Sample> samples;
  const auto frames = read_extxyz(path);
  for (size_t k = 0; k < frames.size(); ++k) {
    const Frame& f = frames[k];
    const std::string where = path + ", frame " + std::to_string(k);
    Sample s;
    SystemInputs given;
    given.default_task = default_task;
    s.atoms = frame_system(f, where, given);
    if (s.atoms.task.empty()) throw Error(where + ": no 'task' label and no default task");
    auto info = [&](const std::string& key) { return label(f, key); };

    if (const auto* e = info("energy")) {
      const auto v = numbers(*e, where, "energy");
      if (v.size() != 1) throw Error(where + ": label 'energy' must be one number");
      s.labels.energy = v[0];
      s.labels.has_energy = true;
    }
    if (auto it = f.arrays.find("forces"); it != f.arrays.end()) {
      if (f.array_width.at("forces") != 3)
        throw Error(where + ": column 'forces' must have 3 components per atom, has " +
                    std::to_string(f.array_width.at("forces")));
      s.labels.forces = it->second;
      s.labels.has_forces = true;
    }
    if (const auto* st = info("stress")) {
      const auto v = numbers(*st, where, "stress");
      auto& S = s.labels.stress;
      if (v.size() == 9) {
        for (int i = 0; i < 9; ++i) S[i] = v[i];
      } else if (v.size() == 6) {  // Voigt xx yy zz yz xz xy
        S = {v[0], v[5], v[4], v[5], v[1], v[3], v[4], v[3], v[2]};
      } else {
        throw Error(where + ": label 'stress' needs 9 or 6 (Voigt) numbers, has " +
                    std::to_string(v.size()));
      }
      s.labels.has_stress = true;
    }
    samples.push_back(std::move(s));
  }
  return samples;
}

void write_training_data(const std::string& path, const std::vector<Sample>& samples, bool append) {
  std::vector<Frame> frames;
  for (const auto& s : samples) {
    Frame f;
    f.numbers = s.atoms.numbers;
    auto pos = to_host(s.atoms.positions).to(torch::kFloat64);
    f.positions.assign(pos.data_ptr<double>(), pos.data_ptr<double>() + pos.numel());  // host data
    f.cell = s.atoms.cell;
    f.pbc = s.atoms.pbc;
    f.has_cell = true;
    auto text = [](const auto& values) {
      std::ostringstream out;
      out.precision(17);
      for (size_t i = 0; i < values.size(); ++i) out << (i ? " " : "") << values[i];
      return out.str();
    };
    f.info["task"] = s.atoms.task;
    f.info["charge"] = std::to_string(s.atoms.charge);
    f.info["spin"] = std::to_string(s.atoms.spin);
    if (s.labels.has_energy) f.info["energy"] = text(std::vector<double>{s.labels.energy});
    if (s.labels.has_stress) f.info["stress"] = text(s.labels.stress);
    if (s.labels.has_forces) {
      f.arrays["forces"] = s.labels.forces;
      f.array_width["forces"] = 3;
    }
    frames.push_back(std::move(f));
  }
  write_extxyz(path, frames, append);
}

}  // namespace uma
