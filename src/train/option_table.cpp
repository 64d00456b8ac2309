#include "train/option_table.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "core/choices.h"
#include "core/uma_error.h"
#include "engine/engine.h"

namespace uma::train {
namespace {

// One row of the table: how a value is read and checked, where it goes.
struct Row {
  TrainOptionSpec spec;
  std::function<void(TrainOptions&, const std::string&)> set;  // throws uma::Error on a bad value
  std::function<std::string(const TrainOptions&)> get;
};

[[noreturn]] void refuse(const std::string& name, const std::string& rule,
                         const std::string& value) {
  throw Error(name + " must be " + rule + ", got '" + value + "'");
}

double real(const std::string& name, const std::string& rule, const std::string& value) {
  std::size_t used = 0;
  double v = std::nan("");
  try {
    v = std::stod(value, &used);
  } catch (const std::exception&) {
    refuse(name, rule, value);
  }
  if (used != value.size() || !std::isfinite(v)) refuse(name, rule, value);
  return v;
}

int64_t integer(const std::string& name, const std::string& rule, const std::string& value) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    refuse(name, rule, value);
  }
  if (used != value.size()) refuse(name, rule, value);
  return v;
}

std::string text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// A real option checked by `ok`, which `rule` describes.
Row real_row(const char* name, const char* help, const char* rule, std::function<bool(double)> ok,
             std::function<double&(TrainOptions&)> field) {
  return {{name, std::string(help) + " (" + rule + ")"},
          [=](TrainOptions& o, const std::string& value) {
            const double v = real(name, rule, value);
            if (!ok(v)) refuse(name, rule, value);
            field(o) = v;
          },
          [=](const TrainOptions& o) {
            TrainOptions copy = o;
            return text(field(copy));
          }};
}

Row integer_row(const char* name, const char* help, const char* rule,
                std::function<bool(int64_t)> ok, std::function<void(TrainOptions&, int64_t)> set,
                std::function<int64_t(const TrainOptions&)> get) {
  return {{name, std::string(help) + " (" + rule + ")"},
          [=](TrainOptions& o, const std::string& value) {
            const int64_t v = integer(name, rule, value);
            if (!ok(v)) refuse(name, rule, value);
            set(o, v);
          },
          [=](const TrainOptions& o) { return std::to_string(get(o)); }};
}

