// RunOnBuffers: interpreter-style buffers (values as double) ↔ the typed row-major arrays the
// generated code reads and writes.
#include <bit>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "codegen/codegen.h"

namespace tilesearch::codegen {
namespace {

// Round-to-nearest-even conversions (float16 through the compiler's _Float16).
uint16_t HalfFromFloat(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }

float FloatFromHalf(uint16_t u) { return static_cast<float>(std::bit_cast<_Float16>(u)); }

uint16_t Bf16FromFloat(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even on the dropped 16 bits
  return static_cast<uint16_t>(x >> 16);
}

float FloatFromBf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

void Pack(const ir::HostBuffer& src, std::vector<unsigned char>& dst) {
  const int64_t n = src.NumElements();
  dst.assign(static_cast<size_t>(n * ir::BytesOf(src.dtype)) + 16, 0);
  unsigned char* p = dst.data();
  for (int64_t i = 0; i < n; ++i) {
    const double v = src.data[i];
    switch (src.dtype) {
      case ir::ScalarType::kFloat32:
        reinterpret_cast<float*>(p)[i] = static_cast<float>(v);
        break;
      case ir::ScalarType::kFloat16:
        reinterpret_cast<uint16_t*>(p)[i] = HalfFromFloat(static_cast<float>(v));
        break;
      case ir::ScalarType::kBFloat16:
        reinterpret_cast<uint16_t*>(p)[i] = Bf16FromFloat(static_cast<float>(v));
        break;
      case ir::ScalarType::kInt32:
        reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
        break;
      case ir::ScalarType::kInt64:
        reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
        break;
      case ir::ScalarType::kBool:
        p[i] = v != 0 ? 1 : 0;
        break;
    }
  }
}

void Unpack(const std::vector<unsigned char>& src, ir::HostBuffer& dst) {
  const int64_t n = dst.NumElements();
  const unsigned char* p = src.data();
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    switch (dst.dtype) {
      case ir::ScalarType::kFloat32:
        v = reinterpret_cast<const float*>(p)[i];
        break;
      case ir::ScalarType::kFloat16:
        v = FloatFromHalf(reinterpret_cast<const uint16_t*>(p)[i]);
        break;
      case ir::ScalarType::kBFloat16:
        v = FloatFromBf16(reinterpret_cast<const uint16_t*>(p)[i]);
        break;
      case ir::ScalarType::kInt32:
        v = reinterpret_cast<const int32_t*>(p)[i];
        break;
      case ir::ScalarType::kInt64:
        v = static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
        break;
      case ir::ScalarType::kBool:
        v = p[i] != 0;
        break;
    }
    dst.data[i] = v;
  }
}

}  // namespace

absl::Status RunOnBuffers(HostKernel& kernel, const ir::LoopNest& nest, ir::BufferMap& buffers) {
  // std::vector<unsigned char> storage is aligned for max_align_t (16 bytes) by operator new.
  std::vector<std::vector<unsigned char>> storage(nest.params.size());
  std::vector<void*> pointers;
  for (size_t i = 0; i < nest.params.size(); ++i) {
    const ir::BufferDecl& p = nest.params[i];
    auto it = buffers.find(p.name);
    if (it == buffers.end()) {
      return absl::InvalidArgumentError(absl::StrCat("no buffer for parameter '", p.name, "'"));
    }
    if (it->second.shape != p.shape || it->second.dtype != p.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer '", p.name, "' is ", ir::TypeName(it->second.dtype), "[",
                       absl::StrJoin(it->second.shape, ","), "]; the parameter is ",
                       ir::TypeName(p.dtype), "[", absl::StrJoin(p.shape, ","), "]"));
    }
    if (static_cast<int64_t>(it->second.data.size()) != it->second.NumElements()) {
      return absl::InvalidArgumentError(absl::StrCat("buffer '", p.name, "' holds ",
                                                     it->second.data.size(), " values for ",
                                                     it->second.NumElements(), " elements"));
    }
    Pack(it->second, storage[i]);
    pointers.push_back(storage[i].data());
  }
  RETURN_IF_ERROR(kernel.Run(pointers));
  for (size_t i = 0; i < nest.params.size(); ++i) Unpack(storage[i], buffers[nest.params[i].name]);
  return absl::OkStatus();
}

}  // namespace tilesearch::codegen
