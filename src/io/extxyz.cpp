#include "io/extxyz.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "core/elements.h"
#include "core/uma_error.h"

namespace uma {
namespace {

// Splits `key=value key="quoted value"` pairs.
std::map<std::string, std::string> parse_comment(const std::string& line,
                                                 const std::string& where) {
  std::map<std::string, std::string> kv;
  size_t i = 0;
  auto skip = [&] {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
  };
  auto word = [&](bool stop_at_eq) {
    std::string w;
    if (i < line.size() && (line[i] == '"' || line[i] == '\'')) {
      const char q = line[i++];
      while (i < line.size() && line[i] != q) w.push_back(line[i++]);
      if (i >= line.size()) throw Error(where + ": unterminated quote");
      ++i;
      return w;
    }
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i])) &&
           !(stop_at_eq && line[i] == '='))
      w.push_back(line[i++]);
    return w;
  };
  for (skip(); i < line.size(); skip()) {
    std::string key = word(true);
    std::string value = "T";
    if (i < line.size() && line[i] == '=') {
      ++i;
      value = word(false);
    }
    kv[key] = value;
  }
  return kv;
}

bool truthy(const std::string& s) { return s == "T" || s == "True" || s == "true" || s == "1"; }

// Wider per-atom columns than any real property (3 x 3 tensors are 9).
constexpr int64_t kMaxColumnWidth = 64;

struct Column {
  std::string name;
  char type;
  int width;
};

}  // namespace

int64_t parse_integer(const std::string& text, const std::string& where) {
  std::vector<double> v;
  try {
    v = parse_numbers(text, where);
  } catch (const Error&) {
    v.clear();
  }
  if (v.size() != 1 || v[0] != std::floor(v[0]) || std::abs(v[0]) > 1e15)
    throw Error(where + " must be one integer, got '" + text + "'");
  return static_cast<int64_t>(v[0]);
}

std::vector<double> parse_numbers(const std::string& text, const std::string& where) {
  std::istringstream in(text);
  std::vector<double> v;
  std::string tok;
  while (in >> tok) {
    try {
      size_t used = 0;
      v.push_back(std::stod(tok, &used));
      if (used != tok.size()) throw std::invalid_argument(tok);
    } catch (const std::exception&) {
      throw Error(where + ": '" + tok + "' is not a number");
    }
  }
  return v;
}

std::vector<Frame> read_extxyz(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open structure file '" + path + "'");
  return read_extxyz(in, path);
}

