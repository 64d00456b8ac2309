// A 3x3 matrix of doubles held by value: a cell whose rows are the lattice
// vectors, or a virial or stress tensor.
#pragma once

#include <array>

namespace uma {

using Matrix3 = std::array<std::array<double, 3>, 3>;  // rows are lattice vectors

}  // namespace uma
