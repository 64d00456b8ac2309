// The step plan and the typed read: one key decides when a plan is built,
// what a new plan takes over from the old one, and a packed read's fields
// come back by name, with their shapes.
#include <gtest/gtest.h>

#include "engine/packed_read.h"
#include "engine/step_plan.h"
#include "runtime/transfers.h"
#include "test_util.h"

namespace uma::test {
namespace {

TEST(PackedRead, FieldsComeBackByNameWithTheirShapes) {
  PackedRead packed;
  const auto counts = torch::tensor({3, 7}, torch::kLong);
  const auto forces = torch::arange(12, torch::kFloat32).view({4, 3});
  const auto flag = torch::tensor(1, torch::kLong);  // 0-dim
  EXPECT_TRUE(packed.add("counts", counts));
  EXPECT_FALSE(packed.add("stress", torch::Tensor()));  // not computed: not registered
  EXPECT_TRUE(packed.add("forces", forces));
  EXPECT_TRUE(packed.add("flag", flag));
  EXPECT_EQ(packed.size(), 2 + 12 + 1);
  reset_transfer_counts();
  packed.read();
  EXPECT_EQ(host_read_count(), 1);
  EXPECT_FALSE(packed.has("stress"));
  EXPECT_EQ(packed.vector("counts"), (std::vector<double>{3, 7}));
  const auto f = packed.tensor("forces");
  EXPECT_EQ(f.sizes(), forces.sizes());
  EXPECT_EQ(f.scalar_type(), torch::kFloat64);
  EXPECT_TRUE(torch::equal(f, forces.to(torch::kFloat64)));
  EXPECT_EQ(packed.scalar("flag"), 1.0);
  expect_error([&] { packed.scalar("forces"); }, "holds 12 values");
  expect_error([&] { packed.tensor("virial"); }, "no packed field 'virial'");
  expect_error([&] { packed.add("counts", counts); }, "registered twice");
}

// The receiving side of a broadcast declares the same fields and unpacks
// the sender's buffer.
TEST(PackedRead, DeclaredFieldsUnpackABroadcastBuffer) {
  PackedRead sent;
  sent.add("energy", torch::tensor({-3.5}, torch::kFloat64));
  sent.add("forces", torch::arange(6, torch::kFloat64).view({2, 3}));
  const auto flat = sent.flat();
  std::vector<double> buffer(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());

  PackedRead received;
  received.declare("energy", {1});
  received.declare("forces", {2, 3});
  expect_error([&] { received.scalar("energy"); }, "read before its values");
  expect_error(
      [&] {
        received.unpack({1.0, 2.0});
      },
      "a packed buffer of 2 values where 7 were registered");
  received.unpack(buffer);
  EXPECT_EQ(received.scalar("energy"), -3.5);
  EXPECT_TRUE(
      torch::equal(received.tensor("forces"), torch::arange(6, torch::kFloat64).view({2, 3})));
  expect_error([&] { received.flat(); }, "no values to send");
}

// One key: moved atoms and a changed cell keep the plan; a new charge, task,
// order of atoms or periodicity builds a new one.  A new plan with the same
// composition, charge, spin and task keeps the merged experts; new weights
// merge them again without a new plan.
TEST(StepPlan, OneKeyDecidesWhenAPlanIsBuilt) {
  EngineOptions opts;
  opts.dtype = torch::kFloat64;
  Engine engine(random_model(small_config()), opts);
  auto plans = [&] { return engine.stats().step_plans; };
  auto merges = [&] { return engine.stats().merges; };
  Atoms a = copper_cell();
  a.numbers = {29, 28, 29, 29};
  evaluate_on_host(engine, {a});
  EXPECT_EQ(plans(), 1);
  EXPECT_EQ(merges(), 1);

  Atoms moved = a;
  moved.positions = a.positions + 0.02;
  moved.cell[1][1] += 0.05;
  evaluate_on_host(engine, {moved});
  EXPECT_EQ(plans(), 1) << "positions and cell are not part of the key";

  Atoms reordered = a;
  reordered.numbers = {29, 29, 28, 29};  // same composition
  evaluate_on_host(engine, {reordered});
  EXPECT_EQ(plans(), 2);
  EXPECT_EQ(merges(), 1) << "the same composition keeps the merged experts";

  Atoms slab = reordered;
  slab.pbc = {true, true, false};
  evaluate_on_host(engine, {slab});
  EXPECT_EQ(plans(), 3);
  EXPECT_EQ(merges(), 1);

  Atoms charged = slab;
  charged.charge = 1;
  evaluate_on_host(engine, {charged});
  EXPECT_EQ(plans(), 4);
  EXPECT_EQ(merges(), 2);

  Atoms other_task = charged;
  other_task.task = "oc20";
  evaluate_on_host(engine, {other_task});
  EXPECT_EQ(plans(), 5);
  EXPECT_EQ(merges(), 3);

  engine.update_weights([](UmaModel&) {});
  evaluate_on_host(engine, {other_task});
  EXPECT_EQ(plans(), 5);
  EXPECT_EQ(merges(), 4) << "new weights merge again";
}

// The key separates what it concatenates: a piece and a whole system of the
// same atoms, or two compositions of one atom count, never share a key.
TEST(StepPlan, KeysOfDifferentLayoutsDiffer) {
  const auto model = random_model(small_config());
  const auto& config = model->config();
  Atoms whole = copper_cell();
  Atoms piece = whole;
  piece.piece.n_owned = 4;
  piece.piece.composition.assign(30, 0);
  piece.piece.composition[29] = 4;
  Atoms larger = piece;
  larger.piece.composition[29] = 8;
  Atoms device_ids = whole;
  device_ids.numbers.clear();
  device_ids.on_device.numbers = torch::tensor({29, 29, 29, 29}, torch::kLong);
  device_ids.on_device.layout_id = 1;
  Atoms device_other = device_ids;
  device_other.on_device.layout_id = 2;
  const std::vector<std::vector<int64_t>> keys{
      plan_key({whole}, config),        plan_key({piece}, config),
      plan_key({larger}, config),       plan_key({device_ids}, config),
      plan_key({device_other}, config), plan_key({whole, whole}, config)};
  for (size_t i = 0; i < keys.size(); ++i)
    for (size_t j = i + 1; j < keys.size(); ++j) EXPECT_NE(keys[i], keys[j]) << i << " " << j;
  EXPECT_EQ(plan_key({whole}, config), plan_key({copper_cell(0.2, 11)}, config))
      << "positions are not in the key";
}

}  // namespace
}  // namespace uma::test
