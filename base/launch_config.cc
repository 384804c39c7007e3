#include "base/launch_config.h"

#include "absl/strings/str_cat.h"

namespace tilesearch {

std::string LaunchConfig::ToString() const {
  return absl::StrCat("grid (", grid[0], ", ", grid[1], ", ", grid[2], ") block (", block[0], ", ",
                      block[1], ", ", block[2], ") shared ", shared_memory_bytes, " B",
                      min_blocks_per_sm > 0 ? absl::StrCat(" min ", min_blocks_per_sm, " blocks/SM")
                                            : std::string());
}

}  // namespace tilesearch
