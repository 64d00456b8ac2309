#include "model/model.h"

#include <set>

#include "core/uma_error.h"
#include "model/model_file.h"
#include "io/safetensors.h"
#include "runtime/transfers.h"

namespace uma {

namespace {

// Normalizers per dataset from the task list (element references are attached
// by the loader, which has the tensors).
std::map<std::string, DatasetOutputs> dataset_outputs(const ModelConfig& config) {
  std::map<std::string, DatasetOutputs> out;
  for (const auto& ds : config.dataset_names()) {
    DatasetOutputs o;
    for (const auto& t : config.tasks) {
      if (std::find(t.datasets.begin(), t.datasets.end(), ds) == t.datasets.end()) continue;
      switch (t.property) {
        case Property::kEnergy:
          o.energy_mean = t.mean;
          o.energy_rmsd = t.rmsd;
          break;
        case Property::kForces:
          o.forces_mean = t.mean;
          o.forces_rmsd = t.rmsd;
          break;
        case Property::kStress:
          o.stress_mean = t.mean;
          o.stress_rmsd = t.rmsd;
          break;
      }
    }
    out[ds] = o;
  }
  return out;
}

bool ignorable(const std::string& name) {
  return name.rfind("tasks.", 0) == 0 || name.rfind("backbone.Jd_", 0) == 0;
}

}  // namespace

UmaModelImpl::UmaModelImpl(const ModelConfig& config) : config_(config) {
  backbone_ = register_module("backbone", Backbone(config.backbone));
  auto heads = register_module("output_heads", NamedModule());
  auto wrapper = heads->add("energyandforcehead", NamedModule());
  head_ = wrapper->add("head", EnergyHead(config.head, config.backbone.sphere_channels,
                                          config.backbone.hidden_channels));
  outputs_ = dataset_outputs(config);
}

torch::Tensor UmaModelImpl::atom_energies(const BatchTensors& in, const EdgeInput& edges,
                                          const torch::Tensor& system_emb,
                                          const edges::MoleContext& ctx,
                                          torch::Tensor* node_scalars) {
  auto node = backbone_->forward(in, edges, system_emb, ctx);
  if (node_scalars) *node_scalars = node.select(1, 0);
  return head_->forward(node, in.datasets, in.atom_offsets);
}

bool UmaModelImpl::has_dataset(const std::string& dataset) const {
  return config_.backbone.dataset_mapping.count(dataset) > 0;
}

const DatasetOutputs& UmaModelImpl::outputs(const std::string& dataset) const {
  static const DatasetOutputs identity;
  auto it = outputs_.find(dataset);
  return it == outputs_.end() ? identity : it->second;
}

UmaModel load_model(const std::string& path) {
  TensorFile file = read_safetensors(path);
  const ModelConfig config = model_file_config(file, path);
  UmaModel model(config);
  for (const auto& t : config.tasks) {
    if (t.property != Property::kEnergy || t.element_references.empty()) continue;
    const auto& refs = file.tensors.at(t.element_references);  // checked by model_file_config
    for (const auto& ds : t.datasets) model->set_element_references(ds, refs.to(torch::kFloat64));
  }

  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& p : model->named_parameters(true)) {
    auto it = file.tensors.find(p.key());
    if (it == file.tensors.end())
      throw Error("model file '" + path + "' lacks tensor '" + p.key() + "'");
    if (it->second.sizes() != p.value().sizes())
      throw Error("model file '" + path + "': tensor '" + p.key() + "' has shape " +
                  c10::str(it->second.sizes()) + ", the configuration needs " +
                  c10::str(p.value().sizes()));
    const auto& stored = it->second;
    const auto value = stored.is_floating_point() ? stored.clone() : stored.to(torch::kFloat32);
    p.value().set_data(value);  // host data
    used.insert(p.key());
  }
  for (const auto& [name, t] : file.tensors)
    if (!used.count(name) && !ignorable(name))
      throw Error("model file '" + path + "' has unexpected tensor '" + name +
                  "' (a different architecture?)");
  return model;
}

void copy_weights(const UmaModel& from, UmaModel& to) {
  const auto source = from->named_parameters(true);
  auto target = to->named_parameters(true);
  if (source.size() != target.size())
    throw Error("copy_weights: the models have different architectures");
  torch::NoGradGuard no_grad;
  for (auto& p : target) {
    const torch::Tensor* value = source.find(p.key());
    if (!value || !value->sizes().equals(p.value().sizes()))
      throw Error("copy_weights: the models differ in '" + p.key() + "'");
    p.value().copy_(*value);  // bulk transfer: once, when a fix starts (precision and device)
  }
}

void save_model(const UmaModel& model, const std::string& path) {
  TensorFile file;
  for (const auto& p : model->named_parameters(true))
    file.tensors[p.key()] =
        to_host(p.value());  // in the model's precision: float32, or float64 (accepted)
  for (const auto& t : model->config().tasks)
    if (!t.element_references.empty())
      for (const auto& ds : t.datasets)
        if (model->outputs(ds).element_references.defined())
          file.tensors[t.element_references] = model->outputs(ds).element_references;
  file.metadata["format"] = kModelFormat;
  file.metadata["format_version"] = std::to_string(kModelFormatVersion);
  file.metadata["config"] = model->config().raw;
  write_safetensors(path, file);
}

}  // namespace uma
