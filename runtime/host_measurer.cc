// The host (cpu target) measurer. Being written: until then CreateHostMeasurer reports
// kUnimplemented.
#include "runtime/measure.h"

namespace tilesearch::runtime {

absl::StatusOr<std::unique_ptr<Measurer>> CreateHostMeasurer(const schedule::Target&,
                                                             const MeasureOptions&) {
  return absl::UnimplementedError("the host measurer is not written yet");
}

}  // namespace tilesearch::runtime
