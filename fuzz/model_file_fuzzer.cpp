// Fuzz target: bytes -> safetensors container -> model-file checks (format
// metadata, configuration JSON, element references, weight count).  Every bad
// input must end as uma::Error; anything else (another exception, a crash, a
// sanitizer report, a hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/uma_error.h"
#include "model/model_file.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const uma::TensorFile file = uma::read_safetensors(in, "fuzz-input");
    uma::model_file_config(file, "fuzz-input");
  } catch (const uma::Error&) {
  }
  return 0;
}