std::vector<Frame> read_extxyz(std::istream& in, const std::string& path) {
  std::vector<Frame> frames;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where0 = path + ":" + std::to_string(lineno);
    int64_t natoms = 0;
    try {
      natoms = parse_integer(line, where0);
    } catch (const Error&) {
      throw Error(where0 + ": expected the number of atoms, got '" + line + "'");
    }
    if (natoms <= 0) throw Error(where0 + ": the number of atoms must be positive");
    if (!std::getline(in, line)) throw Error(where0 + ": missing comment line");
    ++lineno;
    const std::string where = path + ":" + std::to_string(lineno);
    auto kv = parse_comment(line, where);

    Frame f;
    std::vector<Column> columns{{"species", 'S', 1}, {"pos", 'R', 3}};
    if (kv.count("Properties")) {
      columns.clear();
      std::vector<std::string> parts;
      std::stringstream ss(kv["Properties"]);
      std::string p;
      while (std::getline(ss, p, ':')) parts.push_back(p);
      if (parts.size() % 3 != 0) throw Error(where + ": malformed Properties");
      for (size_t k = 0; k < parts.size(); k += 3) {
        const int64_t width =
            parse_integer(parts[k + 2], where + ": Properties width of '" + parts[k] + "'");
        if (width < 1 || width > kMaxColumnWidth)
          throw Error(where + ": Properties width of '" + parts[k] + "' must be 1.." +
                      std::to_string(kMaxColumnWidth));
        columns.push_back(
            {parts[k], parts[k + 1].empty() ? 'R' : parts[k + 1][0], static_cast<int>(width)});
      }
      kv.erase("Properties");
    }
    if (kv.count("Lattice")) {
      auto v = parse_numbers(kv["Lattice"], where);
      if (v.size() != 9) throw Error(where + ": Lattice needs 9 numbers");
      for (double x : v)
        if (!std::isfinite(x)) throw Error(where + ": Lattice holds a value that is not finite");
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) f.cell[r][c] = v[3 * r + c];
      f.has_cell = true;
      f.pbc = {true, true, true};
      kv.erase("Lattice");
    }
    if (kv.count("pbc")) {
      std::istringstream ps(kv["pbc"]);
      std::string t;
      for (int k = 0; k < 3; ++k) {
        if (!(ps >> t)) throw Error(where + ": pbc needs 3 values");
        f.pbc[k] = truthy(t);
      }
      kv.erase("pbc");
    }
    f.info = kv;

    for (int64_t a = 0; a < natoms; ++a) {
      if (!std::getline(in, line))
        throw Error(path + ": file ends inside a frame (expected " + std::to_string(natoms) +
                    " atom lines)");
      ++lineno;
      const std::string wa = path + ":" + std::to_string(lineno);
      std::istringstream row(line);
      for (const auto& col : columns) {
        for (int w = 0; w < col.width; ++w) {
          std::string tok;
          if (!(row >> tok)) throw Error(wa + ": too few columns");
          if (col.name == "species") {
            const int z = atomic_number(tok);
            if (z == 0) {
              const bool count_like = tok.find_first_not_of("0123456789") == std::string::npos;
              throw Error(wa + ": unknown element '" + tok + "'" +
                          (count_like ? " (a frame's atom count? the frame at " + where0 +
                                            " says " + std::to_string(natoms) + " atoms)"
                                      : ""));
            }
            f.numbers.push_back(z);
          } else if (col.name == "Z") {
            const int64_t z = parse_integer(tok, wa + ": atomic number");
            if (z < 1 || z > 118 || element_symbol(static_cast<int>(z)).empty())
              throw Error(wa + ": no element has atomic number " + tok);
            f.numbers.push_back(z);
          } else if (col.type == 'R' || col.type == 'I') {
            const double v = parse_numbers(tok, wa).at(0);
            if (col.name == "pos" && !std::isfinite(v))
              throw Error(wa + ": position '" + tok + "' is not a finite number");
            if (col.name == "pos")
              f.positions.push_back(v);
            else
              f.arrays[col.name].push_back(v);
          }
          // string / logical columns other than species are ignored
        }
        if (col.name != "pos" && col.name != "species" && col.name != "Z" &&
            (col.type == 'R' || col.type == 'I'))
          f.array_width[col.name] = col.width;
      }
    }
    if (static_cast<int64_t>(f.positions.size()) != 3 * natoms ||
        static_cast<int64_t>(f.numbers.size()) != natoms)
      throw Error(where + ": frame lacks species or pos columns");
    frames.push_back(std::move(f));
  }
  if (frames.empty()) throw Error("structure file '" + path + "' holds no frames");
  return frames;
}

void write_extxyz(const std::string& path, const std::vector<Frame>& frames, bool append) {
  std::ofstream out(path, append ? std::ios::app : std::ios::trunc);
  if (!out) throw Error("cannot write '" + path + "'");
  out << std::setprecision(17);
  for (const auto& f : frames) {
    const size_t n = f.numbers.size();
    out << n << "\n";
    if (f.has_cell) {
      out << "Lattice=\"";
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) out << f.cell[r][c] << (r == 2 && c == 2 ? "" : " ");
      out << "\" ";
    }
    out << "Properties=species:S:1:pos:R:3";
    for (const auto& [name, width] : f.array_width) out << ":" << name << ":R:" << width;
    for (const auto& [k, v] : f.info) out << " " << k << "=\"" << v << "\"";
    out << " pbc=\"" << (f.pbc[0] ? "T" : "F") << " " << (f.pbc[1] ? "T" : "F") << " "
        << (f.pbc[2] ? "T" : "F") << "\"\n";
    for (size_t a = 0; a < n; ++a) {
      out << element_symbol(static_cast<int>(f.numbers[a]));
      for (int k = 0; k < 3; ++k) out << " " << f.positions[3 * a + k];
      for (const auto& [name, width] : f.array_width)
        for (int w = 0; w < width; ++w) out << " " << f.arrays.at(name)[a * width + w];
      out << "\n";
    }
  }
  if (!out) throw Error("failed while writing '" + path + "'");
}

}  // namespace uma
