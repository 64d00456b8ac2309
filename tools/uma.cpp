// uma: command-line front end of the lammps-uma engine.
//
//   uma info MODEL
//   uma eval MODEL STRUCTURE.extxyz [--task T] [--charge Q] [--spin S]
//            [--device cpu|cuda|cuda:N] [--precision fp32|fp64|tf32] [--memory GB] [--json] [--cuda-graph]
//   uma bench MODEL STRUCTURE.extxyz [--repeats N] [--memory GB] [--chunk EDGES] [--cuda-graph]
//             [--profile]
//   uma train MODEL DATA.extxyz --out OUT [--steps N] [--max-atoms M] ...
//   uma test MODEL DATA.extxyz [--task T]
//   uma bench-train MODEL DATA.extxyz [--steps N] [--warmup N] [--ops] [--phases]
//                   [--profile] [--edge-ops lean|reference] [--device D]
//   uma bench-graph [--sizes 6 13 25] [--repeats N] [--brute-repeats N] [--max-brute ATOMS] [--json]
//   uma init CONFIG.json OUT.safetensors [--seed N]      (random weights: timing only)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "api/uma.h"

namespace {

using nlohmann::json;

int cmd_info(const std::string& path) {
  auto model = uma::load_model(path);
  const auto& c = model->config();
  const auto& b = c.backbone;
  int64_t params = 0;
  for (const auto& p : model->parameters()) params += p.numel();
  std::printf("model file      %s\n", path.c_str());
  std::printf("model id        %s\n", c.model_id.empty() ? "(none)" : c.model_id.c_str());
  std::printf("parameters      %lld\n", static_cast<long long>(params));
  std::printf("layers          %d (lmax %d, mmax %d)\n", b.num_layers, b.lmax, b.mmax);
  std::printf("channels        sphere %d, hidden %d, edge %d, distance basis %d\n",
              b.sphere_channels, b.hidden_channels, b.edge_channels, b.num_distance_basis);
  std::printf("experts         %d%s\n", b.num_experts,
              b.num_experts ? " (mixture of linear experts)" : "");
  std::printf("cutoff          %g A, max_neighbors %d\n", b.cutoff, b.max_neighbors);
  std::printf("elements        Z = 1..%d\n", b.max_num_elements - 1);
  std::printf("tasks           ");
  for (const auto& d : c.dataset_names()) std::printf("%s ", d.c_str());
  std::printf("\n");
  if (b.charge_channel_end > b.charge_channel_begin)
    std::printf("charge balance  channels %d..%d\n", b.charge_channel_begin,
                b.charge_channel_end - 1);
  if (b.composition_include_self)
    std::printf("composition     mean includes an extra zero (UMA-S-1.2)\n");
  return 0;
}

struct EvalArgs {
  std::string model, structure, task, device = "cpu", precision = "fp32";
  std::optional<int64_t> charge, spin;
  bool json = false, no_merge = false, cuda_graph = false;
  double memory_gb = 0;  // 0: automatic
};

int cmd_eval(const EvalArgs& a) {
  uma::EngineOptions opt;
  opt.device = uma::resolve_device(a.device);
  opt.set_precision(uma::parse_precision(a.precision));
  opt.merge_mole = !a.no_merge;
  opt.memory_budget = a.memory_gb * 1e9;
  opt.cuda_graph = a.cuda_graph;
  uma::Engine engine(uma::load_model(a.model), opt);
  int64_t plans_shown = 0;
  const auto frames = uma::read_extxyz(a.structure);
  // Every frame's inputs first: a bad one stops the command before any output.
  std::vector<uma::Atoms> inputs;
  for (size_t i = 0; i < frames.size(); ++i) {
    uma::SystemInputs given;
    given.task = a.task;
    given.charge = a.charge;
    given.spin = a.spin;
    const uma::Atoms& atoms = inputs.emplace_back(
        uma::frame_system(frames[i], a.structure + ", frame " + std::to_string(i), given));
    if (atoms.task.empty()) {
      std::string known;
      for (const auto& d : engine.model()->config().dataset_names()) known += " " + d;
      throw uma::Error("no task given: pass --task (this model has:" + known + ")");
    }
  }
  json out = json::array();
  for (size_t i = 0; i < frames.size(); ++i) {
    const auto& f = frames[i];
    const uma::Atoms& atoms = inputs[i];
    uma::Request what = uma::Request::all();
    what.atom_virial = a.json;
    auto r = uma::evaluate_on_host(engine, {atoms}, what);
    const auto stats = engine.stats();
    if (stats.memory_plans != plans_shown) {  // once per new plan, on stderr (JSON stays clean)
      std::fprintf(stderr, "uma: memory plan: %s\n", stats.memory_plan.describe().c_str());
      plans_shown = stats.memory_plans;
    }
    const int64_t n = static_cast<int64_t>(f.numbers.size());
    if (a.json) {
      json fr;
      fr["energy"] = r.energy[0];
      fr["forces"] =
          std::vector<double>(r.forces.data_ptr<double>(), r.forces.data_ptr<double>() + 3 * n);
      if (r.stress.defined())
        fr["stress"] =
            std::vector<double>(r.stress.data_ptr<double>(), r.stress.data_ptr<double>() + 9);
      fr["atom_energies"] = std::vector<double>(r.atom_energy.data_ptr<double>(),
                                                r.atom_energy.data_ptr<double>() + n);
      // LAMMPS's order and sign: W = sum r (x) f, components xx yy zz xy xz yz (eV)
      auto voigt = [](const double* w) {
        return std::vector<double>{w[0], w[4], w[8], w[1], w[2], w[5]};
      };
      fr["virial"] = voigt(r.virial.data_ptr<double>());
      json atom_virial = json::array();
      for (int64_t k = 0; k < n; ++k)
        atom_virial.push_back(voigt(r.atom_virial.data_ptr<double>() + 9 * k));
      fr["atom_virials"] = atom_virial;
      fr["edges"] = r.edges[0];
      out.push_back(fr);
      continue;
    }
    std::printf("frame %zu: %lld atoms, task %s, charge %lld, spin %lld, %lld edges\n", i,
                static_cast<long long>(n), atoms.task.c_str(), static_cast<long long>(atoms.charge),
                static_cast<long long>(atoms.spin), static_cast<long long>(r.edges[0]));
    std::printf("energy  %.10f eV\n", r.energy[0]);
    std::printf("forces (eV/A)\n");
    auto F = r.forces.accessor<double, 2>();
    for (int64_t k = 0; k < n; ++k)
      std::printf("  %-3s %16.10f %16.10f %16.10f\n",
                  uma::element_symbol(int(f.numbers[k])).c_str(), F[k][0], F[k][1], F[k][2]);
    if (r.stress.defined() && (f.pbc[0] || f.pbc[1] || f.pbc[2])) {
      auto S = r.stress.accessor<double, 3>()[0];
      std::printf("stress (eV/A^3, +(1/V) dE/d strain)\n");
      for (int k = 0; k < 3; ++k)
        std::printf("  %16.10f %16.10f %16.10f\n", S[k][0], S[k][1], S[k][2]);
    }
  }
  if (a.json) std::cout << out.dump(1) << "\n";
  if (a.cuda_graph) {  // on stderr: the JSON stays clean
    const auto stats = engine.stats();
    std::fprintf(stderr, "uma: CUDA graphs: %lld captured, %lld frames replayed of %zu\n",
                 static_cast<long long>(stats.graph_captures),
                 static_cast<long long>(stats.graph_replays), frames.size());
    if (!stats.graph_refusal.empty())
      std::fprintf(stderr, "uma: a capture failed, those frames ran eagerly: %s\n",
                   stats.graph_refusal.c_str());
  }
  return 0;
}

// One subcommand: its parser, and what it runs once the command line is parsed.
struct Command {
  CLI::App* parser;
  std::function<int()> run;
};

Command add_info(CLI::App& app) {
  auto model = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("info", "print a model file's configuration");
  cmd->add_option("MODEL", *model, "model file (.safetensors)")->required();
  return {cmd, [model] { return cmd_info(*model); }};
}

Command add_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* cmd =
      app.add_subcommand("eval", "energy, forces and stress of every frame of an extxyz file");
  cmd->add_option("MODEL", a->model, "model file (.safetensors)")->required();
  cmd->add_option("STRUCTURE", a->structure, "structure file (extended XYZ)")->required();
  cmd->add_option("--task", a->task, "dataset head (default: the frame's task= label)");
  cmd->add_option("--charge", a->charge, "total charge (default: frame label or 0)");
  cmd->add_option("--spin", a->spin,
                  "spin multiplicity (default: frame label, 1 for omol, else 0)");
  cmd->add_option("--device", a->device, "cpu, cuda or cuda:N");
  cmd->add_option("--precision", a->precision, "fp32, fp64 or tf32 (CUDA only)")
      ->check(CLI::IsMember(uma::precision_names()));
  cmd->add_flag("--json", a->json, "print JSON instead of tables");
  cmd->add_option("--memory", a->memory_gb,
                  "memory budget per evaluation in GB (default: 80% of the available memory); "
                  "above it the edge work is recomputed in chunks")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-merge", a->no_merge, "do not merge the experts (evaluate the full mixture)");
  cmd->add_flag("--cuda-graph", a->cuda_graph,
                "replay a CUDA graph of each frame once one with the same "
                "atoms has been captured (CUDA only; frames of a trajectory)");
  return {cmd, [a] { return cmd_eval(*a); }};
}

