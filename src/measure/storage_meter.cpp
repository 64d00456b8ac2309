#include "measure/storage_meter.h"

#include <c10/core/CPUAllocator.h>

namespace uma {
namespace {

constexpr uint8_t kPriority = 100;  // above LibTorch's default (0)

struct Record {
  c10::DataPtr inner;
  int64_t bytes;
};

}  // namespace

CpuStorageMeter::CpuStorageMeter(int64_t large_bytes)
    : inner_(c10::GetCPUAllocator()), large_bytes_(large_bytes) {
  reset();  // the counters are global: forget an earlier meter's peak and totals
  c10::SetCPUAllocator(this, kPriority);
}

CpuStorageMeter::~CpuStorageMeter() { c10::SetCPUAllocator(inner_, kPriority); }

void CpuStorageMeter::reset() {
  peak_ = live_.load();
  allocated_ = 0;
  allocated_large_ = 0;
}

c10::DataPtr CpuStorageMeter::allocate(size_t n) {
  auto* record = new Record{inner_->allocate(n), static_cast<int64_t>(n)};
  const int64_t now = live_ += record->bytes;
  for (int64_t seen = peak_; now > seen && !peak_.compare_exchange_weak(seen, now);) {
  }
  allocated_ += record->bytes;
  if (large_bytes_ > 0 && record->bytes >= large_bytes_) allocated_large_ += record->bytes;
  void* data = record->inner.get();
  return {data, record, &release, record->inner.device()};
}

void CpuStorageMeter::copy_data(void* dest, const void* src, std::size_t count) const {
  default_copy_data(dest, src, count);
}

void CpuStorageMeter::release(void* ctx) {
  auto* record = static_cast<Record*>(ctx);
  live_ -= record->bytes;
  delete record;
}

}  // namespace uma
