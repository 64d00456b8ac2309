#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/uma_error.h"

namespace uma {
namespace {

Property parse_property(const std::string& task, const std::string& name) {
  for (Property p : {Property::kEnergy, Property::kForces, Property::kStress})
    if (name == property_name(p)) return p;
  throw Error("model config: task '" + task + "' predicts '" + name +
              "'; this engine knows the properties energy, forces and stress");
}

using nlohmann::json;

template <typename T>
T get_or(const json& j, const char* key, T fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if constexpr (std::is_same_v<T, int>) {
    const json& v = j[key];
    if (!v.is_number_integer() || v.get<int64_t>() < std::numeric_limits<int>::min() ||
        v.get<int64_t>() > std::numeric_limits<int>::max())
      throw Error(std::string("model config: key '") + key + "' must be an integer");
  }
  try {
    return j[key].get<T>();
  } catch (const json::exception&) {
    throw Error(std::string("model config: key '") + key + "' has the wrong type");
  }
}

// A key whose value changes the model's results: no default.
template <typename T>
T required(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null())
    throw Error(std::string("model config: required key 'backbone.") + key + "' is missing");
  return get_or<T>(j, key, T{});
}

void require_equal(const json& b, const char* key, const std::string& want) {
  if (b.contains(key) && !b[key].is_null() && !b[key].is_string())
    throw Error(std::string("model config: ") + key + " must be a string (only '" + want +
                "' is supported)");
  if (b.contains(key) && !b[key].is_null() && b[key].get<std::string>() != want)
    throw Error(std::string("model config: ") + key + " '" + b[key].get<std::string>() +
                "' is not supported (only '" + want + "')");
}

// Channels [begin, end) of a balanced-channel key, within [0, channels).
std::pair<int, int> channel_range(const json& b, const char* key, int channels) {
  if (!b.contains(key) || b[key].is_null()) return {0, 0};
  std::vector<int> ch;
  try {
    ch = b[key].get<std::vector<int>>();
  } catch (const json::exception&) {
    throw Error(std::string("model config: ") + key + " must be a list of channel indices");
  }
  if (ch.empty()) return {0, 0};
  std::sort(ch.begin(), ch.end());
  for (size_t i = 1; i < ch.size(); ++i)
    if (ch[i] != ch[i - 1] + 1)
      throw Error(std::string("model config: ") + key + " must be contiguous channels");
  if (ch.front() < 0 || ch.back() >= channels)
    throw Error(std::string("model config: ") + key + " must lie in 0.." +
                std::to_string(channels - 1) + ", got " + std::to_string(ch.front()) + ".." +
                std::to_string(ch.back()));
  return {ch.front(), ch.back() + 1};
}

}  // namespace

std::vector<std::string> ModelConfig::dataset_names() const {
  std::vector<std::string> names;
  for (const auto& kv : backbone.dataset_mapping) names.push_back(kv.first);
  return names;
}

std::string ModelConfig::dataset_list() const {
  std::string list;
  for (const auto& name : dataset_names()) list += (list.empty() ? "" : ", ") + name;
  return list;
}

std::string ModelConfig::unknown_task(const std::string& task) const {
  return "unknown task '" + task + "'; the model has: " + dataset_list();
}

