// Extended XYZ reader/writer (the format ASE writes): per-frame key=value
// comment line with Lattice, Properties, pbc and scalar labels, then one row
// per atom.
#pragma once

#include <istream>
#include <map>
#include <string>
#include <vector>

#include "core/matrix3.h"

namespace uma {

struct Frame {
  std::vector<int64_t> numbers;
  std::vector<double> positions;  // N * 3
  Matrix3 cell{};
  std::array<bool, 3> pbc{false, false, false};
  bool has_cell = false;
  std::map<std::string, std::string> info;            // other key=value pairs
  std::map<std::string, std::vector<double>> arrays;  // other real/integer per-atom columns
  std::map<std::string, int> array_width;
};

// The numbers in a whitespace-separated text; throws uma::Error naming
// `where` and the offending token.
std::vector<double> parse_numbers(const std::string& text, const std::string& where);

// One integer (e.g. a charge= or spin= label); throws uma::Error naming
// `where` unless the text is exactly one whole number.
int64_t parse_integer(const std::string& text, const std::string& where);

// Reads every frame; throws uma::Error with the file name and line number.
std::vector<Frame> read_extxyz(const std::string& path);
// The same from a stream; `path` names it in messages.
std::vector<Frame> read_extxyz(std::istream& in, const std::string& path);
void write_extxyz(const std::string& path, const std::vector<Frame>& frames, bool append = false);

}  // namespace uma
