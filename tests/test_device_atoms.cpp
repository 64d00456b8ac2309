// Atoms given on the model's device (DeviceAtoms, what pair_style uma/kk
// hands the engine): atomic numbers as a device tensor, positions used in
// place with an origin subtracted on the device.  Results must equal the
// host-numbers path; the steady state moves no per-atom data; the layout is
// rebuilt exactly when the caller's layout id changes.
#include <gtest/gtest.h>

#include "runtime/transfers.h"
#include "test_util.h"

namespace uma::test {
namespace {

// The same system as DeviceAtoms: numbers on `device`, positions moved by
// `shift` there, with the shift as origin.
Atoms on_device(const Atoms& a, const torch::Device& device, std::array<double, 3> shift,
                int64_t layout_id) {
  Atoms d = a;
  d.numbers.clear();
  d.on_device.numbers = torch::tensor(a.numbers, torch::kLong).to(device);
  d.on_device.layout_id = layout_id;
  d.on_device.origin = shift;
  d.positions =
      (a.positions + torch::tensor({shift[0], shift[1], shift[2]}, torch::kFloat64)).to(device);
  return d;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

TEST(DeviceAtoms, EqualHostNumbersForCellsAndMolecules) {
  EngineOptions opts;
  opts.device = test_device();
  opts.dtype = torch::kFloat64;
  Engine host_engine(random_model_with_references(small_config(4, /*dataset_head=*/true)), opts);
  Engine device_engine(random_model_with_references(small_config(4, /*dataset_head=*/true)), opts);
  int64_t id = 0;
  for (const Atoms& a : {copper_cell(), triclinic_cell(), molecule()}) {
    const auto ref = evaluate_on_host(host_engine, {a}, Request::all());
    const auto got = evaluate_on_host(
        device_engine, {on_device(a, opts.device, {-203.7, 58.1, 1021.3}, ++id)}, Request::all());
    EXPECT_NEAR(got.energy[0], ref.energy[0], 1e-12 * std::max(1.0, std::abs(ref.energy[0])))
        << a.task;
    EXPECT_LT(max_diff(got.forces, ref.forces), 1e-11) << a.task;
    EXPECT_LT(max_diff(got.atom_energy, ref.atom_energy), 1e-12) << a.task;
    EXPECT_LT(max_diff(got.virial, ref.virial), 1e-11) << a.task;
    EXPECT_LT(max_diff(got.atom_virial, ref.atom_virial), 1e-11) << a.task;
    if (a.pbc[0]) EXPECT_LT(max_diff(got.stress, ref.stress), 1e-11) << a.task;
  }
}

// The origin is what keeps float32 models accurate far from zero: the
// positions reach the model relative to it.
TEST(DeviceAtoms, OriginKeepsFloat32Accurate) {
  EngineOptions opts;
  opts.device = test_device();
  Engine host_engine(random_model(small_config()), opts);
  Engine device_engine(random_model(small_config()), opts);
  const Atoms a = molecule();
  const auto ref = evaluate_on_host(host_engine, {a}, Request::all());
  const auto got = evaluate_on_host(
      device_engine, {on_device(a, opts.device, {3.0e4, -1.0e4, 2.0e4}, 1)}, Request::all());
  // (float32 at 3e4 A without the origin: ~2e-3 A steps, relative force errors ~1e-3)
  EXPECT_LT(max_diff(got.forces, ref.forces) / ref.forces.abs().max().item<double>(), 1e-5);
  EXPECT_NEAR(got.energy[0], ref.energy[0], 1e-5 * std::max(1.0, std::abs(ref.energy[0])));
}

// Steady state: one upload of the cell and origin (no positions: they are
// used in place), no read; the layout is rebuilt only for a new layout id,
// with one read (the composition) and two uploads.
TEST(DeviceAtoms, SteadyStateMovesNoPerAtomData) {
  EngineOptions opts;
  opts.device = test_device();
  Engine engine(random_model(small_config(4, /*dataset_head=*/true)), opts);
  const Atoms cu = copper_cell();
  const int64_t header_bytes = 25 * sizeof(double);
  HostEvaluation r;
  while (!engine.read(engine.evaluate({on_device(cu, opts.device, {1.0, 2.0, 3.0}, 7)}, Request()),
                      r)) {
  }
  const auto merges = engine.stats().merges;
  for (int step = 0; step < 3; ++step) {
    Atoms moved = on_device(cu, opts.device, {1.0, 2.0, 3.0 + 0.01 * step}, 7);
    reset_transfer_counts();
    {
      NoSyncGuard no_sync;
      engine.evaluate({moved});
    }
    EXPECT_EQ(host_read_count(), 0);
    EXPECT_EQ(upload_count(), 1);
    EXPECT_EQ(upload_bytes(), header_bytes);
  }
  EXPECT_EQ(engine.stats().merges, merges);

  reset_transfer_counts();
  engine.evaluate({on_device(cu, opts.device, {1.0, 2.0, 3.0}, 8)});
  EXPECT_EQ(host_read_count(), 1);
  EXPECT_EQ(upload_count(), 3);
  EXPECT_EQ(engine.stats().merges, merges);  // same composition: no new merge

  // Same id, other numbers: the caller broke its promise, and the engine
  // keeps the layout it has (the id is the whole key).  A new id picks the
  // new numbers up, and their composition merges the experts again.
  Atoms nickel = cu;
  nickel.numbers = {28, 28, 28, 28};
  reset_transfer_counts();
  engine.evaluate({on_device(nickel, opts.device, {0, 0, 0}, 8)});
  EXPECT_EQ(host_read_count(), 0);
  engine.evaluate({on_device(nickel, opts.device, {0, 0, 0}, 9)});
  EXPECT_EQ(engine.stats().merges, merges + 1);
}

TEST(DeviceAtoms, BadInputIsRefused) {
  EngineOptions opts;
  opts.device = test_device();
  Engine engine(random_model(small_config()), opts);
  const Atoms cu = copper_cell();
  auto expect_error = [&](Atoms a, const std::string& what) {
    try {
      engine.evaluate({a});
      ADD_FAILURE() << "no error; expected: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  Atoms both = on_device(cu, opts.device, {0, 0, 0}, 1);
  both.numbers = cu.numbers;
  expect_error(both, "both on the host and on the device");
  Atoms ints = on_device(cu, opts.device, {0, 0, 0}, 2);
  ints.on_device.numbers = ints.on_device.numbers.to(torch::kInt);
  expect_error(ints, "1-D int64 tensor");
  Atoms single = on_device(cu, opts.device, {0, 0, 0}, 3);
  single.positions = single.positions.to(torch::kFloat32);
  expect_error(single, "float64");
  Atoms zero = on_device(cu, opts.device, {0, 0, 0}, 4);
  zero.on_device.numbers[1] = 0;
  expect_error(zero, "must lie in 1..99");
  Atoms big = on_device(cu, opts.device, {0, 0, 0}, 5);
  big.on_device.numbers[1] = 100;
  expect_error(big, "must lie in 1..99");
}

}  // namespace
}  // namespace uma::test
