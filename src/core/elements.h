// Chemical element symbols <-> atomic numbers.
#pragma once

#include <string>

#include <torch/torch.h>

namespace uma {

// 0 when the symbol is not an element.
int atomic_number(const std::string& symbol);
// "" when z is out of range.
std::string element_symbol(int z);

// [Z + 1] int64 on numbers' device: how many of `numbers` ([n] int64) equal
// each of 0..Z-1, then how many lie outside 0..Z-1.  A device scatter, so no
// host synchronisation (torch::bincount reads the minimum and maximum back).
torch::Tensor count_atomic_numbers(const torch::Tensor& numbers, int64_t Z);

}  // namespace uma
