# The installable package. Included by the top-level CMakeLists.txt after every library exists,
# with TILESEARCH_PACKAGE_LIBRARIES naming the libraries to install. Installs:
#   lib/libts_*.a                  those libraries;
#   include/tilesearch/<folder>/   the headers of each library's folder, folder layout kept (sources
#                                  include "search/api.h"), except codegen's MLIR-facing internals;
#   lib/cmake/tilesearch/          tilesearchConfig.cmake, its version file, the export set and
#                                  XGBoostTarget.cmake (the config's xgboost::xgboost);
#   bin/tilesearch                 the command-line tool.
# find_package(tilesearch CONFIG) then gives one target, tilesearch::tilesearch, carrying every
# library, include directory and dependency. Only the development build (shared MLIR/LLVM) exports
# the package: the static device-pack build rewrites MLIR's own targets to static archives, which
# a consumer's find_package(MLIR) would not reproduce; it installs the tool alone.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TILESEARCH_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/tilesearch)
set(TILESEARCH_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/tilesearch)

# The installed tool finds libMLIR / libLLVM / libxgboost where it was linked against them.
set_target_properties(tilesearch PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS tilesearch RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

if(NOT TILESEARCH_MLIR_SHARED)
  set(TILESEARCH_PACKAGE OFF)
  return()
endif()
set(TILESEARCH_PACKAGE ON)

# The one target a consumer links. In this build tree it is tilesearch::tilesearch too.
add_library(tilesearch_package INTERFACE)
set_target_properties(tilesearch_package PROPERTIES EXPORT_NAME tilesearch)
target_link_libraries(tilesearch_package INTERFACE ${TILESEARCH_PACKAGE_LIBRARIES})
target_include_directories(tilesearch_package INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<INSTALL_INTERFACE:${TILESEARCH_INSTALL_INCLUDEDIR}>)
target_compile_features(tilesearch_package INTERFACE cxx_std_20)
add_library(tilesearch::tilesearch ALIAS tilesearch_package)

set(TS_HEADER_DIRS "")
foreach(TS_LIB IN LISTS TILESEARCH_PACKAGE_LIBRARIES)
  # Install-only include directory: the build tree keeps its one global include path.
  target_include_directories(${TS_LIB} INTERFACE $<INSTALL_INTERFACE:${TILESEARCH_INSTALL_INCLUDEDIR}>)
  get_target_property(TS_DIR ${TS_LIB} SOURCE_DIR)
  list(APPEND TS_HEADER_DIRS ${TS_DIR})
endforeach()
list(REMOVE_DUPLICATES TS_HEADER_DIRS)

foreach(TS_DIR IN LISTS TS_HEADER_DIRS)
  file(RELATIVE_PATH TS_REL ${PROJECT_SOURCE_DIR} ${TS_DIR})
  # Headers that include MLIR or LLVM headers are codegen's internals (no public header includes
  # them) and would need MLIR's include tree: not installed.
  file(GLOB_RECURSE TS_HEADERS RELATIVE ${TS_DIR} ${TS_DIR}/*.h)
  set(TS_EXCLUDES "")
  foreach(TS_H IN LISTS TS_HEADERS)
    file(STRINGS ${TS_DIR}/${TS_H} TS_MLIR_INCLUDES REGEX "^#include [<\"](mlir|llvm)/")
    if(TS_MLIR_INCLUDES)
      string(REGEX REPLACE "([.+])" "\\\\\\1" TS_H_REGEX "${TS_H}")
      list(APPEND TS_EXCLUDES REGEX "/${TS_REL}/${TS_H_REGEX}$" EXCLUDE)
    endif()
  endforeach()
  install(DIRECTORY ${TS_DIR}/ DESTINATION ${TILESEARCH_INSTALL_INCLUDEDIR}/${TS_REL}
          FILES_MATCHING PATTERN "*.h" ${TS_EXCLUDES})
endforeach()

install(TARGETS ${TILESEARCH_PACKAGE_LIBRARIES} tilesearch_package EXPORT tilesearchTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT tilesearchTargets NAMESPACE tilesearch:: DESTINATION ${TILESEARCH_INSTALL_CMAKEDIR})

get_filename_component(TILESEARCH_XGBOOST_LIBDIR "${TILESEARCH_XGBOOST_LIB}" DIRECTORY)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tilesearchConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tilesearchConfig.cmake INSTALL_DESTINATION ${TILESEARCH_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tilesearchConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tilesearchConfig.cmake
              ${PROJECT_BINARY_DIR}/tilesearchConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/XGBoostTarget.cmake
        DESTINATION ${TILESEARCH_INSTALL_CMAKEDIR})
