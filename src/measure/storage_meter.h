// Counts the bytes of CPU tensor storage: while alive, every CPU allocation
// goes through it (it installs itself as LibTorch's CPU allocator and hands
// the work to the one it replaced).  It keeps the live and peak bytes and
// the bytes allocated in total and in blocks of at least `large_bytes`
// (edge-sized tensors, for example).  Counters are global and atomic:
// intra-op threads allocate too, and storage made while the meter was
// installed may be freed after it is gone.  One meter at a time; a new one
// starts from a peak equal to what is live and zero totals.
#pragma once

#include <atomic>
#include <cstdint>

#include <c10/core/Allocator.h>

namespace uma {

class CpuStorageMeter final : public c10::Allocator {
 public:
  explicit CpuStorageMeter(int64_t large_bytes = 0);
  ~CpuStorageMeter() override;
  CpuStorageMeter(const CpuStorageMeter&) = delete;
  CpuStorageMeter& operator=(const CpuStorageMeter&) = delete;

  void reset();  // peak := live; allocated totals := 0
  int64_t live() const { return live_; }
  int64_t peak() const { return peak_; }
  int64_t allocated() const { return allocated_; }
  int64_t allocated_large() const { return allocated_large_; }

  c10::DataPtr allocate(size_t n) override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

 private:
  static void release(void* ctx);
  c10::Allocator* inner_;
  int64_t large_bytes_;
  static inline std::atomic<int64_t> live_{0}, peak_{0}, allocated_{0}, allocated_large_{0};
};

}  // namespace uma
