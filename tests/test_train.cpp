// Training: zero host reads per step, the conserving second-order gradient
// against finite differences, batched vs split MoLE, non-finite steps,
// optimizer state round trips, the max-atoms sampler, bad samples.
#include <gtest/gtest.h>

#include <cfloat>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include <c10/core/CPUAllocator.h>

#include "edges/edge_segments.h"
#include "measure/storage_meter.h"
#include "op_watch.h"
#include "runtime/transfers.h"
#include "test_util.h"
#include "train/adamw_update.h"
#include "train/sampler.h"
#include "train/trainer.h"

namespace uma::test {
namespace {

using train::Trainer;

// A sample labelled with made-up but smooth targets.
Sample labelled(Atoms atoms, double energy, bool stress = true) {
  Sample s;
  s.atoms = std::move(atoms);
  const int64_t n = static_cast<int64_t>(s.atoms.numbers.size());
  s.labels.has_energy = true;
  s.labels.energy = energy;
  s.labels.has_forces = true;
  for (int64_t i = 0; i < 3 * n; ++i) s.labels.forces.push_back(0.3 * std::sin(1.7 * i + energy));
  s.labels.has_stress = stress;
  for (int k = 0; k < 9; ++k) s.labels.stress[k] = 0.01 * ((k % 4) + 1);
  return s;
}

train::TrainOptions options(torch::ScalarType dtype = torch::kFloat32) {
  train::TrainOptions o;
  o.device = test_device();
  o.dtype = dtype;
  o.optimizer.lr = 1e-3;
  o.optimizer.total_steps = 50;
  return o;
}

// Options under which a step only evaluates: lr = 0 leaves the weights exactly
// as they are, clip_norm = 0 leaves the gradient unscaled.
train::TrainOptions evaluation_options(torch::ScalarType dtype) {
  auto o = options(dtype);
  o.optimizer.lr = 0;
  o.optimizer.clip_norm = 0;
  return o;
}

// One step on these samples: returns its loss; its gradient is in t.gradient().
double loss_and_gradient(Trainer& t, const std::vector<int64_t>& ids) {
  t.step(ids);
  return t.read_stats().loss;
}

std::vector<int64_t> add_samples(Trainer& t) {
  return {t.add_sample(labelled(copper_cell(), -14.0)),
          t.add_sample(labelled(triclinic_cell(), -9.0)),
          t.add_sample(labelled(molecule(), -30.0, false))};
}

torch::Tensor weights(const Trainer& t) {
  std::vector<torch::Tensor> flat;
  for (const auto& p : t.model()->parameters()) flat.push_back(p.detach().reshape({-1}).clone());
  return torch::cat(flat);
}

// The same cell squeezed by `factor` along every lattice vector (twice the
// neighbours within the cutoff at 0.8).
Atoms squeezed(Atoms a, double factor) {
  a.positions = a.positions * factor;
  for (auto& row : a.cell)
    for (auto& x : row) x *= factor;
  return a;
}

// A frame's neighbour graph is whole whatever frame came before it: each
// frame's edges are measured under the engine's capacity policy.  A dense
// frame added after a sparse one with as many atoms once kept the sparse
// one's capacities, and was evaluated, trained and estimated on a truncated
// neighbour list (its errors and losses then depended on the frames' order).
TEST(Training, DenseFrameAfterASparseOneIsWhole) {
  const Sample sparse = labelled(copper_supercell(2), -110.0),
               dense = labelled(squeezed(copper_supercell(2), 0.8), -95.0);
  Trainer after(random_model(small_config()), evaluation_options(torch::kFloat64)),
      alone(random_model(small_config()), evaluation_options(torch::kFloat64));
  after.add_sample(sparse);
  const int64_t second = after.add_sample(dense), first = alone.add_sample(dense);
  const auto a = after.errors({second}, false), b = alone.errors({first}, false);
  EXPECT_EQ(a.energy, b.energy);
  EXPECT_EQ(a.forces, b.forces);
  EXPECT_EQ(a.stress, b.stress);
  after.step({second});
  alone.step({first});
  EXPECT_EQ(after.read_stats().loss, alone.read_stats().loss);
}

TEST(Training, StepReadsNothingFromTheDevice) {
  Trainer trainer(random_model(small_config()), options());
  auto ids = add_samples(trainer);
  train::MaxAtomsSampler sampler(9, 1);
  const std::vector<int64_t> natoms{4, 3, 5};
  trainer.step(sampler.next(natoms));
  reset_transfer_counts();
  {
    NoSyncGuard no_sync;
    for (int i = 0; i < 4; ++i) trainer.step(sampler.next(natoms));
  }
  EXPECT_EQ(host_read_count(), 0);
  auto stats = trainer.read_stats();  // reading is where the host waits, once
  EXPECT_EQ(host_read_count(), 1);
  EXPECT_EQ(stats.steps, 5);
  EXPECT_TRUE(std::isfinite(stats.loss));
  EXPECT_TRUE(std::isfinite(stats.forces_mae));
}

TEST(Training, ConservingGradientMatchesFiniteDifferences) {
  // The loss holds forces = -dE/dx and stress = dE/dstrain, so its gradient
  // needs the second-order backward through every edge operation.
  Trainer trainer(random_model(small_config(4, true)), evaluation_options(torch::kFloat64));
  auto ids = add_samples(trainer);
  loss_and_gradient(trainer, ids);
  auto grad = trainer.gradient().clone();
  std::vector<torch::Tensor> params;  // the flat gradient's order: trainable parameters
  for (const auto& p : trainer.model()->parameters())
    if (p.requires_grad()) params.push_back(p);
  auto order = std::get<1>(grad.abs().sort(0, /*descending=*/true));
  int compared = 0;  // finite differences actually compared (not loop passes)
  for (int64_t r = 0, picked = 0; r < order.size(0) && picked < 6; r += 97, ++picked) {
    const int64_t k = order[r].item<int64_t>();
    // Find parameter and element for flat index k.
    int64_t offset = 0;
    for (auto& p : params) {
      if (k < offset + p.numel()) {
        auto element = p.detach().view({-1}).narrow(0, k - offset, 1);
        const double h = 1e-5, w0 = element.item<double>();
        element.fill_(w0 + h);
        const double up = loss_and_gradient(trainer, ids);
        element.fill_(w0 - h);
        const double down = loss_and_gradient(trainer, ids);
        element.fill_(w0);
        const double fd = (up - down) / (2 * h), g = grad[k].item<double>();
        EXPECT_NEAR(fd, g, 1e-5 * std::max(1.0, std::abs(g))) << "flat index " << k;
        ++compared;
        break;
      }
      offset += p.numel();
    }
  }
  EXPECT_EQ(compared, 6);
}

TEST(Training, LeanEdgeOpsGiveTheCompositionsStep) {
  // One step on a multi-task batch (two omat cells with stress, an omol
  // molecule) through the lean operators' second derivatives and through the
  // LibTorch composition: the same losses and the same gradient, in float64,
  // on the test device (on CUDA the lean operators' CUDA launchers, where the
  // engine has them).
  auto run = [](edges::EdgeOps ops, const char* name) {
    auto o = evaluation_options(torch::kFloat64);
    o.edge_ops = ops;
    Trainer trainer(random_model(small_config(4, true)), o);
    EXPECT_EQ(&trainer.edge_backend(), &edges::edge_backend_for(ops, o.device)) << name;
    auto ids = add_samples(trainer);
    trainer.step(ids);
    return std::make_pair(trainer.gradient().clone(), trainer.read_stats());
  };
  const auto [lean, lean_stats] = run(edges::EdgeOps::kLean, "lean");
  const auto [reference, reference_stats] = run(edges::EdgeOps::kReference, "reference");
  const double scale = reference.abs().max().item<double>();
  ASSERT_GT(scale, 0.0);
  EXPECT_LE((lean - reference).abs().max().item<double>(), 1e-12 * scale);
  EXPECT_NEAR(lean_stats.loss, reference_stats.loss, 1e-12 * std::abs(reference_stats.loss));
  ASSERT_EQ(lean_stats.task_losses.size(), reference_stats.task_losses.size());
  for (size_t t = 0; t < lean_stats.task_losses.size(); ++t)
    EXPECT_NEAR(lean_stats.task_losses[t], reference_stats.task_losses[t],
                1e-12 * std::abs(reference_stats.task_losses[t]))
        << "task " << t;
}

TEST(Training, RecomputedEdgeWorkGivesTheStoredStep) {
  // The edge work recomputed in chunks of 37 edges (cutting through systems)
  // in both backward passes gives the stored path's losses and gradient on a
  // multi-task batch (with a 32-atom cell), in float64, with either edge
  // backend (on a CUDA test device the lean one where the engine has its CUDA launchers), and on the CPU
  // the step's peak tensor storage (measured) is lower.
  struct Step {
    torch::Tensor gradient;
    train::TrainStats stats;
    double peak_bytes;
  };
  const bool cpu = test_device().is_cpu();  // the meter sees CPU storage only
  auto run = [](edges::EdgeOps ops, int64_t chunk) {
    auto o = evaluation_options(torch::kFloat64);
    o.edge_ops = ops;
    o.recompute_chunk = chunk;
    Trainer trainer(random_model(small_config(4, true)), o);
    auto ids = add_samples(trainer);
    ids.push_back(
        trainer.add_sample(labelled(copper_supercell(2), -110.0)));  // edge work dominates
    CpuStorageMeter meter;
    const int64_t before = meter.live();
    trainer.step(ids);
    const double peak = static_cast<double>(meter.peak() - before);
    return Step{trainer.gradient().clone(), trainer.read_stats(), peak};
  };
  for (auto ops : {edges::EdgeOps::kLean, edges::EdgeOps::kReference}) {
    const Step stored = run(ops, 0), chunked = run(ops, 37);
    const double scale = stored.gradient.abs().max().item<double>();
    ASSERT_GT(scale, 0.0);
    const auto where = ops == edges::EdgeOps::kLean ? "edge_ops lean" : "edge_ops reference";
    EXPECT_LE((chunked.gradient - stored.gradient).abs().max().item<double>(), 1e-12 * scale)
        << where;
    EXPECT_NEAR(chunked.stats.loss, stored.stats.loss, 1e-12 * std::abs(stored.stats.loss))
        << where;
    if (!cpu) continue;
    std::printf("[recompute, %s] step peak storage: stored %.2f MB, chunks of 37 edges %.2f MB\n",
                where, stored.peak_bytes * 1e-6, chunked.peak_bytes * 1e-6);
    EXPECT_LT(chunked.peak_bytes, 0.1 * stored.peak_bytes) << where;  // measured 0.07, 0.05
  }
}

// While alive, LibTorch's CPU allocator refuses every allocation of at least
// `limit` bytes with c10::OutOfMemoryError, as a full device would.
class RefusingCpuAllocator final : public c10::Allocator {
 public:
  explicit RefusingCpuAllocator(size_t limit) : inner_(c10::GetCPUAllocator()), limit_(limit) {
    c10::SetCPUAllocator(this, kPriority);
  }
  ~RefusingCpuAllocator() override { c10::SetCPUAllocator(inner_, kPriority); }
  c10::DataPtr allocate(size_t n) override {
    TORCH_CHECK_WITH(OutOfMemoryError, n < limit_, "test allocator: ", n, " bytes refused");
    return inner_->allocate(n);
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  static constexpr uint8_t kPriority = 100;  // above LibTorch's default (0)
  c10::Allocator* inner_;
  size_t limit_;
};

TEST(Training, AStepOutOfMemorySaysHowToMakeItSmaller) {
  auto o = evaluation_options(torch::kFloat64);
  o.device = torch::kCPU;  // the refusing allocator is the CPU's
  Trainer trainer(random_model(small_config()), o);
  auto ids = add_samples(trainer);
  ids.push_back(trainer.add_sample(labelled(copper_supercell(2), -110.0)));
  {
    RefusingCpuAllocator refuse(1 << 20);
    expect_error([&] { trainer.step(ids); }, "bytes refused");
    expect_error([&] { trainer.step(ids); },
                 "ran out of memory: fewer atoms per batch (max_atoms) or the edge work recomputed "
                 "in chunks (recompute C, e.g. 1000)");
  }
  // Nothing was lost: the next step runs.
  trainer.step(ids);
  EXPECT_EQ(trainer.steps(), 1);
}

TEST(Training, BatchedMoleEqualsSplitViews) {
  // Padding every edge block to the widest (one batched GEMM per MoLE layer)
  // gives the loss and gradient of exact blocks (one GEMM per system).
  auto split = evaluation_options(torch::kFloat64);
  split.mole_padding = 0.0;
  auto padded = evaluation_options(torch::kFloat64);
  padded.mole_padding = 100.0;
  Trainer a(random_model(small_config()), split), b(random_model(small_config()), padded);
  auto ids = add_samples(a);
  add_samples(b);
  auto la = loss_and_gradient(a, ids);
  auto lb = loss_and_gradient(b, ids);
  EXPECT_NEAR(la, lb, 1e-12 * std::abs(la));
  EXPECT_TRUE(torch::isfinite(b.gradient()).all().item<bool>());
  EXPECT_LT((a.gradient() - b.gradient()).abs().max().item<double>(),
            1e-10 * a.gradient().abs().max().item<double>());
}

TEST(Training, LossFallsOnAFixedBatch) {
  auto o = options();
  o.optimizer.lr = 1e-2;
  o.optimizer.total_steps = 1000;
  o.optimizer.ema_decay = 0;
  Trainer trainer(random_model(small_config()), o);
  auto ids = add_samples(trainer);
  trainer.step(ids);
  const double first = trainer.read_stats().loss;
  for (int i = 0; i < 40; ++i) trainer.step(ids);
  trainer.read_stats();
  trainer.step(ids);
  const double last = trainer.read_stats().loss;
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
}

TEST(Training, NonFiniteStepLeavesWeightsAlone) {
  Trainer trainer(random_model(small_config()), options());
  const int64_t good = trainer.add_sample(labelled(copper_cell(), -14.0));
  const int64_t bad =
      trainer.add_sample(labelled(triclinic_cell(), DBL_MAX));  // loss overflows to inf
  auto before = weights(trainer);
  trainer.step({bad});
  EXPECT_TRUE(torch::equal(before, weights(trainer)));
  auto stats = trainer.read_stats();
  EXPECT_EQ(stats.skipped, 1);
  EXPECT_FALSE(std::isfinite(stats.loss));
  trainer.step({good});
  EXPECT_FALSE(torch::equal(before, weights(trainer)));
  EXPECT_TRUE(torch::isfinite(weights(trainer)).all().item<bool>());
  EXPECT_EQ(trainer.read_stats().skipped, 1);
}

// The CPU's one-pass AdamW update against the whole-buffer tensor operations
// (the update on other devices): accepted steps, the average's first copy,
// clipping (and none), and a rejected step, in float64 and float32.
TEST(Training, OnePassAdamWEqualsTheTensorOperations) {
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    const double tol = dtype == torch::kFloat64 ? 1e-15 : 1e-6;
    torch::manual_seed(7);
    const auto o = torch::TensorOptions().dtype(dtype);
    const int64_t n = 100003;  // several parallel chunks and a ragged tail
    train::AdamWBuffers a{torch::randn({n}, o), {}, torch::zeros({n}, o), torch::zeros({n}, o), {}};
    a.ema = a.w.clone();
    train::AdamWBuffers b{a.w.clone(), {}, a.m.clone(), a.v.clone(), a.ema.clone()};
    auto applied = torch::zeros({}, torch::kFloat64);
    for (int step = 0; step < 4; ++step) {
      const bool ok = step != 2;
      auto g = torch::randn({n}, o) * (step + 1);
      a.g = g.clone();
      b.g = g.clone();
      applied += ok ? 1.0 : 0.0;
      train::AdamWUpdate u{torch::tensor(ok),
                           torch::tensor(step == 3 ? 1.0 : 0.5 + 0.1 * step, o),
                           applied.clone(),
                           4e-4,
                           1e-3,
                           0.9,
                           0.999,
                           1e-8,
                           step == 0 ? 1.0 : 1e-3};
      train::adamw_update_in_one_pass(a, u);
      train::adamw_update_by_tensor_ops(b, u);
      for (auto [x, y, name] : {std::tuple{a.w, b.w, "w"},
                                {a.g, b.g, "g"},
                                {a.m, b.m, "m"},
                                {a.v, b.v, "v"},
                                {a.ema, b.ema, "ema"}}) {
        const double err = (x - y).abs().max().item<double>();
        EXPECT_LE(err, tol * std::max(1.0, y.abs().max().item<double>()))
            << name << " step " << step << " " << dtype;
      }
    }
  }
}

TEST(Training, OptimizerStateRoundTrip) {
  const auto dir = std::filesystem::temp_directory_path() / "uma_train_state";
  std::filesystem::create_directories(dir);
  Trainer a(random_model(small_config()), options()), b(random_model(small_config()), options());
  auto ids = add_samples(a);
  add_samples(b);
  for (int i = 0; i < 3; ++i) a.step(ids);
  a.save_state((dir / "state.safetensors").string());
  b.load_state((dir / "state.safetensors").string());
  EXPECT_EQ(a.weights_hash(), b.weights_hash()) << largest_weight_difference(a.model(), b.model());
  a.step(ids);
  b.step(ids);
  EXPECT_EQ(a.weights_hash(), b.weights_hash()) << largest_weight_difference(a.model(), b.model());
  // Averaged weights written as a model file load back.
  a.save_model((dir / "avg.safetensors").string(), true);
  auto loaded = load_model((dir / "avg.safetensors").string());
  EXPECT_EQ(loaded->parameters().size(), a.model()->parameters().size());
  expect_error([&] { b.load_state((dir / "avg.safetensors").string()); },
               "not a lammps-uma optimizer state");
}

// With LibTorch's deterministic mode off, two trainers of the same start
// still take the same steps, bit for bit: every sum into atoms and systems
// is a segment sum (edges/edge_segments.h) or a lean kernel's, and every
// gradient into an embedding table a one-hot product (edges/table_rows.h), so
// on CUDA no float atomics decide the bits (StepsInSegmentsAddNoFloatAtomics).  (Whether `deterministic no` can become the
// default on CUDA is what this shows there; on the CPU the sums are
// sequential either way.)  A first trainer's step warms the process up.
TEST(Training, StepsRepeatBitwiseWithoutDeterministicMode) {
  auto opts = options();
  opts.deterministic = false;
  Trainer warm(random_model(small_config()), opts);
  warm.step(add_samples(warm));
  Trainer a(random_model(small_config()), opts), b(random_model(small_config()), opts);
  auto ids = add_samples(a);
  add_samples(b);
  for (int i = 0; i < 3; ++i) {
    a.step(ids);
    b.step(ids);
    EXPECT_FALSE(a.step_was_deterministic());
    EXPECT_EQ(a.weights_hash(), b.weights_hash())
        << "step " << i << ": " << largest_weight_difference(a.model(), b.model());
  }
}

// Where sums run in segments (on a GPU; on the CPU here under
// SegmentSumsOnTheCpu), a training step on a multi-task batch calls no ATen
// operator that adds floating-point rows with atomics on CUDA (so that it
// needs no deterministic mode there), with either edge backend, and with the
// edge work recomputed in chunks and an uncertainty committee, and gives the
// CPU's losses and gradient to 1e-13 in float64.  On the CPU the watch sees
// index_add in the CPU's own step first: the watch can fail.
TEST(Training, StepsInSegmentsAddNoFloatAtomics) {
  struct Case {
    edges::EdgeOps ops;
    int64_t recompute_chunk, committee_members;
  };
  for (const Case& c : {Case{edges::EdgeOps::kLean, 0, 0}, Case{edges::EdgeOps::kReference, 0, 0},
                        Case{edges::EdgeOps::kLean, 37, 2}}) {
    const std::string name = std::string(edges::edge_ops_name(c.ops)) +
                             (c.recompute_chunk ? ", recomputed, committee" : "");
    auto run = [&](bool in_segments) {
      auto o = evaluation_options(torch::kFloat64);
      o.edge_ops = c.ops;
      o.recompute_chunk = c.recompute_chunk;
      o.committee_members = c.committee_members;
      o.deterministic = false;
      Trainer trainer(random_model(small_config(4, true, true)), o);
      auto ids = add_samples(trainer);
      std::optional<edges::SegmentSumsOnTheCpu> segments;
      if (in_segments) segments.emplace();
      OpWatch watch;
      trainer.step(ids);
      if (c.committee_members > 0) trainer.uncertainty(labelled(copper_cell(0.2, 5), -14.0));
      EXPECT_EQ(watch.calls().count("aten::linear (floating)"), 1u) << name << ": the watch sees";
      if (in_segments)
        for (const auto& call : watch.float_atomics()) ADD_FAILURE() << name << ": " << call;
      else if (test_device().is_cpu())
        EXPECT_EQ(watch.calls().count("aten::index_add (floating)"), 1u) << name;
      return std::make_pair(trainer.gradient().clone(), trainer.read_stats());
    };
    const auto [cpu, cpu_stats] = run(false);
    const auto [segmented, segmented_stats] = run(true);
    const double scale = cpu.abs().max().item<double>();
    ASSERT_GT(scale, 0.0);
    EXPECT_LE((segmented - cpu).abs().max().item<double>(), 1e-13 * scale) << name;
    EXPECT_NEAR(segmented_stats.loss, cpu_stats.loss, 1e-13 * std::abs(cpu_stats.loss)) << name;
  }
}

TEST(Training, BadSamplesAreRefused) {
  Trainer trainer(random_model(small_config()), options());
  auto s = labelled(copper_cell(), -14.0);
  s.atoms.task = "spice";
  expect_error([&] { trainer.add_sample(s); }, "unknown task 'spice'");
  s = labelled(copper_cell(), -14.0);
  s.labels.forces.resize(6);
  expect_error([&] { trainer.add_sample(s); }, "forces label has 6 numbers for 4 atoms");
  s = labelled(copper_cell(), -14.0);
  s.atoms.positions[1] = s.atoms.positions[0];
  expect_error([&] { trainer.add_sample(s); },
               "atoms 0 and 1 (0-based, in input order) are 0 A apart");
  EXPECT_EQ(trainer.num_samples(), 0);
}

// One step on a fixed batch, dropout off, float64, against fairchem's own
// HydraModel forward, compute_loss, clip_grad_norm_, AdamW and LambdaLR
// (tests/reference/make_train_fixture.py).
TEST(TrainingParity, OneStepMatchesFairchem) {
  std::ifstream in(fixtures_dir() + "/train_fixture.json");
  ASSERT_TRUE(in) << "no train_fixture.json in " << fixtures_dir();
  const auto fx = nlohmann::json::parse(in);
  const auto& opt = fx["options"];
  train::TrainOptions o;
  o.dtype = torch::kFloat64;
  o.optimizer.lr = opt["lr"];
  o.optimizer.weight_decay = opt["weight_decay"];
  o.optimizer.clip_norm = opt["clip"];
  o.optimizer.warmup_factor = opt["warmup_factor"];
  o.optimizer.warmup_steps = opt["warmup_steps"];
  o.optimizer.total_steps = opt["total_steps"];
  o.optimizer.lr_min_factor = opt["lr_min_factor"];
  o.optimizer.ema_decay = 0;
  o.loss.energy_coefficient = opt["energy_coef"];
  o.loss.forces_coefficient = opt["forces_coef"];
  o.loss.stress_coefficient = opt["stress_coef"];
  Trainer trainer(load_model(fixtures_dir() + "/" + fx["model"].get<std::string>()), o);
  std::vector<int64_t> ids;
  for (const auto& s : fx["systems"]) {
    Sample sample;
    auto& a = sample.atoms;
    a.numbers = s["numbers"].get<std::vector<int64_t>>();
    std::vector<double> pos;
    for (const auto& p : s["positions"]) pos.insert(pos.end(), p.begin(), p.end());
    a.positions = torch::tensor(pos, torch::kFloat64).view({-1, 3});
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) a.cell[r][c] = s["cell"][r][c];
    for (int k = 0; k < 3; ++k) a.pbc[k] = s["pbc"][k];
    a.charge = s["charge"];
    a.spin = s["spin"];
    a.task = s["task"];
    sample.labels.has_energy = sample.labels.has_forces = true;
    sample.labels.energy = s["energy"];
    for (const auto& f : s["forces"])
      sample.labels.forces.insert(sample.labels.forces.end(), f.begin(), f.end());
    if (!s["stress"].is_null()) {
      sample.labels.has_stress = true;
      for (int k = 0; k < 9; ++k) sample.labels.stress[k] = s["stress"][k];
    }
    ids.push_back(trainer.add_sample(sample));
  }
  trainer.step(ids);
  const auto stats = trainer.read_stats();
  const double want_loss = fx["loss"];
  EXPECT_NEAR(stats.loss, want_loss, 1e-9 * want_loss);
  EXPECT_NEAR(stats.grad_norm, fx["grad_norm"].get<double>(), 1e-9 * fx["grad_norm"].get<double>());
  for (size_t t = 0; t < trainer.tasks().size(); ++t) {
    const double want = fx["task_losses"][trainer.tasks()[t].name];
    EXPECT_NEAR(stats.task_losses[t], want, 1e-9 * std::max(1.0, want)) << trainer.tasks()[t].name;
  }
  // Updated parameters (AdamW's first step moves every parameter with a
  // gradient by about lr, so agreement to 1e-9 of lr checks the whole update).
  int compared = 0;
  for (const auto& p : trainer.model()->named_parameters()) {
    if (!fx["updated"].contains(p.key())) continue;
    const auto& u = fx["updated"][p.key()];
    auto flat = p.value().detach().reshape({-1});
    for (size_t k = 0; k < u["index"].size(); ++k) {
      const double got = flat[u["index"][k].get<int64_t>()].item<double>();
      EXPECT_NEAR(got, u["value"][k].get<double>(), 1e-12 + 1e-9 * o.optimizer.lr)
          << p.key() << "[" << k << "]";
      ++compared;
    }
  }
  EXPECT_EQ(compared, [&] {
    int n = 0;
    for (const auto& [k, v] : fx["updated"].items()) n += v["index"].size();
    return n;
  }());
}

// Deterministic algorithms are on inside step() only: the MD evaluations
// between training steps (pair_style uma while fix uma/train is active) keep
// LibTorch's fast sums, and a CUDA engine made before the trainer already
// fixed cuBLAS's workspace.
TEST(Training, DeterministicOnlyInsideSteps) {
  ASSERT_FALSE(at::globalContext().deterministicAlgorithms());
  Engine engine(random_model(small_config()), EngineOptions{test_device()});
  Trainer trainer(random_model(small_config()), options());
  EXPECT_FALSE(at::globalContext().deterministicAlgorithms()) << "set when the trainer was made";
  auto ids = add_samples(trainer);
  trainer.step(ids);
  EXPECT_TRUE(trainer.step_was_deterministic());
  EXPECT_FALSE(at::globalContext().deterministicAlgorithms()) << "left on after the step";
  evaluate_on_host(engine, {copper_cell()});
  EXPECT_FALSE(at::globalContext().deterministicAlgorithms());
  auto opts = options();
  opts.deterministic = false;
  Trainer free(random_model(small_config()), opts);
  free.step({free.add_sample(labelled(copper_cell(), -14.0))});
  EXPECT_FALSE(free.step_was_deterministic());
  if (test_device().is_cuda()) {
    const char* workspace = std::getenv("CUBLAS_WORKSPACE_CONFIG");
    ASSERT_NE(workspace, nullptr);
  }
}

// The processes meet before each collective of a step; a failure on one is
// reported by all (through first_failure) instead of leaving them waiting.
TEST(Training, FailuresAreAgreedBeforeEachCollective) {
  std::vector<std::string> seen;
  auto opts = options();
  opts.first_failure = [&](const std::string& mine) {
    seen.push_back(mine);
    return mine;
  };
  {
    Trainer trainer(random_model(small_config()), opts);
    trainer.step(add_samples(trainer));
    EXPECT_EQ(seen, (std::vector<std::string>{"", ""}));
  }
  seen.clear();
  setenv("UMA_TEST_FAIL_TRAINING_STEP", "1", 1);
  Trainer failing(random_model(small_config()), opts);
  unsetenv("UMA_TEST_FAIL_TRAINING_STEP");
  auto ids = add_samples(failing);
  expect_error([&] { failing.step(ids); }, "a failure injected by UMA_TEST_FAIL_TRAINING_STEP");
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "");
  EXPECT_NE(seen[1].find("injected"), std::string::npos);
  // Another process's failure stops this one too, with that message.
  int meetings = 0;  // the second meeting reports another process's failure
  opts.first_failure = [&](const std::string&) {
    return ++meetings == 2 ? std::string("rank 1: out of memory") : std::string();
  };
  Trainer healthy(random_model(small_config()), opts);
  auto more = add_samples(healthy);
  expect_error([&] { healthy.step(more); }, "rank 1: out of memory");
  EXPECT_EQ(healthy.steps(), 0);
}

