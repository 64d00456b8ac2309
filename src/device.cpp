#include "device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "uma_error.h"

namespace uma {

torch::Device resolve_device(const std::string& request, int local_rank) {
  const bool have_cuda = torch::cuda::is_available();
  if (request == "cpu" || (request == "auto" && !have_cuda)) return torch::kCPU;
  if (request != "auto" && request != "cuda" && request.rfind("cuda:", 0) != 0)
    throw Error("unknown device '" + request + "' (expected auto, cpu, cuda or cuda:N)");
  if (!have_cuda)
    throw Error("device " + request + " requested, but LibTorch sees no CUDA device on this machine"
                " (no GPU, no driver, or a CPU-only LibTorch)");
  const int count = static_cast<int>(torch::cuda::device_count());
  int index = local_rank % count;
  if (request.rfind("cuda:", 0) == 0) {
    try {
      index = std::stoi(request.substr(5));
    } catch (const std::exception&) {
      throw Error("unknown device '" + request + "' (expected cuda:N with N a GPU index)");
    }
    if (index < 0 || index >= count)
      throw Error("device " + request + " requested, but LibTorch sees " + std::to_string(count) + " GPU(s)");
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

void make_current(const torch::Device& device) {
  if (!device.is_cuda()) return;
  c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
}

}  // namespace uma
