// CUDA-graph replay: the decisions (replay_policy.h) on any device, and the
// engine's replay against eager evaluation where the tests run on a GPU
// (UMA_TEST_DEVICE=cuda, scripts/gpu_check.sh); on the CPU the engine must
// refuse it.
#include <gtest/gtest.h>

#include "replay_policy.h"
#include "test_util.h"

namespace uma::test {
namespace {

using Action = ReplayPolicy::Action;
const std::vector<int64_t> kA{1, 2, 3}, kB{1, 2, 4};

TEST(ReplayPolicy, FirstStepEagerSecondCapturesThenReplays) {
  ReplayPolicy p;
  EXPECT_EQ(p.next(kA), Action::kEager);
  EXPECT_EQ(p.next(kA), Action::kCapture);
  p.captured();
  EXPECT_TRUE(p.holds_capture());
  EXPECT_EQ(p.next(kA), Action::kReplay);
  EXPECT_EQ(p.next(kA), Action::kReplay);
  EXPECT_EQ(p.captures(), 1);
  EXPECT_EQ(p.replays(), 2);
}

TEST(ReplayPolicy, ANewKeyDropsTheCapture) {
  ReplayPolicy p;
  p.next(kA);
  p.next(kA);
  p.captured();
  EXPECT_EQ(p.next(kB), Action::kEager);   // a capacity grew, say
  EXPECT_FALSE(p.holds_capture());
  EXPECT_EQ(p.next(kA), Action::kEager);   // the old capture is gone: warm up again
  EXPECT_EQ(p.next(kA), Action::kCapture);
}

TEST(ReplayPolicy, AKeyThatChangesEveryStepNeverCaptures) {
  ReplayPolicy p;
  for (int i = 0; i < 6; ++i) EXPECT_EQ(p.next(i % 2 ? kA : kB), Action::kEager) << "step " << i;
  EXPECT_EQ(p.captures(), 0);
}

TEST(ReplayPolicy, ARefusedKeyRunsEagerAndIsReportedOnce) {
  ReplayPolicy p;
  p.next(kA);
  ASSERT_EQ(p.next(kA), Action::kCapture);
  EXPECT_TRUE(p.refused("an operator read the host"));
  EXPECT_EQ(p.last_refusal(), "an operator read the host");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.next(kA), Action::kEager) << "never tried again";
  EXPECT_EQ(p.next(kB), Action::kEager);
  EXPECT_EQ(p.next(kB), Action::kCapture);   // another key may still capture
  EXPECT_TRUE(p.refused("another reason")) << "a key refused for the first time";
  EXPECT_EQ(p.last_refusal(), "another reason");
  EXPECT_EQ(p.next(kA), Action::kEager);     // back to kA: still refused, no new attempt
  EXPECT_EQ(p.next(kA), Action::kEager);
  EXPECT_FALSE(p.refused("again")) << "kA was refused before: reported once";
}

TEST(ReplayPolicy, InvalidateStartsTheKeyOver) {
  ReplayPolicy p;
  p.next(kA);
  p.next(kA);
  p.captured();
  p.invalidate();   // new weights
  EXPECT_FALSE(p.holds_capture());
  EXPECT_EQ(p.next(kA), Action::kEager);
  EXPECT_EQ(p.next(kA), Action::kCapture);
}

// On a GPU: eight MD-like steps (moving atoms, a cell that changes at step
// 5) replayed equal the same steps evaluated eagerly, in float64, to what
// reordered atomic sums allow; the step is captured once.  On the CPU the
// option is refused.
TEST(Replay, ReplayedStepsEqualEagerOnesOrAreRefused) {
  EngineOptions opts;
  opts.device = test_device();
  opts.dtype = torch::kFloat64;
  opts.cuda_graph = true;
  const auto model = [] { return random_model(small_config(4, /*dataset_head=*/true)); };
  if (!opts.device.is_cuda()) {
    expect_error([&] { Engine engine(model(), opts); }, "CUDA-graph replay needs a CUDA device");
    return;
  }
  Engine replayed(model(), opts);
  opts.cuda_graph = false;
  Engine eager(model(), opts);
  Atoms a = copper_cell();
  for (int step = 0; step < 8; ++step) {
    a.positions = a.positions + 0.003 * torch::sin(torch::arange(12, torch::kFloat64).view({4, 3}) + step);
    if (step == 5) a.cell[0][0] += 0.02;
    const HostEvaluation want = eager.evaluate_checked({a});
    const HostEvaluation got = replayed.evaluate_checked({a});
    EXPECT_NEAR(got.energy[0], want.energy[0], 1e-12 * std::abs(want.energy[0])) << "step " << step;
    EXPECT_TRUE(torch::allclose(got.forces, want.forces, 1e-11, 1e-12)) << "step " << step;
    EXPECT_TRUE(torch::allclose(got.stress, want.stress, 1e-11, 1e-12)) << "step " << step;
  }
  EXPECT_EQ(replayed.graph_refusal(), "");
  EXPECT_EQ(replayed.graph_captures(), 1);
  EXPECT_GE(replayed.graph_replays(), 5);
}

}  // namespace
}  // namespace uma::test
