#include "runtime/transfers.h"

#include <atomic>
#include <cmath>

namespace uma {
namespace {
std::atomic<int64_t> g_reads{0};
std::atomic<int64_t> g_uploads{0};
std::atomic<int64_t> g_read_bytes{0};
std::atomic<int64_t> g_upload_bytes{0};

int64_t bytes(const torch::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }
void count_read(const torch::Tensor& t) {
  ++g_reads;
  g_read_bytes += bytes(t);
}
void count_upload(const torch::Tensor& t) {
  ++g_uploads;
  g_upload_bytes += bytes(t);
}

bool pinned_wanted(const torch::Device& device) { return device.is_cuda(); }
}  // namespace

int64_t host_read_count() { return g_reads.load(); }
int64_t upload_count() { return g_uploads.load(); }
int64_t host_read_bytes() { return g_read_bytes.load(); }
int64_t upload_bytes() { return g_upload_bytes.load(); }
void reset_transfer_counts() {
  g_reads.store(0);
  g_uploads.store(0);
  g_read_bytes.store(0);
  g_upload_bytes.store(0);
}

torch::Tensor to_host(const torch::Tensor& t) {
  count_read(t);
  return t.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true).contiguous();
}

torch::Tensor upload(const torch::Tensor& host, const torch::TensorOptions& options) {
  TORCH_CHECK(host.device().is_cpu(), "uma::upload takes a CPU tensor");
  count_upload(host);
  const auto device = options.device();
  if (!pinned_wanted(device))
    return host.detach().to(options, /*non_blocking=*/false, /*copy=*/true);
  // Convert on the host first so the device receives its own dtype.
  auto src = host.detach().to(options.dtype(), /*non_blocking=*/false, /*copy=*/false).contiguous();
  auto pinned = torch::empty(src.sizes(), src.options().pinned_memory(true));
  pinned.copy_(src);
  return pinned.to(options.device(), /*non_blocking=*/true, /*copy=*/true);
}

torch::Tensor upload(const std::vector<double>& values, const torch::TensorOptions& options) {
  auto host = torch::from_blob(const_cast<double*>(values.data()),
                               {static_cast<int64_t>(values.size())}, torch::kFloat64);
  return upload(host, options);
}

torch::Tensor upload(const std::vector<int64_t>& values, const torch::TensorOptions& options) {
  auto host = torch::from_blob(const_cast<int64_t*>(values.data()),
                               {static_cast<int64_t>(values.size())}, torch::kLong);
  return upload(host, options);
}

double* StagingBuffer::host(int64_t n, const torch::Device& device) {
  // A fresh block from the (caching) allocator each step: on CUDA, a pinned
  // block whose previous copy may still be in flight is never handed out.
  staged_ = torch::empty(
      {n}, torch::TensorOptions().dtype(torch::kFloat64).pinned_memory(pinned_wanted(device)));
  return staged_.data_ptr<double>();
}

int64_t StagingBuffer::put(int64_t offset, const torch::Tensor& values) {
  TORCH_CHECK(values.device().is_cpu(), "StagingBuffer::put takes a CPU tensor");
  const auto v = values.detach().to(torch::kFloat64).contiguous();
  TORCH_CHECK(offset + v.numel() <= staged_.numel(), "StagingBuffer::put past the end");
  const double* from = v.data_ptr<double>();
  double* to = staged_.data_ptr<double>() + offset;
  int64_t bad = 0;
  for (int64_t i = 0; i < v.numel(); ++i) {
    to[i] = from[i];
    bad += std::isfinite(from[i]) ? 0 : 1;
  }
  return bad;
}

torch::Tensor StagingBuffer::send(const torch::TensorOptions& options) {
  TORCH_CHECK(staged_.defined(), "StagingBuffer::send before host()");
  count_upload(staged_);
  auto out =
      staged_.to(options.device(), /*non_blocking=*/options.device().is_cuda(), /*copy=*/true);
  staged_ = torch::Tensor();
  return out;
}

torch::Tensor& HostMirror::read(const torch::Tensor& t) {
  if (!host_.defined() || host_.sizes() != t.sizes() || host_.scalar_type() != t.scalar_type()) {
    host_ = torch::empty(
        t.sizes(),
        torch::TensorOptions().dtype(t.scalar_type()).pinned_memory(pinned_wanted(t.device())));
    ++allocations_;
  }
  count_read(t);
  host_.copy_(t.detach(), /*non_blocking=*/false);
  return host_;
}

void HostMirror::write(torch::Tensor& t) {
  TORCH_CHECK(host_.defined() && host_.sizes() == t.sizes(),
              "HostMirror::write before read() of this shape");
  count_upload(host_);
  torch::NoGradGuard no_grad;
  t.copy_(host_, /*non_blocking=*/t.device().is_cuda());
}

torch::Tensor move_bulk(const torch::Tensor& t, const torch::TensorOptions& options) {
  if (options.device().is_cpu() && !t.device().is_cpu())
    count_read(t);
  else
    count_upload(t);
  return t.detach().to(options, /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace uma
