// Checks an output file's path before the work that produces it, so that a
// run that cannot write its result stops at once instead of after the work.
#pragma once

#include <string>

namespace uma {

// Throws uma::Error when `path` names a folder, lies in a folder that does not
// exist or cannot be written, or names a file that exists and cannot be
// written.  Creates nothing.
void check_output_path(const std::string& path);

}  // namespace uma
