// Conversion of the scheduler's launch configurations to codegen's (the same numbers), shared by
// `tilesearch show --emit` and `tilesearch measure`.
#pragma once

#include <vector>

#include "codegen/codegen.h"
#include "schedule/lower.h"

namespace tilesearch::tools {

/// One codegen::LaunchInfo per schedule::LaunchConfig, in order (grid, block, shared bytes).
inline std::vector<codegen::LaunchInfo> ToLaunchInfos(
    const std::vector<schedule::LaunchConfig>& launches) {
  std::vector<codegen::LaunchInfo> infos;
  infos.reserve(launches.size());
  for (const schedule::LaunchConfig& l : launches) {
    codegen::LaunchInfo info;
    info.grid = l.grid;
    info.block = l.block;
    info.shared_memory_bytes = l.shared_memory_bytes;
    infos.push_back(info);
  }
  return infos;
}

}  // namespace tilesearch::tools
