# lmfuse CMake package: install rules, lmfuse-config.cmake and lmfuse_rewrite() (see cmake/LmfuseRewrite.cmake).
#   find_package(lmfuse CONFIG [COMPONENTS runtime torch tool]) gives lmfuse::runtime and
#   lmfuse::runtime_cpu (component runtime: no LibTorch needed; runtime_cpu links no CUDA library),
#   lmfuse::torch (component torch, when built with LibTorch), the imported executable lmfuse::lmfuse
#   (component tool, when the tool was built), LMFUSE_PATTERNS and lmfuse_rewrite().
# In-tree (add_subdirectory), the same names exist: lmfuse::runtime(_cpu), lmfuse::torch, the `lmfuse` target.
include(CMakePackageConfigHelpers)

set(LMFUSE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/lmfuse")
set(LMFUSE_INSTALL_PATTERNSDIR "${CMAKE_INSTALL_DATADIR}/lmfuse/patterns")

# In-tree values for lmfuse_rewrite().
set(LMFUSE_PATTERNS "${PROJECT_SOURCE_DIR}/patterns/libtorch.yaml" CACHE FILEPATH "The lmfuse pattern set lmfuse_rewrite() uses")
include(LmfuseRewrite)

set(_lmfuse_exported lmfuse_runtime lmfuse_runtime_cpu)
if(TARGET lmfuse)
  set_target_properties(lmfuse PROPERTIES EXPORT_NAME lmfuse)
  list(APPEND _lmfuse_exported lmfuse)
endif()
install(TARGETS ${_lmfuse_exported} EXPORT lmfuseTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# lmfuse_torch installs itself into the same export set (torch/CMakeLists.txt).
install(EXPORT lmfuseTargets NAMESPACE lmfuse:: DESTINATION "${LMFUSE_INSTALL_CMAKEDIR}")

if(EXISTS "${PROJECT_SOURCE_DIR}/patterns")
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/patterns/" DESTINATION "${LMFUSE_INSTALL_PATTERNSDIR}"
          FILES_MATCHING PATTERN "*.yaml" PATTERN "*.json")
endif()

set(LMFUSE_PACKAGE_HAS_TORCH ${LMFUSE_HAVE_TORCH})
set(LMFUSE_PACKAGE_HAS_CUDA ${LMFUSE_HAVE_CUDA})
set(LMFUSE_PACKAGE_HAS_OPENMP OFF)
if(LMFUSE_RUNTIME_OPENMP)  # set by runtime/src/cpu
  set(LMFUSE_PACKAGE_HAS_OPENMP ON)
endif()
set(LMFUSE_PACKAGE_HAS_TOOL OFF)
if(TARGET lmfuse)
  set(LMFUSE_PACKAGE_HAS_TOOL ON)
endif()
configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/lmfuse-config.cmake.in"
  "${PROJECT_BINARY_DIR}/lmfuse-config.cmake"
  INSTALL_DESTINATION "${LMFUSE_INSTALL_CMAKEDIR}"
  PATH_VARS LMFUSE_INSTALL_PATTERNSDIR)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/lmfuse-config-version.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/lmfuse-config.cmake"
  "${PROJECT_BINARY_DIR}/lmfuse-config-version.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/LmfuseRewrite.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/LmfuseRewriteStep.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/LmfuseWriteFile.cmake"
  DESTINATION "${LMFUSE_INSTALL_CMAKEDIR}")
