# `pip install .` (scikit-build-core): umaplugin.so, the uma tool and the
# converter go into the lammps_uma package (python/lammps_uma/), with what
# they were built against in _build_info.json.  They find LibTorch in the
# torch package beside lammps_uma ($ORIGIN-relative), else where it was at
# build time (a torch reached through a .pth file).
set(uma_torch_lib "${UMA_TORCH_DIR}/lib")
set_target_properties(umaplugin PROPERTIES BUILD_WITH_INSTALL_RPATH ON
                      INSTALL_RPATH "$ORIGIN/../torch/lib;${uma_torch_lib}")
install(TARGETS umaplugin LIBRARY DESTINATION lammps_uma)
if(TARGET uma_tool)
  set_target_properties(uma_tool PROPERTIES BUILD_WITH_INSTALL_RPATH ON
                        INSTALL_RPATH "$ORIGIN/../../torch/lib;${uma_torch_lib}")
  install(TARGETS uma_tool RUNTIME DESTINATION lammps_uma/bin)
endif()
install(FILES tools/convert_checkpoint.py tools/export_checkpoint.py DESTINATION lammps_uma)
file(WRITE "${CMAKE_BINARY_DIR}/_build_info.json"
     "{\"lammps\": \"${UMA_PY_LAMMPS_VERSION}\", \"lammps_version_string\": \"${UMA_LAMMPS_VERSION_STRING}\", "
     "\"torch\": \"${UMA_PY_TORCH_VERSION}\", \"uma_tool\": ${UMA_TOOL_BUILT_JSON}}\n")
install(FILES "${CMAKE_BINARY_DIR}/_build_info.json" DESTINATION lammps_uma)
