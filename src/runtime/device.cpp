#include "runtime/device.h"

#include <cstdlib>

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "core/uma_error.h"

namespace uma {

int choose_gpu(const std::string& request, int local_rank, int gpus, int required_gpu) {
  int index = required_gpu >= 0 ? required_gpu : local_rank % gpus;
  if (request.rfind("cuda:", 0) == 0) {
    size_t used = 0;
    int asked = -1;
    try {
      asked = std::stoi(request.substr(5), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != request.size() - 5)
      throw Error("unknown device '" + request + "' (expected cuda:N with N a GPU index)");
    if (asked < 0 || asked >= gpus)
      throw Error("device " + request + " requested, but LibTorch sees " + std::to_string(gpus) +
                  " GPU(s)");
    if (required_gpu >= 0 && asked != required_gpu)
      throw Error("device " + request + " requested, but the atoms' data lives on GPU " +
                  std::to_string(required_gpu) + " (Kokkos's device); use device cuda or cuda:" +
                  std::to_string(required_gpu) + ", or choose the GPU with Kokkos (-k on g N)");
    index = asked;
  }
  if (index >= gpus)
    throw Error("the atoms' data lives on GPU " + std::to_string(index) + ", but LibTorch sees " +
                std::to_string(gpus) + " GPU(s) (CUDA_VISIBLE_DEVICES?)");
  return index;
}

torch::Device resolve_device(const std::string& request, int local_rank, int required_gpu) {
  const bool have_cuda = torch::cuda::is_available();
  if (request == "cpu" || (request == "auto" && !have_cuda && required_gpu < 0)) return torch::kCPU;
  if (request != "auto" && request != "cuda" && request.rfind("cuda:", 0) != 0)
    throw Error("unknown device '" + request + "' (expected auto, cpu, cuda or cuda:N)");
  if (!have_cuda)
    throw Error("device " + request +
                " requested, but LibTorch sees no CUDA device on this machine"
                " (no GPU, no driver, or a CPU-only LibTorch)");
  const int index =
      choose_gpu(request, local_rank, static_cast<int>(torch::cuda::device_count()), required_gpu);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

void make_current(const torch::Device& device) {
  if (!device.is_cuda()) return;
  c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
}

void configure_cublas_workspace(const torch::Device& device) {
  if (device.is_cuda()) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
}

DeterministicScope::DeterministicScope(bool on)
    : on_(on),
      was_on_(at::globalContext().deterministicAlgorithms()),
      was_warn_only_(at::globalContext().deterministicAlgorithmsWarnOnly()),
      was_filling_(at::globalContext().deterministicFillUninitializedMemory()) {
  if (!on_) return;
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  at::globalContext().setDeterministicFillUninitializedMemory(false);
}

DeterministicScope::~DeterministicScope() {
  if (!on_) return;
  at::globalContext().setDeterministicAlgorithms(was_on_, was_warn_only_);
  at::globalContext().setDeterministicFillUninitializedMemory(was_filling_);
}

}  // namespace uma
