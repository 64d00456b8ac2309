// The lean kernels on CUDA: one launch of an op over its grid, enqueued on
// `stream` (a cudaStream_t) and asynchronous; the launch template of
// launch/cuda.cuh, instantiated for every op of edges/kernels/ops.h by
// edges/cuda/ops.cu where the engine is compiled with nvcc (else
// edges/cuda_absent.cpp's refuse).  Free of CUDA and torch headers, so that
// host code can call it.
#pragma once

namespace uma::edges::launch {

template <typename Op>
void cuda_launch(const Op& op, void* stream);

// Whether this engine was compiled with the CUDA launches.
bool cuda_launches_built();

}  // namespace uma::edges::launch
