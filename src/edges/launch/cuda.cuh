// The CUDA launch template (launch/cuda.h): one kernel per op and variant,
// whose threads each run the op's cuda_run (launch/grid.h) over the op's
// grid; a launch error raised as uma::Error with the kernel's name.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/uma_error.h"
#include "edges/launch/cuda.h"
#include "edges/launch/grid.h"

namespace uma::edges::launch {

template <int V, typename Op>
__global__ void run_op(const Op op) {
  cuda_run<V>(op);  // the op's, found beside it (edges/kernels/)
}

template <typename Op>
void cuda_launch(const Op& op, void* stream) {
  const Grid grid = op.cuda_grid();
  if (grid.blocks == 0) return;
  with_variant<Op::kVariants>(op.variant(), [&](auto v) {
    run_op<decltype(v)::value>
        <<<grid.blocks, grid.threads, 0, static_cast<cudaStream_t>(stream)>>>(op);
  });
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(std::string("CUDA launch of ") + Op::kName + " failed: " + cudaGetErrorString(err));
}

}  // namespace uma::edges::launch
