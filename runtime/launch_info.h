// Conversion of the scheduler's launch configurations (schedule::LaunchConfig) to codegen's
// (codegen::LaunchInfo): the same numbers, in one place for the tuner, replay, the measurer's
// reference kernels and the CLI.
#pragma once

#include <vector>

#include "codegen/codegen.h"
#include "schedule/lower.h"

namespace tilesearch::runtime {

/// One codegen::LaunchInfo per schedule::LaunchConfig, in order (grid, block, shared bytes,
/// min blocks per SM).
inline std::vector<codegen::LaunchInfo> ToLaunchInfos(
    const std::vector<schedule::LaunchConfig>& launches) {
  std::vector<codegen::LaunchInfo> infos;
  infos.reserve(launches.size());
  for (const schedule::LaunchConfig& l : launches) {
    codegen::LaunchInfo info;
    info.grid = l.grid;
    info.block = l.block;
    info.shared_memory_bytes = l.shared_memory_bytes;
    info.min_blocks_per_sm = l.min_blocks_per_sm;
    infos.push_back(info);
  }
  return infos;
}

}  // namespace tilesearch::runtime
