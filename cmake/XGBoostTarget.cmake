# Defines the imported target xgboost::xgboost (the shared library and its C API headers) when it
# does not exist yet, from find_library / find_path (first in TILESEARCH_XGBOOST_HINTS, if set).
# Debian's libxgboost-dev ships its own CMake package, but loading it fails unless the separate
# xgboost command-line package is installed too (it checks for /usr/bin/xgboost). Leaves the target
# undefined when the library or header is missing: the caller reports that.
if(NOT TARGET xgboost::xgboost)
  find_library(TILESEARCH_XGBOOST_LIB xgboost HINTS ${TILESEARCH_XGBOOST_HINTS})
  find_path(TILESEARCH_XGBOOST_INCLUDE xgboost/c_api.h)
  if(TILESEARCH_XGBOOST_LIB AND TILESEARCH_XGBOOST_INCLUDE)
    add_library(xgboost::xgboost UNKNOWN IMPORTED GLOBAL)
    set_target_properties(xgboost::xgboost PROPERTIES
      IMPORTED_LOCATION "${TILESEARCH_XGBOOST_LIB}"
      INTERFACE_INCLUDE_DIRECTORIES "${TILESEARCH_XGBOOST_INCLUDE}")
  endif()
endif()
