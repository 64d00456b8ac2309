// The lean kernels' launch template (edges/launch/) on the CPU, and the
// device-independent half of every op (edges/kernels/*_ops.h): what the CUDA
// launch reads (its grid, its variant) is decided on the host, so it is
// tested here; the CUDA bodies themselves are compared with the CPU's on a
// GPU (tests/cuda/kernels_check.cu).
#include <gtest/gtest.h>

#include <vector>

#include "edges/kernels/ops.h"
#include "edges/launch/cpu_range.h"
#include "edges/launch/launch.h"
#include "test_util.h"

namespace uma::edges {
namespace {

// An op that records, per item, how often and in which variant it ran, and
// (where per_thread) in its thread's own counter.
struct VisitOp {
  static constexpr const char* kName = "visit";
  static constexpr int kVariants = 3;
  static constexpr int64_t kCpuGrain = 5;
  int* visits;
  int* variant_seen;
  int64_t n;
  int chosen;
  int64_t* thread_items = nullptr;  // one counter per thread

  int variant() const { return chosen; }
  int64_t cpu_items() const { return n; }
  launch::Grid cuda_grid() const { return launch::threads_for(n); }
};

template <int V>
void cpu_run(const VisitOp& op, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    op.visits[i] += 1;
    op.variant_seen[i] = V;
  }
}

// The same, with per-thread counters: for_thread hands thread t its own.
struct PerThreadOp : VisitOp {
  PerThreadOp for_thread(int thread) const {
    PerThreadOp own = *this;
    own.thread_items += thread;
    return own;
  }
};

template <int V>
void cpu_run(const PerThreadOp& op, int64_t begin, int64_t end) {
  cpu_run<V>(static_cast<const VisitOp&>(op), begin, end);
  *op.thread_items += end - begin;
}

}  // namespace

// The test ops run on the CPU only.
namespace launch {
template void cpu_range(const VisitOp&, int64_t, int64_t);
template void cpu_range(const PerThreadOp&, int64_t, int64_t);
template <>
void cuda_launch(const VisitOp&, void*) {
  throw Error("the test's ops have no CUDA launch");
}
template <>
void cuda_launch(const PerThreadOp&, void*) {
  throw Error("the test's ops have no CUDA launch");
}
}  // namespace launch

namespace {

const torch::Device kCpu(torch::kCPU);

TEST(LaunchTemplate, WithVariantPassesTheVariantAsAConstant) {
  for (int v = 0; v < 4; ++v) {
    int seen = -1, calls = 0;
    launch::with_variant<4>(v, [&](auto c) {
      static_assert(decltype(c)::value >= 0 && decltype(c)::value < 4);
      seen = decltype(c)::value;
      ++calls;
    });
    EXPECT_EQ(seen, v);
    EXPECT_EQ(calls, 1);
  }
  int calls = 0;
  launch::with_variant<4>(4, [&](auto) { ++calls; });  // out of range: nothing runs
  EXPECT_EQ(calls, 0);
}

// (compiled with OpenMP, as the lean operators' sources are, so that the
// ranges really run on several threads)
TEST(LaunchTemplate, TheCpuRunsEveryItemOnceInTheOpsVariant) {
  const int threads_before = at::get_num_threads();
  for (const int threads : {1, 3}) {
    at::set_num_threads(threads);
    for (const int64_t n : {0, 1, 4, 5, 23, 100}) {
      for (int variant = 0; variant < VisitOp::kVariants; ++variant) {
        std::vector<int> visits(n, 0), seen(n, -1);
        launch::run(VisitOp{visits.data(), seen.data(), n, variant}, kCpu);
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_EQ(visits[i], 1) << "item " << i << " of " << n << ", " << threads << " threads";
          EXPECT_EQ(seen[i], variant) << "item " << i << " of " << n;
        }
      }
    }
  }
  at::set_num_threads(threads_before);
}

