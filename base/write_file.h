// Writing a whole file, with the reason when it fails.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace tilesearch {

/// Writes `bytes` to `path` (created or truncated). Errors: kPermissionDenied "cannot write
/// 'PATH': Permission denied" for EACCES, kInternal "cannot write 'PATH': <reason>" otherwise (a
/// missing folder, a directory in the way, a short write such as a full disk).
absl::Status WriteFile(const std::string& path, const std::string& bytes);

}  // namespace tilesearch