Command add_bench(CLI::App& app) {
  struct Args {
    uma::tool::BenchArgs bench;
    bool no_merge = false;
  };
  auto a = std::make_shared<Args>();
  auto& bench = a->bench;
  auto* cmd =
      app.add_subcommand("bench", "time repeated evaluations of one structure (prints JSON)");
  cmd->add_option("MODEL", bench.model, "model file (.safetensors)")->required();
  cmd->add_option("STRUCTURE", bench.structure, "structure file (first frame is used)")->required();
  cmd->add_option("--task", bench.task, "dataset head");
  cmd->add_option("--repeats", bench.repeats, "timed evaluations after one warm-up")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--precision", bench.precision, "fp32, fp64 or tf32 (CUDA only)")
      ->check(CLI::IsMember(uma::precision_names()));
  cmd->add_option("--device", bench.device, "cpu, cuda or cuda:N");
  cmd->add_option("--memory", bench.memory_gb,
                  "memory budget per evaluation in GB (default: automatic)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--chunk", bench.chunk,
                  "recompute the edge work in chunks of this many edges "
                  "(overrides the memory plan)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--edge-ops", bench.edge_ops,
                  "block edge work: lean (fused CPU operators) or "
                  "reference (the LibTorch composition)")
      ->check(CLI::IsMember(uma::edges::edge_ops_names()));
  cmd->add_flag("--no-merge", a->no_merge, "evaluate the full expert mixture");
  cmd->add_flag("--profile", bench.profile,
                "time the outermost ATen operators over as many more evaluations "
                "(on CUDA each waits for the device: its kernels' time)");
  cmd->add_flag("--cuda-graph", bench.cuda_graph,
                "replay a CUDA graph of the step once it is captured "
                "(CUDA only)");
  return {cmd, [a] {
            a->bench.merge = !a->no_merge;
            return uma::tool::bench(a->bench);
          }};
}

