#include "ir/type.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tilesearch::ir {

const char* TypeName(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32:
      return "float32";
    case ScalarType::kFloat16:
      return "float16";
    case ScalarType::kBFloat16:
      return "bfloat16";
    case ScalarType::kInt32:
      return "int32";
    case ScalarType::kInt64:
      return "int64";
    case ScalarType::kBool:
      return "bool";
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
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", std::string(name),
                   "' (expected one of float32, float16, bfloat16, int32, int64, bool)"));
}

int BytesOf(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32:
      return 4;
    case ScalarType::kFloat16:
      return 2;
    case ScalarType::kBFloat16:
      return 2;
    case ScalarType::kInt32:
      return 4;
    case ScalarType::kInt64:
      return 8;
    case ScalarType::kBool:
      return 1;
  }
  return 0;
}

namespace {

// Rounds a double to a binary floating-point format with `mantissa_bits` explicit mantissa bits,
// smallest normal exponent `min_exp` and largest exponent `max_exp`: round to nearest, ties to
// even, with gradual underflow and overflow to infinity. Rounding straight from the double (not
// through float32 first) avoids double rounding: 1 + 2^-11 + 2^-40 must round up in float16.
double RoundToBinaryFormat(double value, int mantissa_bits, int min_exp, int max_exp) {
  if (std::isnan(value) || std::isinf(value)) return value;
  double a = std::fabs(value);
  // Halfway between the largest finite value (odd mantissa) and 2^(max_exp+1): ties go to inf.
  double overflow = std::ldexp(2.0 - std::ldexp(1.0, -(mantissa_bits + 1)), max_exp);
  if (a >= overflow) return std::copysign(INFINITY, value);
  int exp = 0;
  std::frexp(a, &exp);                 // a in [2^(exp-1), 2^exp)
  int e = std::max(exp - 1, min_exp);  // subnormals share the smallest normal exponent's quantum
  double quantum = std::ldexp(1.0, e - mantissa_bits);
  double r = std::nearbyint(a / quantum) * quantum;  // default rounding mode: nearest even
  return std::copysign(r, value);
}

}  // namespace

double RoundToType(double value, ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32:
      return static_cast<float>(value);
    case ScalarType::kFloat16:
      return RoundToBinaryFormat(value, 10, -14, 15);
    case ScalarType::kBFloat16:
      return RoundToBinaryFormat(value, 7, -126, 127);
    case ScalarType::kInt32: {
      if (!std::isfinite(value)) return 0;
      // Reduce modulo 2^32 first (exact in double) so the int64 conversion cannot overflow.
      int64_t v = static_cast<int64_t>(std::fmod(std::trunc(value), 4294967296.0));
      return static_cast<int32_t>(static_cast<uint32_t>(v));
    }
    case ScalarType::kInt64:
      return std::isfinite(value) ? std::trunc(value) : 0;
    case ScalarType::kBool:
      return value != 0 ? 1 : 0;
  }
  return value;
}

}  // namespace tilesearch::ir
