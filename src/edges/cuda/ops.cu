// The CUDA launch template (launch/cuda.cuh) for every lean kernel
// (kernels/ops.h), float and double: compiled into the engine where it is
// built with nvcc (CMakeLists.txt, UMA_CUDA_EDGES).
#include "edges/kernels/ops.h"
#include "edges/launch/cuda.cuh"

namespace uma::edges::launch {

#define UMA_CUDA_LAUNCH(Op)                                    \
  template void cuda_launch(const kernels::Op<float>&, void*); \
  template void cuda_launch(const kernels::Op<double>&, void*);
UMA_LEAN_OPS(UMA_CUDA_LAUNCH)
#undef UMA_CUDA_LAUNCH

bool cuda_launches_built() { return true; }

}  // namespace uma::edges::launch
