// Fuzz target: text -> extended XYZ frames.  Every bad input must end as
// uma::Error; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/uma_error.h"
#include "io/extxyz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    uma::read_extxyz(in, "fuzz-input");
  } catch (const uma::Error&) {
  }
  return 0;
}
