#include "host_reads.h"

#include <atomic>

namespace uma {
namespace {
std::atomic<int64_t> g_reads{0};
}

int64_t host_read_count() { return g_reads.load(); }
void reset_host_read_count() { g_reads.store(0); }

torch::Tensor to_host(const torch::Tensor& t) {
  ++g_reads;
  return t.detach().to(torch::kCPU).contiguous();
}

double read_scalar(const torch::Tensor& t) {
  ++g_reads;
  return t.detach().to(torch::kCPU).to(torch::kFloat64).item<double>();
}

int64_t read_int(const torch::Tensor& t) {
  ++g_reads;
  return t.detach().to(torch::kCPU).to(torch::kInt64).item<int64_t>();
}

}  // namespace uma
