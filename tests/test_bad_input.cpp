// Bad input gets a clear error, never a crash or a silent wrong answer.
#include <gtest/gtest.h>

#include <tuple>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/uma_error.h"
#include "io/safetensors.h"
#include "io/extxyz.h"
#include "test_util.h"

#include <unistd.h>

namespace uma::test {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("uma_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
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
  for (const char* key :
       {"cutoff", "max_neighbors", "num_distance_basis", "sphere_channels", "hidden_channels",
        "edge_channels", "num_layers", "lmax", "mmax", "max_num_elements"}) {
    auto config = small_config();
    config["backbone"].erase(key);
    expect_error([&] { parse_model_config(config.dump()); },
                 std::string("required key 'backbone.") + key + "' is missing");
  }
  auto config = small_config();
  config["backbone"].erase("num_experts");  // optional: a plain backbone
  EXPECT_EQ(parse_model_config(config.dump()).backbone.num_experts, 0);
}

TEST_F(BadModelFile, Missing) {
  expect_error([] { load_model("/nonexistent/model.safetensors"); }, "cannot open");
}

TEST_F(BadModelFile, Folder) {
  const auto folder = fs::path(good_).parent_path().string();
  expect_error([&] { load_model(folder); }, "'" + folder + "' is a folder, not a model file");
}

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

// A configuration that asks for far more weights than the file holds is refused
// before anything is allocated; values of the wrong kind are uma::Errors.
TEST_F(BadModelFile, ConfigBeyondTheFile) {
  auto f = read_safetensors(good_);
  auto cfg = nlohmann::json::parse(f.metadata["config"]);
  cfg["backbone"]["sphere_channels"] = 1 << 20;
  f.metadata["config"] = cfg.dump();
  const auto path = temp_path("huge.safetensors");
  write_safetensors(path, f);
  expect_error([&] { load_model(path); }, "its configuration needs at least");
  // (key, value, what the message must say); the model has 8 sphere channels.
  const std::vector<std::tuple<const char*, nlohmann::json, std::string>> cases{
      {"sphere_channels", 2.5, "key 'sphere_channels' must be an integer"},
      {"num_layers", "two", "key 'num_layers' must be an integer"},
      {"cutoff", "six", "key 'cutoff' has the wrong type"},
      {"edge_channels", -1, "sizes must be positive"},
      {"act_type", 3, "act_type must be a string"},
      {"charge_balanced_channels",
       {0, 4096},
       "charge_balanced_channels must be contiguous channels"},
      {"charge_balanced_channels",
       {6, 7, 8},
       "charge_balanced_channels must lie in 0..7, got 6..8"},
      {"spin_balanced_channels", {-1, 0}, "spin_balanced_channels must lie in 0..7, got -1..0"},
      {"spin_balanced_channels", {"a"}, "spin_balanced_channels must be a list of channel indices"},
      {"dataset_list", {1, 2}, "model config: malformed value"}};
  for (const auto& [key, value, message] : cases) {
    auto bad = nlohmann::json::parse(read_safetensors(good_).metadata["config"]);
    bad["backbone"][key] = value;
    if (std::string(key) == "dataset_list") bad["backbone"].erase("dataset_mapping");
    SCOPED_TRACE(std::string(key) + " = " + value.dump());
    expect_error([&] { parse_model_config(bad.dump()); }, message);
  }
  fs::remove(path);
}

// Every task of a model file predicts energy, forces or stress; another property
// (or none) is refused when the file is read, not summed into another's metrics.
TEST_F(BadModelFile, UnknownTaskProperty) {
  for (const char* property : {"dipole", ""}) {
    auto f = read_safetensors(good_);
    auto cfg = nlohmann::json::parse(f.metadata["config"]);
    ASSERT_FALSE(cfg["tasks"].empty());
    cfg["tasks"][0]["property"] = property;
    f.metadata["config"] = cfg.dump();
    const auto path = temp_path("property.safetensors");
    write_safetensors(path, f);
    SCOPED_TRACE(property);
    expect_error([&] { load_model(path); },
                 "predicts '" + std::string(property) +
                     "'; this engine knows the properties energy, forces and stress");
    fs::remove(path);
  }
}

TEST(BadTensorFile, MalformedHeaders) {
  auto file_with_header = [](const std::string& header) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    return bytes + header + std::string(16, '\0');
  };
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"({"t": {"dtype": 5, "shape": [1], "data_offsets": [0, 4]}})", "dtype is not a string"},
      {R"({"t": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", "shape is not a list"},
      {R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
       "not a non-negative integer"},
      {R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}})",
       "exceeds the file's size"},
      {R"({"t": {"dtype": "F32", "shape": [4, 4, 4], "data_offsets": [0, 16]}})",
       "needs more bytes"},
      {R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", "pair of byte offsets"},
      {R"({"t": [1, 2]})", "incomplete header entry"},
      {R"({"__metadata__": [1]})", "not a map of strings"},
  };
  for (const auto& [header, message] : cases) {
    std::istringstream in(file_with_header(header));
    expect_error([&] { read_safetensors(in, "case"); }, message);
  }
}

