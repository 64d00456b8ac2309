// The CPU's launch template (launch/cpu.h): an op's range run by its
// cpu_run (launch/grid.h) for the call's variant, in a function compiled once
// per vector width and picked at load time for the running CPU, so that the
// op's channel loops (inlined) run at that width.
#pragma once

#include <cstdint>

#include "edges/launch/cpu.h"
#include "edges/launch/grid.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define UMA_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define UMA_VECTOR_CLONES
#endif

namespace uma::edges::launch {

template <int V, typename Op>
UMA_VECTOR_CLONES void cpu_variant_range(const Op& op, int64_t begin, int64_t end) {
  cpu_run<V>(op, begin, end);  // the op's, found beside it (edges/kernels/)
}

template <typename Op>
void cpu_range(const Op& op, int64_t begin, int64_t end) {
  with_variant<Op::kVariants>(
      op.variant(), [&](auto v) { cpu_variant_range<decltype(v)::value>(op, begin, end); });
}

}  // namespace uma::edges::launch
