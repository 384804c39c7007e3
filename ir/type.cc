#include "ir/type.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tilesearch::ir {

const char* TypeName(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32: return "float32";
    case ScalarType::kFloat16: return "float16";
    case ScalarType::kBFloat16: return "bfloat16";
    case ScalarType::kInt32: return "int32";
    case ScalarType::kInt64: return "int64";
    case ScalarType::kBool: return "bool";
  }
  return "?";
}

absl::StatusOr<ScalarType> ParseType(std::string_view name) {
  std::string n = absl::AsciiStrToLower(std::string(name));
  if (n == "float32" || n == "f32" || n == "fp32" || n == "float") return ScalarType::kFloat32;
  if (n == "float16" || n == "f16" || n == "fp16" || n == "half") return ScalarType::kFloat16;
  if (n == "bfloat16" || n == "bf16") return ScalarType::kBFloat16;
  if (n == "int32" || n == "i32") return ScalarType::kInt32;
  if (n == "int64" || n == "i64") return ScalarType::kInt64;
  if (n == "bool") return ScalarType::kBool;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype '", std::string(name), "' (expected one of float32, float16, bfloat16, int32, int64, bool)"));
}

int BytesOf(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32: return 4;
    case ScalarType::kFloat16: return 2;
    case ScalarType::kBFloat16: return 2;
    case ScalarType::kInt32: return 4;
    case ScalarType::kInt64: return 8;
    case ScalarType::kBool: return 1;
  }
  return 0;
}

namespace {

// IEEE binary16 round-to-nearest-even via float32 bits.
double RoundToHalf(float f) {
  if (std::isnan(f)) return f;
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = x & 0x80000000u;
  float a = std::fabs(f);
  if (a >= 65520.0f) return sign ? -INFINITY : INFINITY;  // rounds to inf in binary16
  if (a < 6.103515625e-05f) {
    // Subnormal range: quantum 2^-24.
    double q = std::ldexp(1.0, -24);
    double r = std::nearbyint(static_cast<double>(a) / q) * q;
    return sign ? -r : r;
  }
  int exp;
  std::frexp(a, &exp);  // a = m * 2^exp, m in [0.5, 1)
  double q = std::ldexp(1.0, exp - 11);  // 10 explicit mantissa bits
  double r = std::nearbyint(static_cast<double>(a) / q) * q;
  return sign ? -r : r;
}

double RoundToBFloat16(float f) {
  if (std::isnan(f)) return f;
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7FFFu + lsb;
  x &= 0xFFFF0000u;
  return std::bit_cast<float>(x);
}

}  // namespace

double RoundToType(double value, ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32: return static_cast<float>(value);
    case ScalarType::kFloat16: return RoundToHalf(static_cast<float>(value));
    case ScalarType::kBFloat16: return RoundToBFloat16(static_cast<float>(value));
    case ScalarType::kInt32: {
      if (!std::isfinite(value)) return 0;
      int64_t v = static_cast<int64_t>(std::trunc(value));
      return static_cast<int32_t>(static_cast<uint32_t>(v));
    }
    case ScalarType::kInt64:
      return std::isfinite(value) ? std::trunc(value) : 0;
    case ScalarType::kBool: return value != 0 ? 1 : 0;
  }
  return value;
}

}  // namespace tilesearch::ir