TEST_F(BadStructure, ElementTheModelLacks) {
  Atoms a = copper_cell();
  a.numbers[0] = 100;
  expect_error([&] { evaluate_on_host(engine, {a}); }, "atomic number 100");
  a.numbers[0] = 0;
  expect_error([&] { evaluate_on_host(engine, {a}); }, "atomic number 0");
}

TEST_F(BadStructure, NaNPositions) {
  Atoms a = copper_cell();
  a.positions[1][2] = std::nan("");
  expect_error([&] { evaluate_on_host(engine, {a}); }, "NaN");
}

// Atoms closer than kMinAtomDistance (0.01 A) are refused, naming the pair;
// at the minimum itself they are accepted.
TEST_F(BadStructure, CloseAtoms) {
  Atoms a = copper_cell();
  a.positions[2] = a.positions[0].clone();
  expect_error([&] { evaluate_on_host(engine, {a}); },
               "atoms 0 and 2 (0-based, in input order) are 0 A apart");
  a.positions[2] = a.positions[0] + torch::tensor({0.004, 0.0, 0.003}, torch::kFloat64);
  expect_error([&] { evaluate_on_host(engine, {a}); },
               "atoms 0 and 2 (0-based, in input order) are 0.005 A apart, "
               "closer than the 0.01 A minimum");
  // exactly 0.01 A apart along x (0.0 and 0.01 are exact here: the distance
  // the engine computes is 0.01 to the last bit)
  a.positions[2] = a.positions[0].clone();
  a.positions[0][0] = 0.0;
  a.positions[2][0] = kMinAtomDistance;
  EXPECT_NO_THROW(evaluate_on_host(engine, {a}));
  a.positions[2][0] = 0.999 * kMinAtomDistance;  // below it by more than float32 rounding
  expect_error([&] { evaluate_on_host(engine, {a}); },
               "are 0.00999 A apart, closer than the 0.01 A minimum");
  // Through a periodic image: atom 1 sits 0.002 A from atom 3's image.
  a = copper_cell();
  a.positions[1] =
      a.positions[3] + torch::tensor({a.cell[0][0] - 0.002, 0.0, 0.0}, torch::kFloat64);
  expect_error([&] { evaluate_on_host(engine, {a}); },
               "atoms 1 and 3 (0-based, in input order) are 0.002 A apart");
  Atoms m = molecule();
  m.positions[3] = m.positions[1].clone();
  expect_error([&] { evaluate_on_host(engine, {m}); }, "atoms 1 and 3");
  // In a batch the indices count over the whole batch.
  expect_error([&] { evaluate_on_host(engine, {copper_cell(), m}); }, "atoms 5 and 7");
}

// The multi-rank (local) path refuses the same: non-finite positions and
// close atoms, owned or ghost.
TEST_F(BadStructure, LocalPiecesToo) {
  Atoms piece;
  piece.numbers = {29, 29, 29};
  piece.positions =
      torch::tensor({{0.0, 0.0, 0.0}, {2.5, 0.0, 0.0}, {0.0, 2.5, 0.0}}, torch::kFloat64);
  piece.piece.n_owned = 2;
  piece.piece.composition.assign(30, 0);
  piece.piece.composition[29] = 2;
  piece.task = "omat";
  HostEvaluation r;
  auto evaluate = [&] {
    while (!engine.read(engine.evaluate({piece}, Request::all()), r)) {
    }
  };
  EXPECT_NO_THROW(evaluate());
  piece.positions[2][1] = std::nan("");
  expect_error(evaluate, "NaN");
  piece.positions[2][1] = std::numeric_limits<double>::infinity();
  expect_error(evaluate, "NaN or infinite");
  piece.positions[2] = piece.positions[1] + torch::tensor({0.0, 0.003, 0.0}, torch::kFloat64);
  expect_error(evaluate, "atoms 1 and 2 (0-based, in input order) are 0.003 A apart");
}

