// Scalar element types of tensors and expressions.
//
// float16 and bfloat16 are storage types: values are rounded to them when stored into a buffer and
// widened to float32 for arithmetic. Index arithmetic (loop variables, tensor indices) is int64.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tilesearch::ir {

enum class ScalarType : uint8_t { kFloat32, kFloat16, kBFloat16, kInt32, kInt64, kBool };

/// Canonical lower-case name: "float32", "float16", "bfloat16", "int32", "int64", "bool".
const char* TypeName(ScalarType t);

/// Parses a canonical name (also accepts "f32", "fp32", "f16", "fp16", "bf16", "i32", "i64").
/// Errors: kInvalidArgument "unknown dtype 'x' (expected one of float32, ...)".
absl::StatusOr<ScalarType> ParseType(std::string_view name);

/// Storage size of one element in bytes (bool: 1).
int BytesOf(ScalarType t);

inline bool IsFloat(ScalarType t) {
  return t == ScalarType::kFloat32 || t == ScalarType::kFloat16 || t == ScalarType::kBFloat16;
}
inline bool IsInt(ScalarType t) { return t == ScalarType::kInt32 || t == ScalarType::kInt64; }
inline bool IsBool(ScalarType t) { return t == ScalarType::kBool; }

/// Rounds a value held in a double to what `t` can store: float32 rounding, float16 / bfloat16
/// round-to-nearest-even, int32 wrap-around, int64 truncation toward zero, bool as 0/1.
double RoundToType(double value, ScalarType t);

}  // namespace tilesearch::ir
