# `cmake --install` layout and the package config for find_package(Infini).
# Consumers build the module interfaces (BMIs) themselves from the installed .cppm files,
# so the compiler must be clang >= 19 there too.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(INFINI_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Infini)

# The op lists (cuda/include/infini/op_lists.h) that infini.kernels' interfaces expand: a plain
# header the consumer's compile of those interfaces includes.
install(FILES ${PROJECT_SOURCE_DIR}/cuda/include/infini/op_lists.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/infini)
target_include_directories(infini PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

install(TARGETS infini EXPORT InfiniTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  FILE_SET CXX_MODULES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/infini/modules)
install(EXPORT InfiniTargets
  NAMESPACE Infini::
  DESTINATION ${INFINI_CMAKE_DIR}
  CXX_MODULES_DIRECTORY cxx-modules)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/InfiniConfig.cmake.in
  ${CMAKE_BINARY_DIR}/InfiniConfig.cmake INSTALL_DESTINATION ${INFINI_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/InfiniConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/InfiniConfig.cmake ${CMAKE_BINARY_DIR}/InfiniConfigVersion.cmake
  DESTINATION ${INFINI_CMAKE_DIR})
