// `uma init`: a model file with seeded random weights for a model
// configuration (the JSON a model file keeps as its `config` metadata).  Its
// energies and forces mean nothing; it exists to time full-size shapes where
// a real model file cannot travel (bench/uma-s-1p1-shape.json).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "api/uma.h"

namespace uma::tool {

int init(const InitArgs& a) {
  std::ifstream in(a.config);
  if (!in) throw Error("cannot open model configuration '" + a.config + "'");
  std::stringstream text;
  text << in.rdbuf();
  // Accept the config itself or an object holding it under "config" (the
  // layout of a model file's metadata).
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error("model configuration '" + a.config + "' is not JSON: " + e.what());
  }
  if (j.is_object() && j.contains("config") && !j.contains("backbone")) {
    const auto& inner = j["config"];
    j = inner.is_string() ? nlohmann::json::parse(inner.get<std::string>()) : inner;
  }
  ModelConfig config;
  try {
    config = parse_model_config(j.dump());
  } catch (const Error& e) {
    throw Error("model configuration '" + a.config + "': " + e.what());
  }

  torch::manual_seed(a.seed);
  UmaModel model(config);
  int64_t params = 0;
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->named_parameters()) {
      auto& t = p.value();
      // uniform in +-1/sqrt(fan_in) for weights, +-0.5 for vectors and for
      // the per-element embedding tables
      const double bound = t.dim() >= 2 ? 1.0 / std::sqrt(static_cast<double>(t.size(-1))) : 0.5;
      const bool element_table = p.key().find("embedding") != std::string::npos && t.dim() == 2 &&
                                 t.size(0) >= config.backbone.max_num_elements;
      t.uniform_(element_table ? -0.5 : -bound, element_table ? 0.5 : bound);
      params += t.numel();
    }
  }
  // Energy tasks that name per-element references get zeros, so that the
  // file loads (the references only shift the energy).
  for (const auto& task : config.tasks) {
    if (task.property != Property::kEnergy || task.element_references.empty()) continue;
    for (const auto& ds : task.datasets)
      model->set_element_references(
          ds, torch::zeros({config.backbone.max_num_elements}, torch::kFloat64));
  }
  save_model(model, a.out);
  std::printf("wrote %s: %lld parameters, seeded random weights (seed %llu): for timing only\n",
              a.out.c_str(), static_cast<long long>(params),
              static_cast<unsigned long long>(a.seed));
  return 0;
}

}  // namespace uma::tool
