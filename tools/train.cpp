// uma train: multi-task training of a model file on labelled extended XYZ.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "api/uma.h"

namespace uma::tool {
namespace {

void add_all(train::TrainingLoop& loop, const std::vector<Sample>& samples, bool held_out) {
  for (const auto& s : samples) loop.add(s, held_out);
}

void print_errors(const char* what, const train::Trainer::Errors& e) {
  std::printf("%-10s  energy MAE %.5f eV/atom   forces MAE %.5f eV/A   stress MAE %.6f eV/A^3\n",
              what, e.energy, e.forces, e.stress);
}

}  // namespace

int train(const TrainArgs& a) {
  train::TrainOptions o;
  o.optimizer.total_steps =
      a.steps;  // the schedule spans the run unless --total-steps says otherwise
  for (const auto& [name, value] : a.options)
    if (!train::set_train_option(o, name, value))
      throw Error("internal: no training option '" + name + "'");
  // The outputs are written after the training: a path that cannot be
  // written stops the command before it.
  check_output_path(a.out);
  if (!a.raw_out.empty()) {
    if (std::filesystem::weakly_canonical(a.raw_out) == std::filesystem::weakly_canonical(a.out))
      throw Error("--raw-out names the same file as --out (" + a.out + ")");
    check_output_path(a.raw_out);
  }
  o.device = resolve_device(a.device);
  auto model = load_model(a.model);
  torch::manual_seed(o.seed);
  train::Trainer trainer(model, o);
  const bool averaged = o.optimizer.ema_decay > 0;

  train::TrainingLoop loop(trainer, train::MaxAtomsSampler(a.max_atoms, o.seed, 1, 0, a.shuffle),
                           "--max-atoms");
  auto data = read_training_data(a.data, a.task);
  if (data.empty()) throw Error(a.data + " holds no frames");
  require_labels(data, a.data);
  add_all(loop, data, false);
  if (!a.validate.empty()) {
    const auto held_out = read_training_data(a.validate, a.task);
    require_labels(held_out, a.validate);
    add_all(loop, held_out, true);
  }
  const auto& held = loop.held_out();
  std::printf("training %s on %zu frames of %s, %lld steps, max %lld atoms per batch, %s\n",
              a.model.c_str(), data.size(), a.data.c_str(), static_cast<long long>(a.steps),
              static_cast<long long>(a.max_atoms),
              train::train_option_value(o, "precision").c_str());
  if (const auto left_out = loop.oversized(data, ""); !left_out.empty())
    std::printf("warning: %s\n", left_out.c_str());
  if (!held.empty()) print_errors("start", trainer.errors(held, false));

  auto start = std::chrono::steady_clock::now();
  std::printf("%8s %12s %12s %12s %12s %10s %10s %8s\n", "step", "loss", "E_MAE/atom", "F_MAE",
              "S_MAE", "grad_norm", "lr", "s/step");
  for (int64_t step = 1; step <= a.steps; ++step) {
    loop.steps(1);  // NoBatchError: no frame fits --max-atoms
    if (step % a.print_every == 0 || step == a.steps) {
      auto s = trainer.read_stats();
      const double dt =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%8lld %12.6g %12.6g %12.6g %12.6g %10.4g %10.4g %8.3f\n",
                  static_cast<long long>(step), s.loss, s.energy_mae, s.forces_mae, s.stress_mae,
                  s.grad_norm, s.lr, dt / s.steps);
      // every task's loss, mean per step since the last line, with the digits a float64 comparison needs
      std::printf("         losses:");
      for (size_t t = 0; t < s.task_losses.size(); ++t)
        std::printf(" %s %.17g", trainer.tasks()[t].name.c_str(), s.task_losses[t]);
      if (trainer.has_committee()) std::printf(" committee %.17g", s.committee_loss);
      std::printf("\n");
      if (s.skipped > 0)
        std::printf("         %lld step(s) skipped so far: non-finite loss or gradient\n",
                    static_cast<long long>(s.skipped));
      std::fflush(stdout);
      start = std::chrono::steady_clock::now();
    }
  }
  if (!held.empty()) print_errors("held-out", trainer.errors(held, averaged));
  // Both in the training precision (the model's parameters as trained).
  const std::string precision = train::train_option_value(o, "precision");
  trainer.save_model(a.out, averaged);
  std::printf("wrote %s (%s weights, %s)\n", a.out.c_str(), averaged ? "averaged" : "raw",
              precision.c_str());
  if (!a.raw_out.empty()) {
    trainer.save_model(a.raw_out, false);
    std::printf("wrote %s (raw weights, %s)\n", a.raw_out.c_str(), precision.c_str());
  }
  return 0;
}

int test(const TestArgs& a) {
  train::TrainOptions o;
  o.optimizer.ema_decay = 0;
  train::Trainer trainer(load_model(a.model), o);
  auto data = read_training_data(a.data, a.task);
  if (data.empty()) throw Error(a.data + " holds no frames");
  require_labels(data, a.data);
  // every frame held out: scored, never trained on
  train::TrainingLoop loop(trainer, train::MaxAtomsSampler(1, o.seed), "--max-atoms");
  add_all(loop, data, /*held_out=*/true);
  std::printf("%s on %zu frames of %s\n", a.model.c_str(), data.size(), a.data.c_str());
  print_errors("errors", trainer.errors(loop.held_out(), false));
  return 0;
}

}  // namespace uma::tool