const std::vector<Row>& rows() {
  static const auto positive = [](double v) { return v > 0; };
  static const auto non_negative = [](double v) { return v >= 0; };
  static const auto below_one = [](double v) { return v >= 0 && v < 1; };
  static const std::vector<Row> table = {
      real_row("lr", "peak learning rate", "> 0", positive,
               [](TrainOptions& o) -> double& { return o.optimizer.lr; }),
      real_row("weight_decay", "AdamW weight decay", ">= 0", non_negative,
               [](TrainOptions& o) -> double& { return o.optimizer.weight_decay; }),
      integer_row(
          "warmup", "warm-up steps of the learning rate", "an integer >= 0",
          [](int64_t v) { return v >= 0; },
          [](TrainOptions& o, int64_t v) { o.optimizer.warmup_steps = v; },
          [](const TrainOptions& o) { return o.optimizer.warmup_steps; }),
      real_row("warmup_factor", "learning-rate factor at step 0 of the warm-up", ">= 0",
               non_negative, [](TrainOptions& o) -> double& { return o.optimizer.warmup_factor; }),
      integer_row(
          "total_steps", "optimizer steps of the cosine schedule", "an integer > 0",
          [](int64_t v) { return v > 0; },
          [](TrainOptions& o, int64_t v) { o.optimizer.total_steps = v; },
          [](const TrainOptions& o) { return o.optimizer.total_steps; }),
      real_row("lr_min_factor", "learning-rate factor after total_steps", ">= 0", non_negative,
               [](TrainOptions& o) -> double& { return o.optimizer.lr_min_factor; }),
      real_row("clip", "gradient-norm clip, 0 for none", ">= 0", non_negative,
               [](TrainOptions& o) -> double& { return o.optimizer.clip_norm; }),
      real_row("ema", "decay of the weights' moving average, 0 for none", ">= 0 and < 1", below_one,
               [](TrainOptions& o) -> double& { return o.optimizer.ema_decay; }),
      real_row("energy_coef", "energy loss coefficient", ">= 0", non_negative,
               [](TrainOptions& o) -> double& { return o.loss.energy_coefficient; }),
      real_row("forces_coef", "forces loss coefficient", ">= 0", non_negative,
               [](TrainOptions& o) -> double& { return o.loss.forces_coefficient; }),
      real_row("stress_coef", "stress loss coefficient", ">= 0", non_negative,
               [](TrainOptions& o) -> double& { return o.loss.stress_coefficient; }),
      {{"forces_reduction", "how the forces loss averages (mean or per_structure)"},
       [](TrainOptions& o, const std::string& v) {
         if (v != "mean" && v != "per_structure")
           refuse("forces_reduction", "mean or per_structure", v);
         o.loss.forces_reduction = v == "mean" ? Reduction::kMean : Reduction::kPerStructure;
       },
       [](const TrainOptions& o) {
         return std::string(o.loss.forces_reduction == Reduction::kMean ? "mean" : "per_structure");
       }},
      real_row("routing_dropout", "dropout on the expert routing logits", ">= 0 and < 1", below_one,
               [](TrainOptions& o) -> double& { return o.routing_dropout; }),
      integer_row(
          "seed", "seed of the sampler, the dropout and the committee", "an integer >= 0",
          [](int64_t v) { return v >= 0; },
          [](TrainOptions& o, int64_t v) { o.seed = static_cast<uint64_t>(v); },
          [](const TrainOptions& o) { return static_cast<int64_t>(o.seed); }),
      integer_row(
          "committee", "members of the uncertainty committee", "0 (none) or K >= 2",
          [](int64_t v) { return v == 0 || v >= 2; },
          [](TrainOptions& o, int64_t v) { o.committee_members = v; },
          [](const TrainOptions& o) { return o.committee_members; }),
      {{"precision",
        "the training's floating-point precision (" + one_of(precision_names(/*tf32=*/false)) + ")"},
       [](TrainOptions& o, const std::string& v) {
         const auto names = precision_names(/*tf32=*/false);
         if (std::find(names.begin(), names.end(), v) == names.end())
           refuse("precision", one_of(names), v);
         o.dtype = parse_precision(v).dtype;
       },
       [](const TrainOptions& o) { return precision_name(o.dtype); }},
      {{"edge_ops",
        "the blocks' edge operators (lean: fused on the CPU; reference: the LibTorch ops)"},
       [](TrainOptions& o, const std::string& v) {
         try {
           o.edge_ops = edges::parse_edge_ops(v);
         } catch (const Error&) {
           refuse("edge_ops", one_of(edges::edge_ops_names()), v);
         }
       },
       [](const TrainOptions& o) { return std::string(edges::edge_ops_name(o.edge_ops)); }},
      integer_row(
          "recompute", "edges per chunk of edge work recomputed in the backward, 0 to store it",
          "an integer >= 0", [](int64_t v) { return v >= 0; },
          [](TrainOptions& o, int64_t v) { o.recompute_chunk = v; },
          [](const TrainOptions& o) { return o.recompute_chunk; }),
      {{"deterministic", "LibTorch's deterministic algorithms during each step (yes or no)"},
       [](TrainOptions& o, const std::string& v) {
         if (v == "yes" || v == "on" || v == "true" || v == "1")
           o.deterministic = true;
         else if (v == "no" || v == "off" || v == "false" || v == "0")
           o.deterministic = false;
         else
           refuse("deterministic", "yes or no", v);
       },
       [](const TrainOptions& o) { return std::string(o.deterministic ? "yes" : "no"); }},
  };
  return table;
}

const Row* find(const std::string& name) {
  for (const auto& r : rows())
    if (r.spec.name == name) return &r;
  return nullptr;
}

}  // namespace

const std::vector<TrainOptionSpec>& train_option_specs() {
  static const std::vector<TrainOptionSpec> specs = [] {
    std::vector<TrainOptionSpec> out;
    for (const auto& r : rows()) out.push_back(r.spec);
    return out;
  }();
  return specs;
}

bool set_train_option(TrainOptions& o, const std::string& name, const std::string& value) {
  const Row* r = find(name);
  if (!r) return false;
  r->set(o, value);
  return true;
}

std::string train_option_value(const TrainOptions& o, const std::string& name) {
  const Row* r = find(name);
  if (!r) throw Error("internal: no training option '" + name + "'");
  return r->get(o);
}

}  // namespace uma::train
