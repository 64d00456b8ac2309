#include "core/atoms.h"

namespace uma {

int64_t atom_count(const Atoms& a) {
  return a.on_device.defined() ? a.on_device.numbers.size(0)
                               : static_cast<int64_t>(a.numbers.size());
}

}  // namespace uma
