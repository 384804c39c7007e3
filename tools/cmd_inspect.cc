// Placeholder: `tilesearch inspect` (filled by its owner).
#include "tools/commands.h"
namespace tilesearch::tools {
ExitCodeAction AddInspectCommand(CLI::App& app) {
  (void)app;
  return []() -> absl::StatusOr<int> { return absl::UnimplementedError("inspect: not built yet"); };
}
}  // namespace tilesearch::tools
