// The CPU's launch template (launch/cpu_range.h) for every lean kernel
// (kernels/ops.h), float and double.  Free of torch headers.
#include "edges/kernels/ops.h"
#include "edges/launch/cpu_range.h"

namespace uma::edges::launch {

#define UMA_CPU_RANGE(Op)                                               \
  template void cpu_range(const kernels::Op<float>&, int64_t, int64_t); \
  template void cpu_range(const kernels::Op<double>&, int64_t, int64_t);
UMA_LEAN_OPS(UMA_CPU_RANGE)
#undef UMA_CPU_RANGE

}  // namespace uma::edges::launch
