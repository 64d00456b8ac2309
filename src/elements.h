// Chemical element symbols <-> atomic numbers.
#pragma once

#include <string>

namespace uma {

// 0 when the symbol is not an element.
int atomic_number(const std::string& symbol);
// "" when z is out of range.
std::string element_symbol(int z);

}  // namespace uma
