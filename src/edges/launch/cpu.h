// The lean kernels on the CPU, one range [begin, end) of an op's items at a
// time (launch/launch.h spreads the ranges over LibTorch's threads): the
// launch template of launch/cpu_range.h, instantiated for every op of
// edges/kernels/ops.h by edges/cpu/ops.cpp.  Free of torch headers, so that
// the GPU's kernels check can call it.
#pragma once

#include <cstdint>

namespace uma::edges::launch {

template <typename Op>
void cpu_range(const Op& op, int64_t begin, int64_t end);

}  // namespace uma::edges::launch
