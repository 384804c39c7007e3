// TMA tensor-map kernel arguments (codegen::KernelArg::Kind::kTensorMap) on the device. Each is
// 128 bytes of device memory holding the CUtensorMap encoded over the device address of the
// parameter it describes, so a map belongs to one set of parameter buffers: every other set
// (another check trial's inputs, the timing inputs, another subgraph of a graph) gets its own maps.
// Maps are not data: they are never poisoned, compared or downloaded.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/codegen.h"
#include "runtime/cuda_api.h"
#include "runtime/cuda_device.h"
#include "runtime/cuda_driver.h"

namespace tilesearch::measure {

/// The index in `args` of the parameter (input or output) that tensor-map argument `map_index`
/// describes (its buffer.tensor_map->source), after ir::CheckTensorMap accepted the map against
/// it. Errors: kInvalidArgument when args[map_index] is not a tensor map, when no parameter has
/// the source's name, or CheckTensorMap's.
[[nodiscard]] absl::StatusOr<size_t> TensorMapSource(const std::vector<codegen::KernelArg>& args,
                                                     size_t map_index);

/// For every tensor-map argument i of `args`: allocates 128 bytes of device memory, encodes the
/// map over (*ptrs)[j], the device pointer of its source parameter j (TensorMapSource), copies it
/// there (synchronously) and sets (*ptrs)[i] to it. `ptrs` holds one device pointer per element of
/// `args` with the parameters' set (the tensor-map entries are overwritten); the buffers are
/// appended to `maps`, which must outlive every launch with `ptrs`. Errors: kInvalidArgument for
/// a `ptrs` of another size than `args`; TensorMapSource's; runtime::EncodeTensorMap's; the
/// allocation's and the copy's.
[[nodiscard]] absl::Status BindTensorMaps(const runtime::CudaDriver& driver,
                                          const std::vector<codegen::KernelArg>& args,
                                          std::vector<runtime::cuda::CUdeviceptr>* ptrs,
                                          std::vector<runtime::DeviceBuffer>* maps);

}  // namespace tilesearch::measure