TEST(LaunchTemplate, AnOpWithPerThreadBuffersGetsItsThreadsOwn) {
  const int64_t n = 97;
  std::vector<int> visits(n, 0), seen(n, -1);
  std::vector<int64_t> per_thread(at::get_num_threads(), 0);
  PerThreadOp op;
  static_cast<VisitOp&>(op) = VisitOp{visits.data(), seen.data(), n, 2, per_thread.data()};
  launch::run(op, kCpu);
  int64_t total = 0;
  for (const int64_t items : per_thread) total += items;
  EXPECT_EQ(total, n);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(visits[i], 1) << "item " << i;
}

TEST(LaunchTemplate, DevicesWithoutLaunchesAreRefusedByName) {
  test::expect_error([] { launch::require_lean_kernels(torch::Device(torch::kMeta)); },
                     "run on the CPU and on CUDA, not on meta");
  if (!launch::cuda_launches_built())
    test::expect_error([] { launch::require_lean_kernels(torch::Device(torch::kCUDA, 0)); },
                       "need an engine built with nvcc");
}

// The CUDA grids and variants, decided on the host for every family's shape:
// one thread per element, one warp per row, one block of warps per edge.
TEST(LaunchTemplate, OpsChooseTheirCudaGridAndVariantOnTheHost) {
  using kernels::Rows;
  const int64_t E = 1000, H = 64, C = 128, N = 77;
  float x = 0;
  const Rows<float> piece = [&] {
    Rows<float> r;
    r.base[0] = r.base[1] = r.base[2] = &x;
    return r;
  }();

  const kernels::GateOp<float> gate{{&x, 5 * H, {}, &x, H, E}, {}};
  EXPECT_EQ(gate.cuda_grid().blocks, (E * H + 255) / 256);
  EXPECT_EQ(gate.cuda_grid().threads, 256u);
  EXPECT_EQ(gate.cpu_items(), E);

  kernels::RotateInOp<float> in{};
  in.C = C, in.E = E;
  EXPECT_EQ(in.cuda_grid().blocks, (E * 18 * 32 + 255) / 256);  // one warp per (e, j, h)

  kernels::RotateInGradEdgesOp<float> grad{};
  grad.E = E;
  EXPECT_EQ(grad.cuda_grid().blocks, E);  // one block of 6 warps per edge
  EXPECT_EQ(grad.cuda_grid().threads, 6u * 32);
  EXPECT_EQ(grad.variant(), 0);
  grad.gD = &x;
  EXPECT_EQ(grad.variant(), 1);
  std::vector<float> buffers(30);
  grad.gx_threads = buffers.data(), grad.gx_size = 10;
  EXPECT_EQ(grad.variant(), 3);
  EXPECT_EQ(grad.for_thread(2).gx_threads, buffers.data() + 20);

  const kernels::NodeWalk walk{nullptr, nullptr, nullptr, nullptr, E, C, N};
  EXPECT_EQ(walk.cuda_grid().blocks, (N * 3 * C + 255) / 256);  // (node, degree, channel)
  EXPECT_EQ(walk.cpu_items(), N);

  kernels::RotateOutGradOp<float> out_grad{};
  out_grad.E = E;
  EXPECT_EQ(out_grad.variant(), 0);
  EXPECT_EQ(out_grad.cuda_grid().blocks, 0u);  // nothing wanted: no launch
  EXPECT_EQ(out_grad.cpu_items(), 0);
  out_grad.gy = piece;
  EXPECT_EQ(out_grad.variant(), 1);
  out_grad.gD = &x;
  EXPECT_EQ(out_grad.variant(), 3);
  EXPECT_EQ(out_grad.cuda_grid().blocks, E);
  EXPECT_EQ(out_grad.cuda_grid().threads, 9u * 32);  // one warp per M row

  kernels::RotateOutNodesOp<float> nodes{};
  nodes.N = N, nodes.C = C;
  EXPECT_EQ(nodes.variant(), 0);
  nodes.dD = &x;
  EXPECT_EQ(nodes.variant(), 1);  // the tangent
  EXPECT_EQ(launch::threads_for(0).blocks, 0u);
  EXPECT_EQ(launch::threads_for(int64_t(1) << 40).blocks, 65535u * 64);  // a grid-stride loop
}

}  // namespace
}  // namespace uma::edges
