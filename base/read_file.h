// Reading a whole file, with the reason when it fails.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace tilesearch {

/// The bytes of the file at `path`; `what` names it in errors ("schedule file"). Errors:
/// kNotFound "cannot read WHAT 'PATH': No such file or directory"; kInvalidArgument "cannot read
/// WHAT 'PATH': it is a directory" (an ifstream opens one and reads nothing, which a parser would
/// blame on the contents), or the system's reason for any other failure to open or read.
absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what);

}  // namespace tilesearch
