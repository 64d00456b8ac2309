#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <new>
#include <numeric>

#include "runtime/device.h"
#include "engine/engine.h"
#include "engine/packed_read.h"
#include "core/uma_error.h"
#include "runtime/transfers.h"
#include "io/safetensors.h"
#include "train/step_phase.h"

namespace uma::train {
namespace {

bool has_property(const std::vector<LossTask>& tasks, Property property) {
  return std::any_of(tasks.begin(), tasks.end(),
                     [&](const LossTask& t) { return t.property == property; });
}

// Energy, force and stress MAEs from per-task error sums and counts (NaN where nothing was seen).
Trainer::Errors property_maes(const std::vector<LossTask>& tasks, const double* error_sums,
                              const double* counts) {
  double err[kPropertyCount] = {}, n[kPropertyCount] = {};
  for (size_t t = 0; t < tasks.size(); ++t) {
    const auto k = static_cast<int>(tasks[t].property);
    err[k] += error_sums[t];
    n[k] += counts[t];
  }
  auto mae = [&](int k) { return n[k] > 0 ? err[k] / n[k] : std::nan(""); };
  return {mae(static_cast<int>(Property::kEnergy)), mae(static_cast<int>(Property::kForces)),
          mae(static_cast<int>(Property::kStress))};
}

// What a failed step reports: an allocation failure also names the two ways
// to a smaller step.
std::string step_failure(const std::exception& e, int64_t recompute_chunk) {
  const std::string what = e.what();
  const bool memory = dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr ||
                      dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
                      what.find("not enough memory") != std::string::npos;
  if (!memory) return what;
  const std::string recompute =
      recompute_chunk > 0 ? "the edge work recomputed in smaller chunks (recompute below " +
                                std::to_string(recompute_chunk) + ")"
                          : "the edge work recomputed in chunks (recompute C, e.g. 1000)";
  return what + "\nThe training step ran out of memory: fewer atoms per batch (max_atoms) or " +
         recompute + " make it smaller.";
}

}  // namespace

Trainer::Trainer(UmaModel model, TrainOptions options)
    : model_(std::move(model)), options_(std::move(options)) {
  const char* fail = std::getenv("UMA_TEST_FAIL_TRAINING_STEP");
  fail_step_ = fail && std::string(fail) == "1";
  configure_cublas_workspace(options_.device);  // before any GEMM
  make_current(options_.device);                // before anything is allocated there
  model_->to(options_.device, options_.dtype);  // bulk transfer
  model_->train();
  std::vector<torch::Tensor> trainable;
  for (auto& p : model_->named_parameters()) {
    const bool train = options_.train_dataset_embeddings ||
                       p.key().find("dataset_embedding.dataset_emb_dict.") == std::string::npos;
    p.value().requires_grad_(train);
    trainable_.push_back(train);
    if (train) trainable.push_back(p.value());
  }
  EngineOptions engine;
  engine.device = options_.device;
  engine.dtype = options_.dtype;
  engine.training = true;
  engine.keep_host_memory = false;  // the process's allocator is the MD engine's choice
  engine.edge_ops = options_.edge_ops;
  engine.recompute_chunk = options_.recompute_chunk;  // 0: stored, > 0: chunks (as the engine's)
  engine_ = std::make_unique<Engine>(model_, engine);
  tasks_ = loss_tasks(model_, options_.loss);
  flat_ = std::make_unique<FlatParameters>(trainable);
  optimizer_ = std::make_unique<AdamW>(*flat_, options_.optimizer);
  const auto dopts = torch::TensorOptions().dtype(torch::kFloat64).device(options_.device);
  const auto T = static_cast<int64_t>(tasks_.size());
  loss_sum_ = torch::zeros({}, dopts);
  task_loss_sums_ = torch::zeros({T}, dopts);
  error_sums_ = torch::zeros({T}, dopts);
  error_counts_.assign(T, 0.0);
  overflows_ = torch::zeros({}, dopts);
  if (options_.committee_members > 0) {
    const auto& bb = model_->config().backbone;
    committee_ = Committee(options_.committee_members, bb.sphere_channels, bb.hidden_channels,
                           options_.seed);
    committee_->to(options_.device, options_.dtype);  // bulk transfer
    committee_flat_ = std::make_unique<FlatParameters>(committee_->parameters());
    OptimizerOptions copt = options_.optimizer;
    copt.ema_decay = 0;  // the estimate follows the raw weights the features come from
    committee_optimizer_ = std::make_unique<AdamW>(*committee_flat_, copt);
    committee_loss_ = torch::zeros({}, dopts);
    committee_loss_sum_ = torch::zeros({}, dopts);
  }
}

int64_t Trainer::add_sample(const Sample& sample) {
  validate_systems(model_, {sample.atoms});
  const auto n = static_cast<int64_t>(sample.atoms.numbers.size());
  if (sample.labels.has_forces && static_cast<int64_t>(sample.labels.forces.size()) != 3 * n)
    throw Error("forces label has " + std::to_string(sample.labels.forces.size()) +
                " numbers for " + std::to_string(n) + " atoms (expected " + std::to_string(3 * n) +
                ")");
  edges_.push_back(engine_->edge_counts({sample.atoms})[0]);
  Sample kept = sample;
  kept.atoms.positions = sample.atoms.positions.device().is_cpu()
                             ? sample.atoms.positions.to(torch::kFloat64).contiguous()
                             : to_host(sample.atoms.positions).to(torch::kFloat64);
  samples_.push_back(std::move(kept));
  return num_samples() - 1;
}

Predictions Trainer::predict(const std::vector<const Sample*>& samples,
                             const std::vector<int64_t>& capacities, bool create_graph) {
  StepPhase phase("uma::train::forward");
  std::vector<Atoms> systems;
  for (const Sample* s : samples) systems.push_back(s->atoms);
  const Evaluation ev = engine_->evaluate(
      systems, Request::training(capacities, create_graph, options_.routing_dropout,
                                 has_committee()));
  {
    // The capacities were measured on these positions: an overflow here
    // would be a truncated graph, so it is counted and refused at the next read.
    torch::NoGradGuard no_grad;
    for (size_t b = 0; b < capacities.size(); ++b)
      overflows_ += ev.edge_counts.narrow(0, static_cast<int64_t>(b), 1)
                        .gt(capacities[b])
                        .sum()
                        .to(torch::kFloat64);
  }
  Predictions pred;
  pred.energy = ev.energy;
  pred.forces = ev.forces;
  if (has_property(tasks_, Property::kStress))
    pred.stress = ev.stress.to(options_.dtype).reshape({-1, 9});
  if (ev.features.defined()) {
    pred.features = ev.features;
    pred.atom_energies = ev.atom_energy.detach();
  }
  pred.natoms = ev.natoms;
  pred.batch = ev.batch;
  return pred;
}

void Trainer::check_overflows(double count) const {
  if (count > 0)
    throw Error("internal: " + std::to_string(static_cast<int64_t>(count)) +
                " training evaluation(s) found more edges than their frame's measured count "
                "(the graph would have been truncated); no result of them was kept");
}

Trainer::Batch Trainer::prepare(const std::vector<int64_t>& indices) {
  if (indices.empty()) throw Error("internal: empty training batch");
  Batch b;
  for (int64_t i : indices) {
    b.samples.push_back(&samples_.at(i));
    b.capacities.push_back(std::max<int64_t>(edges_[i], 1));
  }
  // Equal edge blocks let every MoLE layer run as one batched GEMM.
  const int64_t widest = *std::max_element(b.capacities.begin(), b.capacities.end());
  const int64_t total = std::accumulate(b.capacities.begin(), b.capacities.end(), int64_t{0});
  if (b.capacities.size() > 1 &&
      widest * static_cast<double>(b.capacities.size()) <= (1.0 + options_.mole_padding) * total)
    std::fill(b.capacities.begin(), b.capacities.end(), widest);

  const auto fopts = torch::TensorOptions().dtype(options_.dtype).device(options_.device);
  b.targets = make_targets(tasks_, b.samples, fopts);
  for (const auto& t : b.targets) b.counts.push_back(static_cast<double>(t.count));
  for (const auto& t : b.targets) b.counts.push_back(static_cast<double>(t.metric_count));
  if (has_committee()) {
    const int64_t K = committee_->members(), B = static_cast<int64_t>(indices.size());
    b.committee_weights.resize(K * B);
    for (int64_t k = 0; k < K; ++k) {
      double total = 0;  // weighted atoms
      for (int64_t j = 0; j < B; ++j) {
        const double w = bootstrap_count(options_.seed, k, indices[j]);
        b.committee_weights[k * B + j] = w;
        total += w * static_cast<double>(b.samples[j]->atoms.numbers.size());
      }
      b.counts.push_back(total);
    }
  }
  return b;
}

torch::Tensor Trainer::committee_step_loss(const Predictions& pred, const Batch& b) {
  const int64_t K = committee_->members(), B = static_cast<int64_t>(b.samples.size());
  const auto dopts = torch::TensorOptions().dtype(torch::kFloat64).device(options_.device);
  // One upload: [K, B] bootstrap counts, then [K] inverse bootstrap totals.
  std::vector<double> packed(b.committee_weights);
  const size_t first = 2 * tasks_.size();
  for (int64_t k = 0; k < K; ++k)
    packed.push_back(b.counts[first + k] > 0 ? 1.0 / b.counts[first + k] : 0.0);
  const auto both = upload(packed, dopts);
  auto weights = both.narrow(0, 0, K * B).view({K, B}).index_select(1, pred.batch);  // [K, N]
  return committee_loss(committee_->forward(pred.features), pred.atom_energies, weights,
                        both.narrow(0, K * B, K));
}

LossTerms Trainer::evaluate(const Batch& b, bool backward) {
  std::vector<int64_t> global(b.counts.begin(), b.counts.begin() + b.targets.size());
  Predictions pred = predict(b.samples, b.capacities, backward);
  StepPhase phase("uma::train::loss");
  LossTerms terms = compute_losses(tasks_, pred, b.targets, global);
  if (backward) {
    phase.next("uma::train::backward");
    auto& grads = flat_->grads();
    grads.zero_();
    auto total_loss = terms.losses.sum();
    // Only the parameters' gradient: the engine skips every path that ends at
    // the positions or the strain only (the geometry: edge vectors, Wigner
    // matrices, basis and envelope, and the lean operators' geometric inputs).
    torch::autograd::backward({total_loss}, {}, false, false, flat_->parameters());
    // A non-finite loss on any process poisons the summed gradient, so every
    // process rejects the same step.
    torch::NoGradGuard no_grad;
    grads.narrow(0, 0, 1).add_(total_loss.detach().to(grads.scalar_type()) * 0);
  }
  if (backward && has_committee()) {
    // Its own graph (the features are detached): the main gradient is untouched.
    auto loss = committee_step_loss(pred, b);
    committee_flat_->grads().zero_();
    loss.backward();
    torch::NoGradGuard no_grad;
    committee_loss_ = loss.detach();
  }
  return terms;
}

void Trainer::agree(const std::string& failure) const {
  const std::string first = options_.first_failure ? options_.first_failure(failure) : failure;
  if (!first.empty()) throw Error(first);
}

void Trainer::step(const std::vector<int64_t>& indices) {
  const DeterministicScope deterministic(options_.deterministic);
  step_deterministic_ = at::globalContext().deterministicAlgorithms();
  // The processes meet before each collective: a failure on one (a GPU out
  // of memory, say) stops every process with its message, where the others
  // would wait for it in the collective forever.
  Batch batch;
  LossTerms terms;
  std::string failure;
  try {
    StepPhase phase("uma::train::batch");
    batch = prepare(indices);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  agree(failure);
  if (options_.sum_host) options_.sum_host(batch.counts);
  try {
    if (fail_step_) throw Error("a failure injected by UMA_TEST_FAIL_TRAINING_STEP (tests only)");
    terms = evaluate(batch, /*backward=*/true);
  } catch (const std::exception& e) {
    failure = step_failure(e, options_.recompute_chunk);
  }
  agree(failure);
  StepPhase phase("uma::train::optimizer");
  auto total_loss = terms.losses.sum().detach();
  if (options_.sum_gradients) options_.sum_gradients(flat_->grads());
  optimizer_->step(total_loss);
  if (has_committee()) {
    if (options_.sum_gradients) options_.sum_gradients(committee_flat_->grads());
    committee_optimizer_->step(committee_loss_);
  }

  torch::NoGradGuard no_grad;
  if (has_committee()) committee_loss_sum_ += committee_loss_;
  loss_sum_ += total_loss;
  task_loss_sums_ += terms.losses.detach();
  error_sums_ += terms.error_sums;
  for (size_t t = 0; t < tasks_.size(); ++t) error_counts_[t] += batch.counts[tasks_.size() + t];
  ++stat_steps_;
}

Trainer::Errors Trainer::errors(const std::vector<int64_t>& indices, bool average) {
  Batch batch;
  LossTerms terms;
  with_weights(average, [&] {
    batch = prepare(indices);
    terms = evaluate(batch, /*backward=*/false);
  });
  PackedRead packed;
  packed.add("errors", terms.error_sums);
  packed.add("overflows", overflows_);
  packed.read();
  check_overflows(packed.scalar("overflows"));
  return property_maes(tasks_, packed.vector("errors").data(), batch.counts.data() + tasks_.size());
}

void Trainer::with_weights(bool average, const std::function<void()>& fn) {
  if (!average || !optimizer_->average().defined()) return fn();
  auto swap_in = [&](const torch::Tensor& values) {
    torch::NoGradGuard no_grad;     // only for the copy: fn may need autograd
    flat_->values().copy_(values);  // same device
  };
  const auto raw = flat_->values().detach().clone();
  swap_in(optimizer_->average());
  try {
    fn();
  } catch (...) {
    swap_in(raw);
    throw;
  }
  swap_in(raw);
}

TrainStats Trainer::read_stats() {
  PackedRead packed;
  packed.add("loss", loss_sum_);
  packed.add("task_losses", task_loss_sums_);
  packed.add("errors", error_sums_);
  if (has_committee()) packed.add("committee_loss", committee_loss_sum_);
  packed.add("skipped", optimizer_->skipped());
  packed.add("grad_norm", optimizer_->grad_norm());
  packed.add("overflows", overflows_);
  packed.read();
  check_overflows(packed.scalar("overflows"));
  // Losses are already global (each process holds its share of the global
  // mean), error sums are local: both add up over processes.
  if (options_.sum_host)
    packed.update({"loss", "task_losses", "errors", "committee_loss"}, options_.sum_host);
  TrainStats s;
  s.steps = stat_steps_;
  const double steps = std::max<int64_t>(stat_steps_, 1);
  s.loss = packed.scalar("loss") / steps;
  for (double l : packed.vector("task_losses")) s.task_losses.push_back(l / steps);
  const auto maes = property_maes(tasks_, packed.vector("errors").data(), error_counts_.data());
  s.energy_mae = maes.energy;
  s.forces_mae = maes.forces;
  s.stress_mae = maes.stress;
  s.committee_loss = has_committee() ? packed.scalar("committee_loss") / steps : std::nan("");
  s.skipped = static_cast<int64_t>(packed.scalar("skipped"));
  s.grad_norm = packed.scalar("grad_norm");
  s.lr = optimizer_->last_lr();
  loss_sum_.zero_();
  task_loss_sums_.zero_();
  error_sums_.zero_();
  if (has_committee()) committee_loss_sum_.zero_();
  std::fill(error_counts_.begin(), error_counts_.end(), 0.0);
  stat_steps_ = 0;
  return s;
}

Uncertainty Trainer::uncertainty(const Sample& sample) {
  if (!has_committee()) throw Error("internal: uncertainty() without a committee");
  validate_systems(model_, {sample.atoms});
  // The estimate decides which frames are labelled: it repeats bit for bit
  // under `deterministic`, as the steps do (on CUDA its sums into atoms
  // would otherwise be float atomics).
  const DeterministicScope deterministic(options_.deterministic);
  torch::NoGradGuard no_grad;
  Request what;  // the features and the energies only, no backward pass
  what.energy = what.forces = what.gradients = false;
  what.features = true;
  const double rmsd = model_->outputs(sample.atoms.task).energy_rmsd;  // normalised -> eV
  HostEvaluation host;
  // The engine's capacity policy: never an estimate from a truncated graph.
  // One read: the graph's status and the spread.
  until_capacity_fits([&] {
    const Evaluation ev = engine_->evaluate({sample.atoms}, what);
    auto spread = committee_spread(committee_->forward(ev.features)).to(torch::kFloat64) * rmsd;
    return engine_->read(ev, host, spread);  // [N]
  });
  Uncertainty u;
  u.per_atom = host.extra;
  const auto N = static_cast<double>(u.per_atom.size());
  for (double x : u.per_atom) {
    u.max = std::max(u.max, x);
    u.mean += x / N;
  }
  return u;
}

void Trainer::copy_weights(UmaModel& dst, bool average) const {
  const auto& source =
      average && optimizer_->average().defined() ? optimizer_->average() : flat_->values();
  auto params = dst->parameters();
  const auto own = model_->parameters();
  if (params.size() != own.size()) throw Error("copy_weights: the models differ in shape");
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t n = params[i].numel();
    if (own[i].numel() != n) throw Error("copy_weights: the models differ in shape");
    if (!trainable_[i]) {
      params[i].copy_(own[i]);  // same device
      continue;
    }
    params[i].copy_(source.narrow(0, offset, n).view(params[i].sizes()));  // same device
    offset += n;
  }
  if (offset != source.numel()) throw Error("copy_weights: the models differ in size");
}

void Trainer::save_model(const std::string& path, bool average) {
  with_weights(average, [&] { uma::save_model(model_, path); });
}

void Trainer::save_state(const std::string& path) const {
  TensorFile file;
  auto state = optimizer_->state();
  for (auto [name, t] : state.fields())
    if (t->defined()) file.tensors[name] = to_host(*t);
  file.tensors["weights"] = to_host(flat_->values());
  file.metadata["format"] = "lammps-uma-optimizer";
  file.metadata["steps"] = std::to_string(optimizer_->steps_taken());
  if (has_committee()) {
    auto cstate = committee_optimizer_->state();
    for (auto [name, t] : cstate.fields())
      if (t->defined()) file.tensors[std::string("committee.") + name] = to_host(*t);
    file.tensors["committee.weights"] = to_host(committee_flat_->values());
    file.metadata["committee_members"] = std::to_string(committee_->members());
    file.metadata["committee_steps"] = std::to_string(committee_optimizer_->steps_taken());
  }
  write_safetensors(path, file);
}

void Trainer::load_state(const std::string& path) {
  TensorFile file = read_safetensors(path);
  if (file.metadata["format"] != "lammps-uma-optimizer")
    throw Error(path + " is not a lammps-uma optimizer state file");
  AdamW::State state;
  for (auto [name, t] : state.fields())
    if (file.tensors.count(name))
      *t = move_bulk(file.tensors[name], file.tensors[name].options().device(options_.device));
  const auto& w = file.tensors["weights"];
  if (!w.defined() || w.numel() != flat_->numel())
    throw Error(path + " holds the optimizer state of a model of another size");
  const std::string members = has_committee() ? std::to_string(committee_->members()) : "";
  if (file.metadata["committee_members"] != members)
    throw Error(path + " holds " +
                (file.metadata["committee_members"].empty() ? std::string("no")
                                                            : file.metadata["committee_members"]) +
                " committee members; this run has " +
                (members.empty() ? std::string("none") : members));
  optimizer_->load_state(state, std::stoll(file.metadata["steps"]));
  torch::NoGradGuard no_grad;
  flat_->values().copy_(move_bulk(w, flat_->values().options()));  // same device
  if (has_committee()) {
    AdamW::State cstate;
    for (auto [name, field] : cstate.fields()) {
      const auto& t = file.tensors[std::string("committee.") + name];
      if (std::string(name) == "ema") continue;  // the committee keeps no moving average
      if (!t.defined()) throw Error(path + " lacks the committee's optimizer state '" + name + "'");
      *field = move_bulk(t, t.options().device(options_.device));
    }
    const auto& cw = file.tensors["committee.weights"];
    if (!cw.defined() || cw.numel() != committee_flat_->numel())
      throw Error(path + " holds a committee of another size");
    committee_optimizer_->load_state(cstate, std::stoll(file.metadata["committee_steps"]));
    auto& values = committee_flat_->values();
    values.copy_(move_bulk(cw, values.options()));  // same device
  }
}

uint64_t Trainer::weights_hash() const {
  auto host = to_host(flat_->values());
  const auto* bytes = static_cast<const unsigned char*>(host.data_ptr());  // host data
  uint64_t h = 1469598103934665603ull;                                     // FNV-1a
  for (int64_t i = 0; i < host.numel() * static_cast<int64_t>(host.element_size()); ++i)
    h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

}  // namespace uma::train
