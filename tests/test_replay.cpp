// CUDA-graph replay: the decisions (replay_cache.h) on any device, and the
// engine's replay against eager evaluation where the tests run on a GPU
// (UMA_TEST_DEVICE=cuda, scripts/gpu_check.sh); on the CPU the engine must
// refuse it.
#include <gtest/gtest.h>

#include "engine/replay_cache.h"
#include "test_util.h"

namespace uma::test {
namespace {

// What the tests capture: counts how many are alive, so that a test sees
// which captures the cache has freed.
struct Probe {
  Probe(int* live, int id) : live(live), id(id) { ++*live; }
  ~Probe() { --*live; }
  int* live;
  int id;
};
using Cache = ReplayCache<Probe>;
using Action = Cache::Action;
const std::vector<int64_t> kEpoch{7, 1}, kLater{8, 1}, kA{1, 2, 3}, kB{1, 2, 4}, kC{0, 2, 3};

// Runs one step of `key` as the engine does: captures when told to.
Action step(Cache& cache, int* live, const std::vector<int64_t>& key, int id = 0,
            const std::vector<int64_t>& epoch = kEpoch, double bytes = 1) {
  const Action a = cache.next(epoch, key);
  if (a == Action::kCapture) cache.captured(std::make_unique<Probe>(live, id), bytes);
  return a;
}

TEST(ReplayCache, FirstStepEagerSecondCapturesThenReplays) {
  int live = 0;
  Cache cache;
  EXPECT_EQ(step(cache, &live, kA), Action::kEager);
  EXPECT_EQ(step(cache, &live, kA, 5), Action::kCapture);
  EXPECT_EQ(cache.held(), 1u);
  EXPECT_EQ(step(cache, &live, kA), Action::kReplay);
  EXPECT_EQ(cache.current().id, 5);
  EXPECT_EQ(step(cache, &live, kA), Action::kReplay);
  EXPECT_EQ(cache.captures(), 1);
  EXPECT_EQ(cache.replays(), 2);
  EXPECT_EQ(live, 1);
}

// The engine's first step sizes the graph and merges the experts, which
// changes the epoch it was asked under: told so (settled), the cache lets
// the second step capture.  An eager step of another key that changes the
// epoch again frees the capture, and the first key starts over.
TEST(ReplayCache, AnEagerStepThatMovesTheEpochLetsTheNextCapture) {
  int live = 0;
  Cache cache;
  EXPECT_EQ(step(cache, &live, kA), Action::kEager);
  cache.settled(kLater, kA);
  EXPECT_EQ(step(cache, &live, kA, 1, kLater), Action::kCapture);
  EXPECT_EQ(step(cache, &live, kA, 0, kLater), Action::kReplay);
  EXPECT_EQ(step(cache, &live, kB, 0, kLater), Action::kEager);
  cache.settled(kEpoch, kB);
  EXPECT_EQ(live, 0);
  EXPECT_EQ(step(cache, &live, kA), Action::kEager);
  cache.settled(kEpoch, kA);  // unchanged: nothing happens
  EXPECT_EQ(step(cache, &live, kA, 2), Action::kCapture);
  EXPECT_EQ(step(cache, &live, kA), Action::kReplay);
  EXPECT_EQ(cache.current().id, 2);
}

// The engine's very first step is asked under a key made before the graph
// had capacities (its bin plan is a placeholder then); the key the step
// leaves behind is the one its next step has: that step captures, and a
// run's first replay is its third step (where the key changed instead, a
// run of 10 steps on CUDA counted 7 replays where 8 were due).
TEST(ReplayCache, TheFirstStepsKeyIsTheOneItLeaves) {
  int live = 0;
  Cache cache;
  const std::vector<int64_t> unsized{0, -1};
  EXPECT_EQ(step(cache, &live, unsized), Action::kEager);
  cache.settled(kLater, kA);
  EXPECT_EQ(step(cache, &live, kA, 1, kLater), Action::kCapture);
  EXPECT_EQ(step(cache, &live, kA, 0, kLater), Action::kReplay);
  EXPECT_EQ(cache.replays(), 1);
}

// A dump step that asks for per-atom virials, say: the other key runs eager
// once, and the first key's capture replays again right after it.
TEST(ReplayCache, AKeyThatComesBackReplaysItsCapture) {
  int live = 0;
  Cache cache;
  step(cache, &live, kA);
  step(cache, &live, kA, 1);
  EXPECT_EQ(step(cache, &live, kB), Action::kEager);
  EXPECT_EQ(step(cache, &live, kA), Action::kReplay);
  EXPECT_EQ(cache.current().id, 1);
  EXPECT_EQ(step(cache, &live, kB), Action::kEager);
  EXPECT_EQ(step(cache, &live, kB, 2), Action::kCapture);
  EXPECT_EQ(step(cache, &live, kA), Action::kReplay);
  EXPECT_EQ(cache.current().id, 1);
  EXPECT_EQ(step(cache, &live, kB), Action::kReplay);
  EXPECT_EQ(cache.current().id, 2);
  EXPECT_EQ(cache.captures(), 2);
  EXPECT_EQ(live, 2);
}

TEST(ReplayCache, ANewEpochFreesEveryCapture) {
  int live = 0;
  Cache cache;
  step(cache, &live, kA);
  step(cache, &live, kA, 1);
  step(cache, &live, kB);
  step(cache, &live, kB, 2);
  ASSERT_EQ(live, 2);
  EXPECT_EQ(step(cache, &live, kA, 0, kLater), Action::kEager);  // a capacity grew, say
  EXPECT_EQ(live, 0);
  EXPECT_EQ(cache.held(), 0u);
  EXPECT_EQ(step(cache, &live, kA, 3, kLater), Action::kCapture);  // warm up again
}

TEST(ReplayCache, AKeyThatChangesEveryStepNeverCaptures) {
  int live = 0;
  Cache cache;
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(step(cache, &live, i % 2 ? kA : kB), Action::kEager) << "step " << i;
  EXPECT_EQ(cache.captures(), 0);
}

TEST(ReplayCache, TheLeastRecentlyUsedCaptureGoesFirst) {
  int live = 0;
  Cache cache(2);
  step(cache, &live, kA);
  step(cache, &live, kA, 1);
  step(cache, &live, kB);
  step(cache, &live, kB, 2);
  EXPECT_EQ(step(cache, &live, kA), Action::kReplay);  // kB is now the least recently used
  step(cache, &live, kC);
  step(cache, &live, kC, 3);
  EXPECT_EQ(live, 2);
  EXPECT_EQ(cache.evictions(), 1);
  EXPECT_EQ(step(cache, &live, kA), Action::kReplay);
  EXPECT_EQ(cache.current().id, 1);
  EXPECT_EQ(step(cache, &live, kB), Action::kEager) << "its capture was dropped";
  EXPECT_EQ(step(cache, &live, kC), Action::kReplay);
}

TEST(ReplayCache, TheMemoryLimitKeepsOnlyTheCaptureInUse) {
  int live = 0;
  Cache cache(4, 10.0);
  step(cache, &live, kA);
  step(cache, &live, kA, 1, kEpoch, 6);
  step(cache, &live, kB);
  step(cache, &live, kB, 2, kEpoch, 6);  // 12 bytes together: kA goes
  EXPECT_EQ(live, 1);
  EXPECT_EQ(cache.held_bytes(), 6);
  EXPECT_EQ(step(cache, &live, kC), Action::kEager);
  EXPECT_EQ(step(cache, &live, kC, 3, kEpoch, 25),
            Action::kCapture);  // alone above the limit: kept
  EXPECT_EQ(cache.held(), 1u);
  EXPECT_EQ(step(cache, &live, kC), Action::kReplay);
  EXPECT_EQ(cache.current().id, 3);
  cache.set_limits(4, 100.0);
  step(cache, &live, kB);
  step(cache, &live, kB, 4, kEpoch, 6);
  EXPECT_EQ(cache.held(), 2u);
  cache.set_limits(1, 100.0);  // the cache shrinks at once, to the most recent
  EXPECT_EQ(live, 1);
  EXPECT_EQ(step(cache, &live, kB), Action::kReplay);
  EXPECT_EQ(cache.current().id, 4);
}

TEST(ReplayCache, ARefusedKeyRunsEagerForItsEpochAndIsReportedOnce) {
  int live = 0;
  Cache cache;
  cache.next(kEpoch, kA);
  ASSERT_EQ(cache.next(kEpoch, kA), Action::kCapture);
  EXPECT_TRUE(cache.refused("an operator read the host"));
  EXPECT_EQ(cache.last_refusal(), "an operator read the host");
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(cache.next(kEpoch, kA), Action::kEager) << "never tried again";
  EXPECT_EQ(step(cache, &live, kB), Action::kEager);
  EXPECT_EQ(cache.next(kEpoch, kB), Action::kCapture);  // another key may still capture
  EXPECT_TRUE(cache.refused("another reason")) << "a key refused for the first time";
  EXPECT_EQ(cache.last_refusal(), "another reason");
  EXPECT_EQ(cache.next(kEpoch, kA), Action::kEager);  // back to kA: still refused, no new attempt
  EXPECT_EQ(cache.next(kEpoch, kA), Action::kEager);
  EXPECT_FALSE(cache.refused("again")) << "kA was refused before: reported once";
  EXPECT_EQ(cache.next(kLater, kA), Action::kEager);  // a new epoch tries again
  EXPECT_EQ(cache.next(kLater, kA), Action::kCapture);
}

TEST(ReplayCache, InvalidateFreesEveryCapture) {
  int live = 0;
  Cache cache;
  step(cache, &live, kA);
  step(cache, &live, kA, 1);
  cache.invalidate();  // new weights
  EXPECT_EQ(live, 0);
  EXPECT_EQ(step(cache, &live, kA), Action::kEager);
  EXPECT_EQ(step(cache, &live, kA), Action::kCapture);
  expect_error([&] { cache.set_limits(0, 1.0); }, "at least one capture");
}

// On a GPU: twelve MD-like steps (moving atoms, a cell that changes at
// step 5, per-atom virials asked for at steps 6, 7 and 9, as a dump of
// stress/atom would) replayed equal the same steps evaluated eagerly, in
// float64, to what reordered atomic sums allow.  Each of the two keys is
// captured once, and steps 8-11 replay from the cache whichever key they
// have.  On the CPU the option is refused.
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
  for (int step = 0; step < 12; ++step) {
    a.positions =
        a.positions + 0.003 * torch::sin(torch::arange(12, torch::kFloat64).view({4, 3}) + step);
    if (step == 5) a.cell[0][0] += 0.02;
    const bool per_atom = step == 6 || step == 7 || step == 9;
    Request what = Request::all();
    what.atom_virial = per_atom;
    const int64_t replays_before = replayed.stats().graph_replays;
    const HostEvaluation want = evaluate_on_host(eager, {a}, what);
    const HostEvaluation got = evaluate_on_host(replayed, {a}, what);
    EXPECT_NEAR(got.energy[0], want.energy[0], 1e-12 * std::abs(want.energy[0])) << "step " << step;
    EXPECT_TRUE(torch::allclose(got.forces, want.forces, 1e-11, 1e-12)) << "step " << step;
    EXPECT_TRUE(torch::allclose(got.stress, want.stress, 1e-11, 1e-12)) << "step " << step;
    ASSERT_EQ(got.atom_virial.defined(), per_atom) << "step " << step;
    if (per_atom)
      EXPECT_TRUE(torch::allclose(got.atom_virial, want.atom_virial, 1e-11, 1e-12))
          << "step " << step;
    if (step >= 8)
      EXPECT_EQ(replayed.stats().graph_replays, replays_before + 1)
          << "step " << step << " replays its key";
  }
  EXPECT_EQ(replayed.stats().graph_refusal, "");
  EXPECT_EQ(replayed.stats().graph_captures, 2);
  EXPECT_EQ(replayed.stats().graph_held, 2);
  EXPECT_GT(replayed.stats().graph_held_bytes, 0);
  EXPECT_GE(replayed.stats().graph_replays, 8);
}

}  // namespace
}  // namespace uma::test