namespace {

ModelConfig config_from_json(const json& j, const std::string& json_text) {
  ModelConfig c;
  c.raw = json_text;
  if (!j.is_object() || !j.contains("backbone")) throw Error("model config: no 'backbone' section");
  c.model_id = get_or<std::string>(j, "model_id", "");
  const json& b = j["backbone"];
  BackboneConfig& bb = c.backbone;
  bb.max_num_elements = required<int>(b, "max_num_elements");
  bb.sphere_channels = required<int>(b, "sphere_channels");
  bb.hidden_channels = required<int>(b, "hidden_channels");
  bb.lmax = required<int>(b, "lmax");
  bb.mmax = required<int>(b, "mmax");
  bb.num_layers = required<int>(b, "num_layers");
  bb.edge_channels = required<int>(b, "edge_channels");
  bb.num_distance_basis = required<int>(b, "num_distance_basis");
  bb.num_experts = get_or(b, "num_experts", 0);  // absent: a plain (already merged) backbone
  bb.max_neighbors = required<int>(b, "max_neighbors");
  bb.cutoff = required<double>(b, "cutoff");
  bb.use_dataset_embedding = get_or(b, "use_dataset_embedding", true);
  bb.use_composition_embedding = get_or(b, "use_composition_embedding", false);
  bb.composition_include_self = get_or(j, "composition_mean_include_self", false);
  if (b.contains("dataset_mapping") && b["dataset_mapping"].is_object())
    bb.dataset_mapping = b["dataset_mapping"].get<std::map<std::string, std::string>>();
  else if (b.contains("dataset_list") && b["dataset_list"].is_array())
    for (const auto& d : b["dataset_list"]) bb.dataset_mapping[d] = d;
  std::tie(bb.charge_channel_begin, bb.charge_channel_end) =
      channel_range(b, "charge_balanced_channels", bb.sphere_channels);
  std::tie(bb.spin_channel_begin, bb.spin_channel_end) =
      channel_range(b, "spin_balanced_channels", bb.sphere_channels);

  if (bb.lmax != 2 || bb.mmax != 2)
    throw Error("model config: only lmax = mmax = 2 (UMA-S) is supported, got lmax " +
                std::to_string(bb.lmax) + ", mmax " + std::to_string(bb.mmax));
  require_equal(b, "act_type", "gate");
  require_equal(b, "ff_type", "spectral");
  require_equal(b, "norm_type", "rms_norm_sh");
  require_equal(b, "chg_spin_emb_type", "rand_emb");
  require_equal(b, "distance_function", "gaussian");
  if (get_or<std::string>(b, "moe_expert_coefficient_norm", "softmax") != "softmax")
    throw Error("model config: only softmax expert coefficients are supported");
  if (get_or<std::string>(b, "moe_type", "so2") != "so2")
    throw Error("model config: only moe_type 'so2' is supported");
  if (bb.num_layers < 1 || bb.sphere_channels < 1 || bb.hidden_channels < 1 ||
      bb.edge_channels < 1 || bb.num_distance_basis < 2 || bb.max_num_elements < 1 ||
      bb.max_neighbors < 1 || bb.num_experts < 0)
    throw Error("model config: sizes must be positive");
  if (!(bb.cutoff > 0) || !std::isfinite(bb.cutoff))
    throw Error("model config: the cutoff must be a positive finite distance");
  if (bb.use_dataset_embedding && bb.dataset_mapping.empty())
    throw Error("model config: dataset embedding is on but no datasets are listed");

  if (j.contains("head")) {
    const json& h = j["head"];
    const auto kind = get_or<std::string>(h, "kind", "single");
    if (kind == "single")
      c.head.kind = HeadKind::kSingle;
    else if (kind == "dataset_moe")
      c.head.kind = HeadKind::kDatasetMoE;
    else
      throw Error("model config: unknown head kind '" + kind + "'");
    c.head.datasets = get_or<std::vector<std::string>>(h, "datasets", {});
  }
  if (c.head.kind == HeadKind::kDatasetMoE && c.head.datasets.empty())
    throw Error("model config: a dataset_moe head needs its dataset list");

  if (j.contains("tasks"))
    for (const auto& t : j["tasks"]) {
      TaskConfig tc;
      tc.name = get_or<std::string>(t, "name", "");
      tc.property = parse_property(tc.name, get_or<std::string>(t, "property", ""));
      tc.datasets = get_or<std::vector<std::string>>(t, "datasets", {});
      if (t.contains("normalizer") && t["normalizer"].is_object()) {
        tc.mean = get_or(t["normalizer"], "mean", 0.0);
        tc.rmsd = get_or(t["normalizer"], "rmsd", 1.0);
      }
      tc.element_references = get_or<std::string>(t, "element_references", "");
      c.tasks.push_back(std::move(tc));
    }
  return c;
}

}  // namespace

const char* property_name(Property p) {
  switch (p) {
    case Property::kEnergy:
      return "energy";
    case Property::kForces:
      return "forces";
    case Property::kStress:
      return "stress";
  }
  return "?";
}

ModelConfig parse_model_config(const std::string& json_text) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception&) {
    throw Error("the model config is not JSON");
  }
  try {
    return config_from_json(j, json_text);
  } catch (const json::exception& e) {
    // A value of the wrong kind somewhere no specific check names.
    throw Error(std::string("model config: malformed value (") + e.what() + ")");
  }
}

}  // namespace uma
