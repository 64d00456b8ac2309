// Where the engine is built with nvcc (CMakeLists.txt, UMA_CUDA_EDGES): the
// CUDA kernels' launchers are the lean backend's on CUDA.
#include "edges/lean_launchers.h"

namespace uma::nn {

const LeanLaunchers* cuda_lean_launchers() { return &cuda_kernel_launchers(); }

}  // namespace uma::nn
