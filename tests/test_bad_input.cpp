// Bad input gets a clear error, never a crash or a silent wrong answer.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "error.h"
#include "safetensors.h"
#include "extxyz.h"
#include "test_util.h"

#include <unistd.h>

namespace uma::test {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("uma_test_" + std::to_string(::getpid()) + "_" + name)).string();
}


class BadModelFile : public ::testing::Test {
 protected:
  void SetUp() override {
    good_ = temp_path("good.safetensors");
    save_model(random_model(small_config()), good_);
  }
  void TearDown() override { fs::remove(good_); }
  std::string good_;
};

TEST_F(BadModelFile, GoodFileLoads) { EXPECT_NO_THROW(load_model(good_)); }

// Keys that change the results have no defaults: a config without one is refused.
TEST(BadModelConfig, MissingRequiredKeys) {
  for (const char* key : {"cutoff", "max_neighbors", "num_distance_basis", "sphere_channels", "hidden_channels",
                          "edge_channels", "num_layers", "lmax", "mmax", "max_num_elements"}) {
    auto config = small_config();
    config["backbone"].erase(key);
    expect_error([&] { parse_model_config(config.dump()); },
                 std::string("required key 'backbone.") + key + "' is missing");
  }
  auto config = small_config();
  config["backbone"].erase("num_experts");   // optional: a plain backbone
  EXPECT_EQ(parse_model_config(config.dump()).backbone.num_experts, 0);
}

TEST_F(BadModelFile, Missing) { expect_error([] { load_model("/nonexistent/model.safetensors"); }, "cannot open"); }

TEST_F(BadModelFile, Truncated) {
  const auto size = fs::file_size(good_);
  for (uintmax_t keep : {uintmax_t{4}, uintmax_t{100}, size / 2, size - 1}) {
    const auto cut = temp_path("cut.safetensors");
    fs::copy_file(good_, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, keep);
    EXPECT_THROW(load_model(cut), Error) << "kept " << keep << " bytes";
    fs::remove(cut);
  }
}

TEST_F(BadModelFile, NotSafetensors) {
  const auto path = temp_path("text.safetensors");
  std::ofstream(path) << "this is not a model, just some text that is long enough";
  expect_error([&] { load_model(path); }, "not a safetensors file");
  fs::remove(path);
}

TEST_F(BadModelFile, ForeignSafetensors) {
  const auto path = temp_path("foreign.safetensors");
  TensorFile f;
  f.tensors["weight"] = torch::ones({3, 3});
  f.metadata["format"] = "pt";
  write_safetensors(path, f);
  expect_error([&] { load_model(path); }, "not a lammps-uma model file");
  fs::remove(path);
}

TEST_F(BadModelFile, UnknownFormatVersion) {
  auto f = read_safetensors(good_);
  f.metadata["format_version"] = "99";
  const auto path = temp_path("v99.safetensors");
  write_safetensors(path, f);
  expect_error([&] { load_model(path); }, "format version 99");
  fs::remove(path);
}

TEST_F(BadModelFile, MissingAndMisshapenTensors) {
  auto f = read_safetensors(good_);
  const auto path = temp_path("edited.safetensors");
  auto missing = f;
  missing.tensors.erase("backbone.norm.affine_weight");
  write_safetensors(path, missing);
  expect_error([&] { load_model(path); }, "lacks tensor 'backbone.norm.affine_weight'");
  auto shape = f;
  shape.tensors["backbone.norm.affine_weight"] = torch::ones({3, 5});
  write_safetensors(path, shape);
  expect_error([&] { load_model(path); }, "has shape");
  auto extra = f;
  extra.tensors["backbone.something_else"] = torch::ones({2});
  write_safetensors(path, extra);
  expect_error([&] { load_model(path); }, "unexpected tensor");
  fs::remove(path);
}

TEST_F(BadModelFile, UnsupportedArchitecture) {
  auto f = read_safetensors(good_);
  auto cfg = nlohmann::json::parse(f.metadata["config"]);
  cfg["backbone"]["lmax"] = 4;
  f.metadata["config"] = cfg.dump();
  const auto path = temp_path("lmax4.safetensors");
  write_safetensors(path, f);
  expect_error([&] { load_model(path); }, "lmax = mmax = 2");
  fs::remove(path);
}

class BadStructure : public ::testing::Test {
 protected:
  Engine engine{random_model(small_config())};
};

TEST_F(BadStructure, ElementTheModelLacks) {
  Atoms a = copper_cell();
  a.numbers[0] = 100;
  expect_error([&] { engine.evaluate_checked({a}); }, "atomic number 100");
  a.numbers[0] = 0;
  expect_error([&] { engine.evaluate_checked({a}); }, "atomic number 0");
}

TEST_F(BadStructure, NaNPositions) {
  Atoms a = copper_cell();
  a.positions[1][2] = std::nan("");
  expect_error([&] { engine.evaluate_checked({a}); }, "NaN");
}

TEST_F(BadStructure, CoincidentAtoms) {
  Atoms a = copper_cell();
  a.positions[2] = a.positions[0].clone();
  expect_error([&] { engine.evaluate_checked({a}); }, "same position");
  Atoms m = molecule();
  m.positions[3] = m.positions[1].clone();
  expect_error([&] { engine.evaluate_checked({m}); }, "same position");
}

TEST_F(BadStructure, ZeroVolumeCell) {
  Atoms a = copper_cell();
  a.cell[2] = a.cell[1];
  expect_error([&] { engine.evaluate_checked({a}); }, "zero volume");
  a.cell = {};
  expect_error([&] { engine.evaluate_checked({a}); }, "zero volume");
}

TEST_F(BadStructure, UnknownTaskChargeSpinShape) {
  Atoms a = copper_cell();
  a.task = "omatt";
  expect_error([&] { engine.evaluate_checked({a}); }, "unknown task 'omatt'");
  a = molecule(101, 1);
  expect_error([&] { engine.evaluate_checked({a}); }, "charge 101");
  a = molecule(0, -1);
  expect_error([&] { engine.evaluate_checked({a}); }, "spin multiplicity -1");
  a = copper_cell();
  a.positions = torch::zeros({3, 3}, torch::kFloat64);
  expect_error([&] { engine.evaluate_checked({a}); }, "shape [4, 3]");
}

TEST(BadStructureFile, ExtxyzErrors) {
  const auto path = temp_path("bad.xyz");
  std::ofstream(path) << "2\nLattice=\"1 0 0 0 1 0 0 0 1\" Properties=species:S:1:pos:R:3\nCu 0 0 0\n";
  EXPECT_THROW(read_extxyz(path), Error);  // ends inside the frame
  std::ofstream(path) << "1\nProperties=species:S:1:pos:R:3\nQq 0 0 0\n";
  expect_error([&] { read_extxyz(path); }, "unknown element 'Qq'");
  std::ofstream(path) << "1\nProperties=species:S:1:pos:R:3\nCu 0 zero 0\n";
  expect_error([&] { read_extxyz(path); }, "not a number");
  fs::remove(path);
  expect_error([] { read_extxyz("/nonexistent.xyz"); }, "cannot open");
}

}  // namespace
}  // namespace uma::test