Command add_train(CLI::App& app) {
  auto tr = std::make_shared<uma::tool::TrainArgs>();
  auto* cmd =
      app.add_subcommand("train", "train a model file on labelled extxyz (energy, forces, stress)");
  cmd->add_option("MODEL", tr->model, "model file to start from (.safetensors)")->required();
  cmd->add_option("DATA", tr->data, "training frames (extended XYZ with energy/forces/stress)")
      ->required();
  cmd->add_option("--out", tr->out, "model file to write (the averaged weights when --ema > 0)")
      ->required();
  cmd->add_option("--raw-out", tr->raw_out,
                  "also write the raw (not averaged) weights to this model file");
  cmd->add_option("--validate", tr->validate, "held-out frames: MAEs before and after");
  cmd->add_option("--task", tr->task, "dataset for frames without a task= label");
  cmd->add_option("--steps", tr->steps, "optimizer steps")->check(CLI::PositiveNumber);
  cmd->add_option("--max-atoms", tr->max_atoms, "atoms per batch at most")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--print-every", tr->print_every, "steps between progress lines")
      ->check(CLI::PositiveNumber);
  // The training options of fix uma/train, from the same table (the values are
  // checked when the options are applied; --total-steps defaults to --steps).
  const uma::train::TrainOptions defaults;
  for (const auto& spec : uma::train::train_option_specs()) {
    std::string flag = "--" + spec.name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    const std::string shown = spec.name == "total_steps"
                                  ? "--steps"
                                  : uma::train::train_option_value(defaults, spec.name);
    cmd->add_option_function<std::string>(
        flag, [tr, name = spec.name](const std::string& v) { tr->options.emplace_back(name, v); },
        spec.help + "; default " + shown);
  }
  cmd->add_option("--device", tr->device, "cpu, cuda or cuda:N");
  return {cmd, [tr] { return uma::tool::train(*tr); }};
}

