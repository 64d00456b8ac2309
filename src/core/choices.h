// The accepted names of a user-facing choice, as messages list them.
#pragma once

#include <string>
#include <vector>

namespace uma {

// "a", "a or b", "a, b or c".
inline std::string one_of(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

}  // namespace uma
