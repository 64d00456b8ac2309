// The one exception type the engine throws for bad input or bad files.
#pragma once

#include <stdexcept>
#include <string>

namespace uma {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace uma
