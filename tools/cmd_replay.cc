// Placeholder: `tilesearch replay` (filled by its owner).
#include "tools/commands.h"
namespace tilesearch::tools {
ExitCodeAction AddReplayCommand(CLI::App& app) {
  (void)app;
  return []() -> absl::StatusOr<int> { return absl::UnimplementedError("replay: not built yet"); };
}
}  // namespace tilesearch::tools
