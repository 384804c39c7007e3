#include "base/write_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace tilesearch {

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    const int err = errno;
    const std::string reason = std::strerror(err);
    if (err == EACCES) {
      return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "': ", reason));
    }
    return absl::InternalError(absl::StrCat("cannot write '", path, "': ", reason));
  }
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

}  // namespace tilesearch
