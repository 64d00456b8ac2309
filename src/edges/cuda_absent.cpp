// Where the engine is built without nvcc (CMakeLists.txt, UMA_CUDA_EDGES off):
// no CUDA launchers, so the lean backend runs on the CPU only and CUDA
// engines take the composition (edge_backend_for).
#include "edges/lean_launchers.h"

namespace uma::edges {

const LeanLaunchers* cuda_lean_launchers() { return nullptr; }

}  // namespace uma::edges
