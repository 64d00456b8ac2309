// The exception types the engine throws for bad input or bad files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace uma {

// A number in a message, to three significant digits ("0.005", "0.5").
inline std::string format_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Two distinct atoms closer than the minimum distance (radius_graph.h),
// numbered 0-based in the order the caller gave them (over the whole batch),
// so a caller can name them in its own terms (LAMMPS atom IDs, frames).
class CloseAtomsError : public Error {
 public:
  CloseAtomsError(int64_t first, int64_t second, double distance, double minimum)
      : Error("atoms " + std::to_string(first) + " and " + std::to_string(second) +
              " (0-based, in input order) are " + format_number(distance) +
              " A apart, closer than the " + format_number(minimum) + " A minimum"),
        first(first),
        second(second),
        distance(distance) {}
  int64_t first, second;
  double distance;
};

}  // namespace uma
