// The model's configuration, as stored in the model file's JSON metadata.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace uma {

constexpr const char* kModelFormat = "lammps-uma-model";
constexpr int kModelFormatVersion = 1;

struct BackboneConfig {
  int max_num_elements = 100;
  int sphere_channels = 128;  // C
  int hidden_channels = 128;  // H
  int lmax = 2;
  int mmax = 2;
  int num_layers = 4;
  int edge_channels = 128;
  int num_distance_basis = 64;  // K
  int num_experts = 0;          // X; 0 = plain (already merged) backbone
  int max_neighbors = 300;
  double cutoff = 6.0;
  bool use_dataset_embedding = true;
  bool use_composition_embedding = false;
  bool composition_include_self = false;  // the UMA-S-1.2 composition-mean quirk
  // dataset (task) name -> dataset-embedding name
  std::map<std::string, std::string> dataset_mapping;
  int charge_channel_begin = 0, charge_channel_end = 0;
  int spin_channel_begin = 0, spin_channel_end = 0;
};

enum class HeadKind { kSingle, kDatasetMoE };

struct HeadConfig {
  HeadKind kind = HeadKind::kSingle;
  std::vector<std::string> datasets;  // for kDatasetMoE: expert order
};

// What a task of the model file predicts; the loss, the metrics and the
// normalisers dispatch on it.  A model file naming another property is refused
// when it is read.
enum class Property { kEnergy, kForces, kStress };
constexpr int kPropertyCount = 3;

// "energy", "forces" or "stress".
const char* property_name(Property p);

struct TaskConfig {
  std::string name;  // e.g. "omat_energy"
  Property property = Property::kEnergy;
  std::vector<std::string> datasets;
  double mean = 0.0;
  double rmsd = 1.0;
  std::string element_references;  // tensor name, empty when none
};

struct ModelConfig {
  std::string model_id;
  BackboneConfig backbone;
  HeadConfig head;
  std::vector<TaskConfig> tasks;
  std::string raw;  // the whole config JSON text, kept for writing back

  // Dataset names a user may ask for (the keys of dataset_mapping, sorted).
  std::vector<std::string> dataset_names() const;
  std::string dataset_list() const;  // the names joined with ", ", for messages
  // The one message for a task the model has no head for ("unknown task ...").
  std::string unknown_task(const std::string& task) const;
};

// Parses and validates; throws uma::Error naming the offending key.
// Throws uma::Error when the text is not JSON or lacks a required field.
ModelConfig parse_model_config(const std::string& json_text);

}  // namespace uma
