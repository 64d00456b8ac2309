# LAMMPS's messages (error->all, utils::logmesg) take the argument types of
# fmt or of std::format, whichever the compiler and C++ standard LAMMPS was
# built with offered (its src/fmt/format.h decides by __cpp_lib_format).  The
# plugin is compiled as C++20: where that gives std::format and LAMMPS was
# built as C++17 with the bundled fmt (LAMMPS's default without KOKKOS, on
# GCC >= 13 or Clang >= 14), umaplugin.so builds but does not load
# ("undefined symbol: ...Error4_all...").  One call of error->all is linked
# against the LAMMPS found, so that such a pair is refused here, with the fix.
include(CheckCXXSourceCompiles)
function(uma_check_lammps_format_abi lammps_src extra_includes)
  set(CMAKE_REQUIRED_INCLUDES ${lammps_src} ${extra_includes})
  set(CMAKE_REQUIRED_LIBRARIES LAMMPS::lammps)
  set(CMAKE_REQUIRED_QUIET ON)
  unset(UMA_LAMMPS_MESSAGES_LINK CACHE)   # again at every configure: LAMMPS may have been rebuilt
  check_cxx_source_compiles([=[
#include "error.h"
#include "lammps.h"
int main(int argc, char **) {
  LAMMPS_NS::LAMMPS *lmp = nullptr;
  if (argc > 99) lmp->error->all(FLERR, "{} {}", argc, 1.5);
  return 0;
}]=] UMA_LAMMPS_MESSAGES_LINK)
  if(NOT UMA_LAMMPS_MESSAGES_LINK)
    get_target_property(lib LAMMPS::lammps LOCATION)
    message(FATAL_ERROR
      "umaplugin.so would not load into the LAMMPS found (${lib}): a call of its "
      "error->all, compiled here as C++20 with ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}, "
      "does not link against it.  The usual cause: LAMMPS was built as C++17, so its messages "
      "use the bundled fmt, while this compiler at C++20 gives std::format (LAMMPS's "
      "src/fmt/format.h chooses by __cpp_lib_format).  Rebuild LAMMPS with "
      "-D CMAKE_CXX_STANDARD=20 and this compiler (the KOKKOS package does so by itself).  "
      "CMakeFiles/CMakeConfigureLog.yaml has the linker's message.")
  endif()
endfunction()
