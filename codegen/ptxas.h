// ptxas, the CUDA toolkit's PTX assembler, run as a separate program: where to find it and the
// assembly of generated PTX into a cubin for one architecture. Used for the cubins of kernel
// artifacts and by the Builder, so that the runner loads machine code instead of paying the
// driver's JIT compilation for every measured candidate.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace tilesearch::codegen {

/// The ptxas to use: $TILESEARCH_PTXAS when set and non-empty (even if not executable: then
/// assembling fails naming it), else `ptxas` on PATH, else /usr/local/cuda/bin/ptxas when it is
/// executable; nullopt when none.
std::optional<std::string> FindPtxas();

/// Assembles `ptx` for `arch` ("sm_90") with `ptxas -arch=<arch>` into a cubin. Errors: kInternal
/// "ptxas -arch=sm_90 failed (exit 255): <its stderr>"; kInternal when it cannot be run.
[[nodiscard]] absl::StatusOr<std::string> AssemblePtx(const std::string& ptxas,
                                                      const std::string& ptx,
                                                      const std::string& arch);

}  // namespace tilesearch::codegen