TEST(Sampler, PacksDeterministicallyAndSplitsOverProcesses) {
  const std::vector<int64_t> natoms{5, 3, 8, 2, 7, 4, 6, 1, 9, 30};
  train::MaxAtomsSampler one(10, 42);
  std::multiset<int64_t> seen;
  for (int step = 0; step < 64 && one.epoch() < 1; ++step) {
    auto batch = one.next(natoms);
    if (one.epoch() > 0) break;
    int64_t atoms = 0;
    for (int64_t i : batch) atoms += natoms[i], seen.insert(i);
    EXPECT_LE(atoms, 10);
  }
  EXPECT_EQ(one.left_out(), 1);  // the 30-atom sample
  EXPECT_EQ(seen, (std::multiset<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  // Same seed, same plan; two processes share the batches of one.
  train::MaxAtomsSampler again(10, 42), same(10, 42), r0(10, 42, 2, 0), r1(10, 42, 2, 1),
      whole(10, 42);
  for (int step = 0; step < 12; ++step)
    EXPECT_EQ(again.next(natoms), same.next(natoms)) << "step " << step;
  auto a0 = r0.next(natoms), a1 = r1.next(natoms), w0 = whole.next(natoms), w1 = whole.next(natoms);
  EXPECT_EQ(a0, w0);
  EXPECT_EQ(a1, w1);
}

TEST(Sampler, ResumeRepeatsAnEpochThatGainedSamples) {
  // Samples added during an epoch join at the next; a restart in the middle
  // of that epoch must plan it from the samples it was first planned from.
  std::vector<int64_t> natoms{4, 4, 4, 4, 4, 4};
  train::MaxAtomsSampler run(4, 9);
  run.next(natoms);
  natoms.insert(natoms.end(), {4, 4, 4});  // three frames labelled during the epoch
  run.next(natoms);
  const int64_t epoch = run.epoch(), position = run.position(), planned = run.planned_samples();
  EXPECT_EQ(planned, 6);
  train::MaxAtomsSampler resumed(4, 9), naive(4, 9);
  resumed.resume(epoch, position, planned);
  naive.resume(epoch, position);
  std::vector<std::vector<int64_t>> a, b, c;
  for (int step = 0; step < 12; ++step) {
    a.push_back(run.next(natoms));
    b.push_back(resumed.next(natoms));
    c.push_back(naive.next(natoms));
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c) << "planning the epoch again from all 9 samples changes its batches";
}

}  // namespace
}  // namespace uma::test
