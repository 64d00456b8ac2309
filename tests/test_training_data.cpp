// Labelled extended XYZ for training: values, masks for missing labels, and
// errors for labels of the wrong shape.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/uma_error.h"
#include "test_util.h"
#include "io/training_data.h"

namespace uma {
namespace {

using test::expect_error;

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(TrainingData, LabelsMasksAndStressLayouts) {
  const auto path = write_temp(
      "labels.extxyz",
      "2\n"
      "Lattice=\"3 0 0 0 3 0 0 0 3\" Properties=species:S:1:pos:R:3:forces:R:3 energy=-7.5 "
      "stress=\"1 2 3 2 4 5 3 5 6\" task=omat pbc=\"T T T\"\n"
      "Cu 0 0 0 0.1 0.2 0.3\n"
      "Cu 1.5 1.5 1.5 -0.1 -0.2 -0.3\n"
      "3\n"
      "Properties=species:S:1:pos:R:3 task=omol charge=1 spin=2 pbc=\"F F F\"\n"
      "O 0 0 0\nH 0.96 0 0\nH -0.24 0.93 0\n"
      "1\n"
      "Lattice=\"2 0 0 0 2 0 0 0 2\" Properties=species:S:1:pos:R:3 stress=\"1 2 3 4 5 6\" pbc=\"T "
      "T T\"\n"
      "Ni 0 0 0\n");
  const auto s = read_training_data(path, "oc20");
  ASSERT_EQ(s.size(), 3u);

  EXPECT_TRUE(s[0].labels.has_energy && s[0].labels.has_forces && s[0].labels.has_stress);
  EXPECT_EQ(s[0].labels.energy, -7.5);
  EXPECT_EQ(s[0].labels.forces, (std::vector<double>{0.1, 0.2, 0.3, -0.1, -0.2, -0.3}));
  EXPECT_EQ(s[0].labels.stress[5], 5.0);
  EXPECT_EQ(s[0].atoms.task, "omat");
  EXPECT_EQ(s[0].atoms.spin, 0);

  EXPECT_FALSE(s[1].labels.has_energy || s[1].labels.has_forces || s[1].labels.has_stress);
  EXPECT_EQ(s[1].atoms.task, "omol");
  EXPECT_EQ(s[1].atoms.charge, 1);
  EXPECT_EQ(s[1].atoms.spin, 2);

  // Voigt xx yy zz yz xz xy -> symmetric 3x3
  EXPECT_EQ(s[2].atoms.task, "oc20");
  EXPECT_EQ(s[2].labels.stress, (std::array<double, 9>{1, 6, 5, 6, 2, 4, 5, 4, 3}));
}

TEST(TrainingData, WrongShapesAreErrors) {
  const std::string head = "1\nProperties=species:S:1:pos:R:3";
  // (file name, comment-line labels and atom line, what the error must say)
  const std::vector<std::array<std::string, 3>> cases = {
      {"forces2", ":forces:R:2 task=omat\nCu 0 0 0 1 2\n",
       "frame 0: column 'forces' must have 3 components"},
      {"stress4", " task=omat stress=\"1 2 3 4\"\nCu 0 0 0\n",
       "label 'stress' needs 9 or 6 (Voigt) numbers, has 4"},
      {"energy", " task=omat energy=abc\nCu 0 0 0\n", "label 'energy': 'abc' is not a number"},
      {"charge", " task=omol charge=0.5\nCu 0 0 0\n", "label 'charge' must be one integer"},
      {"notask", "\nCu 0 0 0\n", "no 'task' label and no default task"},
  };
  for (const auto& [name, body, message] : cases) {
    const auto path = write_temp(name + ".extxyz", head + body);
    expect_error([&] { read_training_data(path); }, message);
  }
}

}  // namespace
}  // namespace uma
