#include "engine/step_plan.h"

#include <algorithm>
#include <numeric>

#include "core/elements.h"
#include "runtime/transfers.h"
#include "core/uma_error.h"

namespace uma {
namespace {

int64_t dataset_index(const ModelConfig& config, const std::string& task) {
  const auto names = config.dataset_names();
  return std::find(names.begin(), names.end(), task) - names.begin();
}

// One system's share of the plan, as the host knows it.
struct SystemLayout {
  int64_t n = 0;                 // rows the model runs on (an empty piece: one placeholder)
  int64_t owned = 0;             // rows that own energy
  std::vector<int64_t> numbers;  // host atomic numbers (empty: on the device)
  std::vector<int64_t> counts;   // the whole system's composition, [Z]
  int64_t total = 0;             // atoms in the whole system
};

SystemLayout system_layout(const Atoms& a, int64_t Z) {
  SystemLayout s;
  s.n = std::max<int64_t>(1, atom_count(a));
  s.owned = a.piece.defined() ? a.piece.n_owned : s.n;
  if (!a.on_device.defined()) s.numbers = a.numbers.empty() ? std::vector<int64_t>{1} : a.numbers;
  if (a.piece.defined()) {
    s.counts = a.piece.composition;
  } else if (a.on_device.defined()) {
    // One counted read: the composition, which the expert merge is keyed on.
    const auto host = to_host(count_atomic_numbers(a.on_device.numbers, Z));
    const int64_t* c = host.data_ptr<int64_t>();  // host data
    if (c[Z] > 0 || c[0] > 0)
      throw Error("atomic numbers on the device must lie in 1.." + std::to_string(Z - 1));
    s.counts.assign(c, c + Z);
  } else {
    s.counts.assign(Z, 0);
    for (int64_t z : s.numbers) ++s.counts[z];
  }
  s.counts.resize(Z, 0);
  s.total = std::accumulate(s.counts.begin(), s.counts.end(), int64_t{0});
  return s;
}

}  // namespace

std::vector<int64_t> plan_key(const std::vector<Atoms>& systems, const ModelConfig& config) {
  std::vector<int64_t> key{static_cast<int64_t>(systems.size())};
  for (const Atoms& a : systems) {
    key.insert(key.end(), {atom_count(a), a.charge, a.spin, dataset_index(config, a.task), a.pbc[0],
                           a.pbc[1], a.pbc[2], a.piece.n_owned});
    if (a.on_device.defined())
      key.insert(key.end(), {-2, a.on_device.layout_id});
    else
      key.insert(key.end(), a.numbers.begin(), a.numbers.end());
    key.push_back(static_cast<int64_t>(a.piece.composition.size()));
    key.insert(key.end(), a.piece.composition.begin(), a.piece.composition.end());
  }
  return key;
}

std::shared_ptr<StepPlan> build_plan(const UmaModel& model, const std::vector<Atoms>& systems,
                                     std::vector<int64_t> key, const torch::Device& device,
                                     const StepPlan* previous, Normalisers normalisers) {
  const bool identity = normalisers == Normalisers::kIdentity;
  const auto& config = model->config();
  const int64_t Z = config.backbone.max_num_elements;
  const int64_t B = static_cast<int64_t>(systems.size());
  const bool on_device =
      systems[0].on_device.defined() && atom_count(systems[0]) > 0;  // validate(): B = 1
  auto plan = std::make_shared<StepPlan>();
  plan->key = std::move(key);
  plan->identity = identity;

  // The integers in one upload: [host numbers N | system of each atom N |
  // natoms B | charge B | spin B | pieces' compositions as atomic numbers].
  // The per-layout normalisers in another: [5 x B per system | per atom
  // (host numbers) or per element (device numbers)].
  std::vector<int64_t> numbers, batch, natoms, charge, spin, composition;
  std::vector<double> per_system(5 * B), per_atom;
  std::vector<std::vector<int64_t>> merge_keys;
  BatchTensors& in = plan->in;
  in.atom_offsets = {0};
  bool piece = false;
  for (int64_t b = 0; b < B; ++b) {
    const Atoms& a = systems[b];
    const SystemLayout s = system_layout(a, Z);
    const auto& out = model->outputs(a.task);
    const auto& refs = out.element_references;
    auto ref = [&](int64_t z) {
      return refs.defined() && !identity ? refs.accessor<double, 1>()[z] : 0.0;  // host data
    };
    const double energy_mean = identity ? 0.0 : out.energy_mean;
    numbers.insert(numbers.end(), s.numbers.begin(), s.numbers.end());
    batch.insert(batch.end(), s.n, b);
    natoms.push_back(s.total);
    charge.push_back(a.charge);
    spin.push_back(a.spin);
    if (a.piece.defined()) {
      piece = true;
      for (int64_t z = 0; z < Z; ++z) composition.insert(composition.end(), s.counts[z], z);
    }
    in.datasets.push_back(a.task);
    in.atom_offsets.push_back(in.atom_offsets.back() + s.n);
    // Each owned atom's energy shift: its element reference and its share of
    // the task's mean; the system's shift is their sum.
    double shift = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(s.numbers.size()); ++i) {
      const double v =
          i < s.owned ? ref(s.numbers[i]) + energy_mean / static_cast<double>(s.total) : 0.0;
      per_atom.push_back(v);
      shift += v;
    }
    if (on_device)
      for (int64_t z = 0; z < Z; ++z) per_atom.push_back(ref(z));
    per_system[b] = identity ? 1.0 : out.energy_rmsd;
    per_system[B + b] = shift;
    per_system[2 * B + b] = identity ? 1.0 : out.forces_rmsd;
    per_system[3 * B + b] = identity ? 1.0 : out.stress_rmsd;
    per_system[4 * B + b] = identity ? 0.0 : out.stress_mean;
    std::vector<int64_t> merge(s.counts);
    merge.insert(merge.end(), {a.charge, a.spin, dataset_index(config, a.task)});
    merge_keys.push_back(std::move(merge));
  }
  const int64_t N = in.atom_offsets.back();