TEST_F(BadStructure, ZeroVolumeCell) {
  Atoms a = copper_cell();
  a.cell[2] = a.cell[1];
  expect_error([&] { evaluate_on_host(engine, {a}); }, "zero volume");
  a.cell = {};
  expect_error([&] { evaluate_on_host(engine, {a}); }, "zero volume");
  // Too thin: 0.4 A between the planes along c (a skewed cell of fine volume
  // and edge lengths); 0.5 A is accepted.
  for (double spacing : {0.4, 0.5}) {
    Atoms t =
        atoms_from({29}, {0.0, 0.0, 0.0}, {{{3.0, 0.0, 0.0}, {0.0, 3.0, 0.0}, {2.0, 1.0, spacing}}},
                   {true, true, true}, "omat");
    if (spacing < 0.5)
      expect_error([&] { evaluate_on_host(engine, {t}); },
                   "periodic direction c are 0.400000 A apart, below the 0.5 A minimum");
    else
      EXPECT_NO_THROW(evaluate_on_host(engine, {t}));
  }
}

TEST_F(BadStructure, UnknownTaskChargeSpinShape) {
  Atoms a = copper_cell();
  a.task = "omatt";
  expect_error([&] { evaluate_on_host(engine, {a}); }, "unknown task 'omatt'");
  a = molecule(101, 1);
  expect_error([&] { evaluate_on_host(engine, {a}); }, "charge 101");
  a = molecule(0, -1);
  expect_error([&] { evaluate_on_host(engine, {a}); }, "spin multiplicity -1");
  a = copper_cell();
  a.positions = torch::zeros({3, 3}, torch::kFloat64);
  expect_error([&] { evaluate_on_host(engine, {a}); }, "shape [4, 3]");
}

TEST(BadStructureFile, ExtxyzErrors) {
  const auto path = temp_path("bad.xyz");
  std::ofstream(path)
      << "2\nLattice=\"1 0 0 0 1 0 0 0 1\" Properties=species:S:1:pos:R:3\nCu 0 0 0\n";
  expect_error([&] { read_extxyz(path); }, "ends inside");  // ends inside the frame
  std::ofstream(path) << "1\nProperties=species:S:1:pos:R:3\nQq 0 0 0\n";
  expect_error([&] { read_extxyz(path); }, "unknown element 'Qq'");
  // an atom count above the frame's atoms: the next frame's count line read as an atom
  std::ofstream(path) << "2\nProperties=species:S:1:pos:R:3\nCu 0 0 0\n1\nx\nCu 0 0 0\n";
  expect_error([&] { read_extxyz(path); },
               "unknown element '1' (a frame's atom count? the frame at " + path + ":1 says 2 atoms)");
  std::ofstream(path) << "1\nProperties=species:S:1:pos:R:3\nCu 0 zero 0\n";
  expect_error([&] { read_extxyz(path); }, "not a number");
  const std::vector<std::pair<std::string, std::string>> cases{
      {"1\nProperties=species:S:1:pos:R:3\nCu 0 nan 0\n", "not a finite number"},
      {"1\nProperties=species:S:1:pos:R:3\nCu 0 inf 0\n", "not a finite number"},
      {"1\nLattice=\"1 0 0 0 1 0 0 0 nan\"\nCu 0 0 0\n",
       "Lattice holds a value that is not finite"},
      {"1\nProperties=species:S:1:pos:R:x\nCu 0 0 0\n",
       "Properties width of 'pos' must be one integer"},
      {"1\nProperties=species:S:1:pos:R:100000\nCu 0 0 0\n", "must be 1..64"},
      {"1\nProperties=Z:I:1:pos:R:3\n999 0 0 0\n", "no element has atomic number 999"},
      {"1\nProperties=Z:I:1:pos:R:3\nx 0 0 0\n", "atomic number must be one integer"},
      {"1x\nProperties=species:S:1:pos:R:3\nCu 0 0 0\n", "expected the number of atoms, got '1x'"},
  };
  for (const auto& [text, message] : cases) {
    std::istringstream in(text);
    expect_error([&] { read_extxyz(in, "case"); }, message);
  }
  fs::remove(path);
  expect_error([] { read_extxyz("/nonexistent.xyz"); }, "cannot open");
}

}  // namespace
}  // namespace uma::test
