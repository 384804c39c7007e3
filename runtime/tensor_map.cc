#include "runtime/tensor_map.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tilesearch::runtime {
namespace {

absl::StatusOr<int> DataType(const ir::TensorMapSpec& map, ir::ScalarType dtype) {
  switch (dtype) {
    case ir::ScalarType::kFloat32:
      return cuda::CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case ir::ScalarType::kFloat16:
      return cuda::CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case ir::ScalarType::kBFloat16:
      return cuda::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case ir::ScalarType::kInt32:
      return cuda::CU_TENSOR_MAP_DATA_TYPE_INT32;
    case ir::ScalarType::kInt64:
      return cuda::CU_TENSOR_MAP_DATA_TYPE_INT64;
    case ir::ScalarType::kBool:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("tensor map of '", map.source, "': element type ",
                                                 ir::TypeName(dtype),
                                                 " has no CUDA tensor-map data type"));
}

int Swizzle(int64_t bytes) {
  switch (bytes) {
    case 32:
      return cuda::CU_TENSOR_MAP_SWIZZLE_32B;
    case 64:
      return cuda::CU_TENSOR_MAP_SWIZZLE_64B;
    case 128:
      return cuda::CU_TENSOR_MAP_SWIZZLE_128B;
    default:  // 0: CheckTensorMap refused every other value
      return cuda::CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

}  // namespace

absl::StatusOr<TensorMapEncoding> TensorMapEncodeArgs(const ir::TensorMapSpec& map,
                                                      ir::ScalarType dtype) {
  // The source is the dense tensor of map.dims itself, so only the map's own limits are checked.
  ir::BufferDecl source;
  source.name = map.source;
  source.dtype = dtype;
  source.shape = map.dims;
  RETURN_IF_ERROR(ir::CheckTensorMap(map, source));
  TensorMapEncoding e;
  ASSIGN_OR_RETURN(e.data_type, DataType(map, dtype));
  e.rank = static_cast<uint32_t>(map.dims.size());
  uint64_t stride = static_cast<uint64_t>(ir::BytesOf(dtype));
  for (size_t d = map.dims.size(); d-- > 0;) {
    e.global_dim.push_back(static_cast<uint64_t>(map.dims[d]));
    e.box_dim.push_back(static_cast<uint32_t>(map.box[d]));
    e.element_strides.push_back(1);
    // Dense row-major: dimension d-1 steps over a whole row of dimension d.
    stride *= static_cast<uint64_t>(map.dims[d]);
    if (d > 0) e.global_strides.push_back(stride);
  }
  e.interleave = cuda::CU_TENSOR_MAP_INTERLEAVE_NONE;
  e.swizzle = Swizzle(map.swizzle);
  // The benchmark harness encodes with the same promotion, so tuning and scoring time one map.
  e.l2_promotion = cuda::CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  e.oob_fill = cuda::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
  return e;
}

absl::StatusOr<TensorMapBytes> EncodeTensorMap(const CudaDriver& driver, const std::string& name,
                                               const ir::TensorMapSpec& map, ir::ScalarType dtype,
                                               cuda::CUdeviceptr global_address) {
  const std::string what = absl::StrCat("tensor map '", name, "' of '", map.source, "'");
  ASSIGN_OR_RETURN(TensorMapEncoding e, TensorMapEncodeArgs(map, dtype));
  if (global_address % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": source address 0x", absl::Hex(global_address), " is not 16-byte aligned"));
  }
  if (driver.cuTensorMapEncodeTiled == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the CUDA driver at ", driver.path(),
                     " has no cuTensorMapEncodeTiled (TMA needs a CUDA 12.0 or newer driver)"));
  }
  // Rank 1 has no strides: the driver gets a valid (ignored) array all the same.
  std::array<cuda::cuuint64_t, 5> dims{}, strides{};
  std::array<cuda::cuuint32_t, 5> box{}, element_strides{};
  std::copy(e.global_dim.begin(), e.global_dim.end(), dims.begin());
  std::copy(e.global_strides.begin(), e.global_strides.end(), strides.begin());
  std::copy(e.box_dim.begin(), e.box_dim.end(), box.begin());
  std::copy(e.element_strides.begin(), e.element_strides.end(), element_strides.begin());
  cuda::CUtensorMap encoded{};
  RETURN_IF_ERROR(driver.Check(
      driver.cuTensorMapEncodeTiled(&encoded, e.data_type, e.rank,
                                    reinterpret_cast<void*>(static_cast<uintptr_t>(global_address)),
                                    dims.data(), strides.data(), box.data(), element_strides.data(),
                                    e.interleave, e.swizzle, e.l2_promotion, e.oob_fill),
      absl::StrCat("cuTensorMapEncodeTiled(", what, ")")));
  TensorMapBytes bytes;
  static_assert(sizeof(bytes) == sizeof(encoded.opaque), "a CUtensorMap is 128 bytes");
  std::memcpy(bytes.data(), encoded.opaque, sizeof(bytes));
  return bytes;
}

}  // namespace tilesearch::runtime
