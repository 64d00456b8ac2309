// Where the engine is built without nvcc (CMakeLists.txt, UMA_CUDA_EDGES
// off): no CUDA launches, so the lean backend runs on the CPU only and CUDA
// engines take the composition (edge_backend_for); a launch that comes here
// anyway is refused.
#include <string>

#include "core/uma_error.h"
#include "edges/kernels/ops.h"
#include "edges/launch/cuda.h"

namespace uma::edges::launch {

template <typename Op>
void cuda_launch(const Op&, void*) {
  throw Error(std::string("internal: the lean kernel ") + Op::kName +
              " was not compiled for CUDA (the engine was built without nvcc)");
}

#define UMA_CUDA_ABSENT(Op)                                    \
  template void cuda_launch(const kernels::Op<float>&, void*); \
  template void cuda_launch(const kernels::Op<double>&, void*);
UMA_LEAN_OPS(UMA_CUDA_ABSENT)
#undef UMA_CUDA_ABSENT

bool cuda_launches_built() { return false; }

}  // namespace uma::edges::launch
