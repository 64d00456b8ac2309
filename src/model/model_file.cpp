#include "model/model_file.h"

#include <algorithm>

#include "core/uma_error.h"

namespace uma {

double minimum_weight_count(const BackboneConfig& b) {
  const double elements = b.max_num_elements, c = b.sphere_channels, h = b.hidden_channels;
  const double edge = b.edge_channels, basis = b.num_distance_basis;
  const double experts = std::max(1, b.num_experts);
  const double embeddings = elements * c + 2.0 * elements * edge;  // sphere, source, target
  const double per_layer = experts * c * h + basis * edge;  // fc_m0 >= C x H, radial >= K x edge
  return embeddings + b.num_layers * per_layer;
}

ModelConfig model_file_config(const TensorFile& file, const std::string& path) {
  auto fmt = file.metadata.find("format");
  if (fmt == file.metadata.end() || fmt->second != kModelFormat)
    throw Error("'" + path +
                "' is a safetensors file but not a lammps-uma model file "
                "(no 'format: " +
                std::string(kModelFormat) +
                "' metadata); convert fairchem "
                "checkpoints with tools/convert_checkpoint.py");
  auto ver = file.metadata.find("format_version");
  if (ver == file.metadata.end() || ver->second != std::to_string(kModelFormatVersion))
    throw Error("model file '" + path + "' has format version " +
                (ver == file.metadata.end() ? std::string("(none)") : ver->second) +
                "; this build reads version " + std::to_string(kModelFormatVersion));
  auto cfg = file.metadata.find("config");
  if (cfg == file.metadata.end()) throw Error("model file '" + path + "' has no config");
  ModelConfig config;
  try {
    config = parse_model_config(cfg->second);
  } catch (const Error& e) {
    throw Error("model file '" + path + "': " + e.what());
  }

  double held = 0;
  for (const auto& [name, t] : file.tensors) held += static_cast<double>(t.numel());
  const double needed = minimum_weight_count(config.backbone);
  if (needed > held)
    throw Error("model file '" + path + "': its configuration needs at least " +
                std::to_string(static_cast<long long>(std::min(needed, 9e18))) +
                " weights but the file holds " + std::to_string(static_cast<long long>(held)) +
                " values (truncated or corrupt file?)");

  for (const auto& t : config.tasks) {
    if (t.property != Property::kEnergy || t.element_references.empty()) continue;
    auto it = file.tensors.find(t.element_references);
    if (it == file.tensors.end())
      throw Error("model file '" + path + "' lacks the element references '" +
                  t.element_references + "'");
    if (it->second.dim() != 1 || it->second.size(0) < config.backbone.max_num_elements ||
        !it->second.is_floating_point())
      throw Error("model file '" + path + "': element references '" + t.element_references +
                  "' must be a real vector over atomic numbers 0.." +
                  std::to_string(config.backbone.max_num_elements - 1));
  }
  return config;
}

}  // namespace uma
