// Hopper TMA tensor maps (ir::TensorMapSpec) for the CUDA driver: the arguments of
// cuTensorMapEncodeTiled computed from a spec and its source's element type (pure, so they are
// tested without a device), and the encoding itself into the 128 bytes that a kernel's tensor-map
// argument points at (codegen::KernelArg::Kind::kTensorMap). It is the one part of runtime/ that
// reads the IR, hence its own library (ts_tensor_map): ts_runtime keeps depending on nothing of
// ours. Source of the argument conventions: CUDA driver API, cuTensorMapEncodeTiled (cuda.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/stmt.h"
#include "ir/type.h"
#include "runtime/cuda_api.h"
#include "runtime/cuda_driver.h"

namespace tilesearch::runtime {

/// The arguments of cuTensorMapEncodeTiled other than the map and the global address. The driver
/// orders dimensions innermost first, the reverse of TensorMapSpec's dims and box.
struct TensorMapEncoding {
  int data_type = 0;                      // CU_TENSOR_MAP_DATA_TYPE_*
  uint32_t rank = 0;                      // 1..5
  std::vector<uint64_t> global_dim;       // elements, innermost first (rank entries)
  std::vector<uint64_t> global_strides;   // bytes of dims 1..rank-1, innermost first (dense)
  std::vector<uint32_t> box_dim;          // elements, innermost first (rank entries)
  std::vector<uint32_t> element_strides;  // all 1: every element of the box is copied
  int interleave = 0;                     // CU_TENSOR_MAP_INTERLEAVE_NONE
  int swizzle = 0;                        // CU_TENSOR_MAP_SWIZZLE_NONE / 32B / 64B / 128B: 0..3
  int l2_promotion = 0;                   // CU_TENSOR_MAP_L2_PROMOTION_L2_128B (2)
  int oob_fill = 0;                       // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: zeros outside
  bool operator==(const TensorMapEncoding&) const = default;
};

/// The encoding of `map` over a dense row-major source of `dtype` elements whose shape is
/// map.dims (data types: float32 7, float16 6, bfloat16 9, int32 3, int64 5). Errors:
/// kInvalidArgument from ir::CheckTensorMap (rank, extents, box, swizzle, strides), or "tensor
/// map of 'A': element type bool has no CUDA tensor-map data type".
[[nodiscard]] absl::StatusOr<TensorMapEncoding> TensorMapEncodeArgs(const ir::TensorMapSpec& map,
                                                                    ir::ScalarType dtype);

/// The 128 bytes of a CUtensorMap (ir::kTensorMapWords int64 words), ready to copy to the device.
using TensorMapBytes = std::array<uint64_t, ir::kTensorMapWords>;

/// Encodes `map` (named `name` in messages: the map's buffer) over its source at device address
/// `global_address`, whose elements are `dtype`, with cuTensorMapEncodeTiled. Errors:
/// TensorMapEncodeArgs'; kInvalidArgument when `global_address` is not 16-byte aligned;
/// kFailedPrecondition when the driver has no cuTensorMapEncodeTiled (before CUDA 12.0); the
/// driver's CUresult as CudaDriver::Check gives it, "cuTensorMapEncodeTiled(tensor map 'A_map'
/// of 'A'): CUDA_ERROR_INVALID_VALUE: ...".
[[nodiscard]] absl::StatusOr<TensorMapBytes> EncodeTensorMap(const CudaDriver& driver,
                                                             const std::string& name,
                                                             const ir::TensorMapSpec& map,
                                                             ir::ScalarType dtype,
                                                             cuda::CUdeviceptr global_address);

}  // namespace tilesearch::runtime
