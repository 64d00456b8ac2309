#include "io/output_path.h"

#include <unistd.h>

#include <filesystem>

#include "core/uma_error.h"

namespace uma {

void check_output_path(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) throw Error("empty output file name");
  std::error_code ec;
  const fs::path file(path);
  if (fs::is_directory(file, ec)) throw Error("cannot write '" + path + "': it is a folder");
  const fs::path folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
  if (!fs::is_directory(folder, ec))
    throw Error("cannot write '" + path + "': there is no folder '" + folder.string() + "'");
  // Files are written beside their target and renamed over it (the folder),
  // or appended to (the file itself).
  if (::access(folder.c_str(), W_OK) != 0)
    throw Error("cannot write '" + path + "': the folder '" + folder.string() +
                "' is not writable");
  if (fs::exists(file, ec) && ::access(file.c_str(), W_OK) != 0)
    throw Error("cannot write '" + path + "': the file is not writable");
}

}  // namespace uma
