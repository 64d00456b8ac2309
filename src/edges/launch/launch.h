// A lean kernel's launch on the device of its tensors, one template for every
// op (launch/grid.h): on the CPU the op's items spread over LibTorch's
// intra-op threads in ranges of at least Op::kCpuGrain (launch/cpu.h); on
// CUDA one grid on the device's current stream, asynchronous, reading
// nothing back (launch/cuda.h).  An op that keeps per-thread buffers on the
// CPU gives for_thread(t), the op as thread t runs it.
#pragma once

#include <ATen/Parallel.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/torch.h>

#include "core/uma_error.h"
#include "edges/launch/cpu.h"
#include "edges/launch/cuda.h"

namespace uma::edges::launch {

// The lean kernels run on the CPU, and on CUDA where the engine was compiled
// with nvcc: elsewhere this throws uma::Error naming the way out.
inline void require_lean_kernels(const torch::Device& device) {
  if (device.is_cpu() || (device.is_cuda() && cuda_launches_built())) return;
  if (device.is_cuda())
    throw Error(
        "the lean edge operators on CUDA need an engine built with nvcc "
        "(edge_ops reference runs on every device)");
  throw Error("the lean edge operators run on the CPU and on CUDA, not on " + device.str());
}

template <typename Op>
void run(const Op& op, const torch::Device& device) {
  if (device.is_cpu()) {
    at::parallel_for(0, op.cpu_items(), Op::kCpuGrain, [&](int64_t begin, int64_t end) {
      if constexpr (requires { op.for_thread(0); })
        cpu_range(op.for_thread(at::get_thread_num()), begin, end);
      else
        cpu_range(op, begin, end);
    });
    return;
  }
  require_lean_kernels(device);
  const c10::DeviceGuard on(device);
  cuda_launch(op, c10::impl::getDeviceGuardImpl(device.type())->getStream(device).native_handle());
}

}  // namespace uma::edges::launch
