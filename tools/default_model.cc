#include <cstdlib>
#include <filesystem>
#include <string>

#include "tools/model_options.h"

namespace tilesearch::tools {

std::string DefaultModelPath(const Target& target) {
  if (!target.is_gpu()) return "";
  const char* env = std::getenv("TILESEARCH_MODELS_DIR");
  const std::filesystem::path dir = env != nullptr && *env != '\0' ? env : TS_MODELS_DIR;
  const std::filesystem::path path = dir / ("default-cuda-" + target.arch + ".model");
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) ? path.string() : "";
}

}  // namespace tilesearch::tools
