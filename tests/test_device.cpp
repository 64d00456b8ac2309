// Device decisions that a GPU run depends on, checked where no GPU is: which
// GPU a rank takes, compositions counted without a host synchronisation,
// deterministic mode scoped to training, and the synchronisation guard of the
// CUDA test runs.
#include <gtest/gtest.h>

#include "runtime/device.h"
#include "core/elements.h"
#include "graph/geometry_matmul.h"
#include "test_util.h"

namespace uma::test {
namespace {

TEST(DeviceChoice, NodeLocalRankOrKokkosGpu) {
  EXPECT_EQ(choose_gpu("cuda", 0, 4), 0);
  EXPECT_EQ(choose_gpu("auto", 5, 4), 1);  // ranks of a node spread over its GPUs
  EXPECT_EQ(choose_gpu("cuda:2", 0, 4), 2);
  // Kokkos chose the GPU of this rank's views: cuda and auto follow it ...
  EXPECT_EQ(choose_gpu("cuda", 0, 4, 3), 3);
  EXPECT_EQ(choose_gpu("auto", 2, 4, 1), 1);
  EXPECT_EQ(choose_gpu("cuda:1", 0, 4, 1), 1);
  // ... and another GPU is refused, never silently used.
  expect_error([] { choose_gpu("cuda:0", 0, 4, 1); },
               "the atoms' data lives on GPU 1 (Kokkos's device)");
  expect_error([] { choose_gpu("cuda", 0, 2, 3); },
               "the atoms' data lives on GPU 3, but LibTorch sees 2 GPU(s)");
  expect_error([] { choose_gpu("cuda:4", 0, 4); },
               "device cuda:4 requested, but LibTorch sees 4 GPU(s)");
  expect_error([] { choose_gpu("cuda:x", 0, 4); }, "expected cuda:N with N a GPU index");
  expect_error([] { choose_gpu("cuda:1x", 0, 4); }, "expected cuda:N with N a GPU index");
}

TEST(DeviceChoice, CompositionCountedOnTheDevice) {
  const auto numbers = torch::tensor({29, 28, 29, 1, 0, 100, -3}, torch::kLong).to(test_device());
  reset_transfer_counts();
  const auto counts = count_atomic_numbers(numbers, 100);
  EXPECT_EQ(host_read_count(), 0);
  EXPECT_EQ(upload_count(), 0);
  ASSERT_EQ(counts.size(0), 101);
  const auto host = counts.cpu();
  EXPECT_EQ(host[29].item<int64_t>(), 2);
  EXPECT_EQ(host[28].item<int64_t>(), 1);
  EXPECT_EQ(host[1].item<int64_t>(), 1);
  EXPECT_EQ(host[0].item<int64_t>(), 1);
  EXPECT_EQ(host[100].item<int64_t>(), 2);  // 100 and -3: outside 0..99
  EXPECT_EQ(host.sum().item<int64_t>(), 7);
}

TEST(DeviceChoice, DeterministicScopeRestores) {
  ASSERT_FALSE(at::globalContext().deterministicAlgorithms());
  {
    DeterministicScope on(true);
    EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
    EXPECT_FALSE(at::globalContext().deterministicAlgorithmsWarnOnly());
    {
      DeterministicScope off(false);  // leaves the setting alone
      EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
    }
    EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  }
  EXPECT_FALSE(at::globalContext().deterministicAlgorithms());
  EXPECT_TRUE(at::globalContext().deterministicFillUninitializedMemory());
}

// fix uma/train's gradient goes down and back up every step through one
// host mirror: one allocation, one counted read and one upload per step.
TEST(DeviceChoice, HostMirrorAllocatesOnce) {
  HostMirror mirror;
  auto g = torch::arange(10, torch::kFloat32).to(test_device());
  reset_transfer_counts();
  for (int step = 0; step < 3; ++step) {
    torch::Tensor& host = mirror.read(g);
    ASSERT_TRUE(host.device().is_cpu());
    host.mul_(2);  // what the reduction over ranks does in place
    mirror.write(g);
  }
  EXPECT_EQ(mirror.allocations(), 1);
  EXPECT_EQ(host_read_count(), 3);
  EXPECT_EQ(upload_count(), 3);
  EXPECT_EQ(host_read_bytes(), 3 * 10 * 4);
  EXPECT_TRUE(g.cpu().equal(torch::arange(10, torch::kFloat32) * 8));
}

// precision tf32 rounds only the network's GEMMs: geometry products stay
// float32-exact (multiplied in float64, rounded once) while TF32 is allowed.
TEST(DeviceChoice, GeometryProductsIgnoreTf32) {
  torch::manual_seed(3);
  const auto a = torch::randn({64, 81}, torch::kFloat32),
             b = torch::randn({81, 25}, torch::kFloat32);
  const auto exact = a.to(torch::kFloat64).matmul(b.to(torch::kFloat64)).to(torch::kFloat32);
  ASSERT_FALSE(a.matmul(b).equal(exact)) << "float32 GEMM rounding should differ from one rounding";
  ASSERT_FALSE(at::globalContext().allowTF32CuBLAS());
  EXPECT_TRUE(geometry_matmul(a, b).equal(a.matmul(b)));  // no TF32: as it is
  at::globalContext().setAllowTF32CuBLAS(true);
  const auto under_tf32 = geometry_matmul(a, b);
  const auto a1 = a.clone().requires_grad_(true);
  geometry_matmul(a1, b).sum().backward();
  at::globalContext().setAllowTF32CuBLAS(false);
  EXPECT_TRUE(under_tf32.equal(exact));
  EXPECT_EQ(under_tf32.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(a1.grad().defined());
  EXPECT_EQ(a1.grad().scalar_type(), torch::kFloat32);
}

// On a CUDA test device the guard must be armed (a blocking read throws);
// elsewhere it stays off.
TEST(DeviceChoice, SyncGuardArmsOnCuda) {
  const bool cuda = test_device().is_cuda();
  NoSyncGuard guard;
  EXPECT_EQ(guard.active(), cuda);
  if (cuda) EXPECT_ANY_THROW(torch::ones({1}, test_device()).sum().item<double>());
}

}  // namespace
}  // namespace uma::test