  const auto lopts = torch::TensorOptions().dtype(torch::kLong).device(device);
  std::vector<int64_t> ints(numbers);
  ints.insert(ints.end(), batch.begin(), batch.end());
  for (const auto* part : {&natoms, &charge, &spin, &composition})
    ints.insert(ints.end(), part->begin(), part->end());
  if (on_device) ints.erase(ints.begin(), ints.begin() + N);  // the batch column too: a fill below
  const auto packed = upload(ints, lopts);
  int64_t at = 0;
  auto next = [&](int64_t n) {
    auto t = packed.narrow(0, at, n);
    at += n;
    return t;
  };
  if (on_device) {
    in.numbers = systems[0].on_device.numbers;
    in.batch = torch::zeros({N}, lopts);  // a fill, not an upload
  } else {
    in.numbers = next(N);
    in.batch = next(N);
  }
  in.natoms = next(B);
  in.charge = next(B);
  in.spin = next(B);
  if (piece) {  // validate(): a piece is evaluated alone
    const int64_t& owned = systems[0].piece.n_owned;
    in.owned = owned;
    plan->composition.numbers = next(static_cast<int64_t>(composition.size()));
    plan->composition.batch = torch::zeros({plan->composition.numbers.size(0)}, lopts);  // a fill
    plan->composition.natoms = in.natoms;
  } else {
    plan->composition = in;
  }

  std::vector<double> doubles(per_system);
  doubles.insert(doubles.end(), per_atom.begin(), per_atom.end());
  const auto scales =
      upload(doubles, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  plan->energy_scale = scales.narrow(0, 0, B);
  plan->energy_shift = scales.narrow(0, B, B);
  plan->force_scale = scales.narrow(0, 2 * B, B);
  plan->stress_scale = scales.narrow(0, 3 * B, B);
  plan->stress_shift = scales.narrow(0, 4 * B, B);
  const auto tail = scales.narrow(0, 5 * B, static_cast<int64_t>(per_atom.size()));
  if (on_device) {
    // Each atom's shift looked up on the device from its element's
    // reference (ghosts: none); the system's shift is their sum.
    const Atoms& a = systems[0];
    const double total = static_cast<double>(natoms[0]);
    auto shift = tail.index_select(0, in.numbers) +
                 (identity ? 0.0 : model->outputs(a.task).energy_mean) / total;
    const int64_t owned = a.piece.defined() ? a.piece.n_owned : N;
    if (owned < N) shift.narrow(0, owned, N - owned).zero_();
    plan->atom_shift = shift;
    plan->energy_shift = shift.sum().view({1});
  } else {
    plan->atom_shift = tail;
  }

  bool uniform = true;
  for (const auto& k : merge_keys) uniform &= k == merge_keys[0];
  if (uniform) plan->merge_key = merge_keys[0];
  if (previous && !plan->merge_key.empty() && previous->merge_key == plan->merge_key)
    plan->merged = previous->merged;
  if (previous) plan->sized = previous->sized;  // checked against the graph at every step
  return plan;
}

}  // namespace uma
