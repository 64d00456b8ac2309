// Where the engine is built with nvcc (CMakeLists.txt, UMA_CUDA_EDGES): the
// CUDA kernels' launchers are the lean backend's on CUDA.
#include "edges/lean_launchers.h"

namespace uma::edges {

const LeanLaunchers* cuda_lean_launchers() { return &cuda_kernel_launchers(); }

}  // namespace uma::edges