Command add_test(CLI::App& app) {
  auto te = std::make_shared<uma::tool::TestArgs>();
  auto* cmd =
      app.add_subcommand("test", "energy, force and stress MAEs of a model on labelled extxyz");
  cmd->add_option("MODEL", te->model, "model file (.safetensors)")->required();
  cmd->add_option("DATA", te->data, "labelled frames (extended XYZ)")->required();
  cmd->add_option("--task", te->task, "dataset for frames without a task= label");
  return {cmd, [te] { return uma::tool::test(*te); }};
}

Command add_bench_train(CLI::App& app) {
  auto bt = std::make_shared<uma::tool::BenchTrainArgs>();
  auto* cmd = app.add_subcommand("bench-train", "time training steps on one batch (prints JSON)");
  cmd->add_option("MODEL", bt->model, "model file (.safetensors)")->required();
  cmd->add_option("DATA", bt->data, "labelled frames: the batch")->required();
  cmd->add_option("--steps", bt->steps, "timed steps")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", bt->warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--ops", bt->ops, "list the most frequent ATen operators of one step");
  cmd->add_flag("--phases", bt->phases,
                "time the step's phases (batch, graph, forward, gradient, loss, backward, "
                "optimizer) over the timed steps");
  cmd->add_flag("--profile", bt->profile,
                "time the outermost ATen operators over as many more steps");
  cmd->add_option("--edge-ops", bt->edge_ops, "the blocks' edge operators")
      ->check(CLI::IsMember(uma::edges::edge_ops_names()));
  cmd->add_option("--recompute", bt->recompute,
                  "edges per chunk of edge work recomputed in the backward (0: stored)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", bt->device, "cpu, cuda or cuda:N");
  return {cmd, [bt] { return uma::tool::bench_train(*bt); }};
}

Command add_bench_graph(CLI::App& app) {
  auto bg = std::make_shared<uma::tool::BenchGraphArgs>();
  auto* cmd = app.add_subcommand(
      "bench-graph", "time the cell-list radius graph against the brute force on fcc Cu");
  cmd->add_option("--sizes", bg->sizes, "supercells n x n x n of the 4-atom cell (default 6 13 25)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--repeats", bg->repeats, "timed builds after one warm-up")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--brute-repeats", bg->brute_repeats, "timed brute-force builds (no warm-up)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-brute", bg->max_brute,
                  "skip the brute force above this many atoms (default 2000)");
  cmd->add_option("--cutoff", bg->cutoff, "cutoff (A)")->check(CLI::PositiveNumber);
  cmd->add_option("--max-neighbors", bg->max_neighbors, "max_neighbors (0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--rattle", bg->rattle, "random displacement per axis (A)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", bg->device, "cpu, cuda or cuda:N");
  cmd->add_option("--precision", bg->precision, "fp32 or fp64")
      ->check(CLI::IsMember(uma::precision_names(/*tf32=*/false)));
  cmd->add_flag("--json", bg->json, "print JSON");
  return {cmd, [bg] { return uma::tool::bench_graph(*bg); }};
}

Command add_init(CLI::App& app) {
  auto in = std::make_shared<uma::tool::InitArgs>();
  auto* cmd = app.add_subcommand(
      "init", "write a model file with seeded random weights for a model config (timing only)");
  cmd->add_option("CONFIG", in->config, "model configuration JSON (a model file's config metadata)")
      ->required();
  cmd->add_option("OUT", in->out, "model file to write (.safetensors)")->required();
  cmd->add_option("--seed", in->seed, "random seed");
  return {cmd, [in] { return uma::tool::init(*in); }};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lammps-uma engine: evaluate and inspect UMA-S model files"};
  app.require_subcommand(1);
  // In the order `uma --help` lists them.
  const std::vector<Command> commands{add_info(app),        add_eval(app), add_bench(app),
                                      add_train(app),       add_test(app), add_bench_train(app),
                                      add_bench_graph(app), add_init(app)};
  CLI11_PARSE(app, argc, argv);
  try {
    for (const auto& c : commands)
      if (*c.parser) return c.run();
  } catch (const uma::Error& e) {
    std::fprintf(stderr, "uma: error: %s\n", e.what());
    return 1;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "uma: internal error: %s\n", e.what_without_backtrace());
    return 2;
  }
  return 0;
}
