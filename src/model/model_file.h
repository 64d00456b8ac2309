// The checks a model file passes before any module is built from it: the
// format marker and version in the safetensors metadata, the configuration,
// its element-reference tensors, and a lower bound on the weights the
// configuration needs (so a corrupt or hostile config cannot make the loader
// allocate far more than the file holds).
#pragma once

#include <string>

#include "model/model_config.h"
#include "io/safetensors.h"

namespace uma {

// Throws uma::Error naming `path` and the first problem found.
ModelConfig model_file_config(const TensorFile& file, const std::string& path);

// The fewest weights a backbone of this configuration can have (embedding
// tables, one SO(2) convolution per layer and expert, one radial layer per
// layer); a model file holding fewer values cannot be complete.
double minimum_weight_count(const BackboneConfig& backbone);

}  // namespace uma
