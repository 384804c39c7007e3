#include "measure/tensor_map_args.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/tensor_map.h"

namespace tilesearch::measure {

using Kind = codegen::KernelArg::Kind;

absl::StatusOr<size_t> TensorMapSource(const std::vector<codegen::KernelArg>& args,
                                       size_t map_index) {
  const codegen::KernelArg& map = args.at(map_index);
  if (map.kind != Kind::kTensorMap || !map.buffer.tensor_map) {
    return absl::InvalidArgumentError(
        absl::StrCat("argument ", map_index, " '", map.buffer.name, "' is not a tensor map"));
  }
  const ir::TensorMapSpec& spec = *map.buffer.tensor_map;
  for (size_t j = 0; j < args.size(); ++j) {
    const codegen::KernelArg& a = args[j];
    if ((a.kind != Kind::kInput && a.kind != Kind::kOutput) || a.buffer.name != spec.source) {
      continue;
    }
    RETURN_IF_ERROR(ir::CheckTensorMap(spec, a.buffer));
    return j;
  }
  return absl::InvalidArgumentError(absl::StrCat("tensor map '", map.buffer.name, "' describes '",
                                                 spec.source,
                                                 "', which is not a parameter of the kernel"));
}

absl::Status BindTensorMaps(const runtime::CudaDriver& driver,
                            const std::vector<codegen::KernelArg>& args,
                            std::vector<runtime::cuda::CUdeviceptr>* ptrs,
                            std::vector<runtime::DeviceBuffer>* maps) {
  if (ptrs->size() != args.size()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor maps of a kernel with ", args.size(),
                                                   " arguments bound to ", ptrs->size(),
                                                   " pointers"));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind != Kind::kTensorMap) continue;
    ASSIGN_OR_RETURN(const size_t source, TensorMapSource(args, i));
    ASSIGN_OR_RETURN(
        runtime::TensorMapBytes bytes,
        runtime::EncodeTensorMap(driver, args[i].buffer.name, *args[i].buffer.tensor_map,
                                 args[source].buffer.dtype, (*ptrs)[source]));
    ASSIGN_OR_RETURN(runtime::DeviceBuffer b,
                     runtime::DeviceBuffer::Allocate(driver, static_cast<int64_t>(sizeof(bytes))));
    RETURN_IF_ERROR(b.Upload(bytes.data(), static_cast<int64_t>(sizeof(bytes))));
    (*ptrs)[i] = b.ptr();
    maps->push_back(std::move(b));
  }
  return absl::OkStatus();
}

}  // namespace tilesearch::measure
