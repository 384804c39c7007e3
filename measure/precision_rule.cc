#include "measure/precision_rule.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tilesearch::measure {

const char* Fp32PrecisionName(Fp32Precision precision) {
  return precision == Fp32Precision::kTf32 ? "tf32" : "ieee";
}

absl::StatusOr<Fp32Precision> ParseFp32Precision(const std::string& name) {
  if (name == "ieee") return Fp32Precision::kIeee;
  if (name == "tf32") return Fp32Precision::kTf32;
  return absl::InvalidArgumentError(absl::StrCat("unknown precision '", name, "' (ieee, tf32)"));
}

std::string PrecisionWorkloadKey(const std::string& dag_key, Fp32Precision precision) {
  return precision == Fp32Precision::kTf32 ? dag_key + "-tf32" : dag_key;
}

double UnitRoundoff(ir::ScalarType dtype, Fp32Precision precision) {
  switch (dtype) {
    case ir::ScalarType::kFloat32:
      return precision == Fp32Precision::kTf32 ? 0x1p-11 : 0x1p-24;
    case ir::ScalarType::kFloat16:
      return 0x1p-11;
    case ir::ScalarType::kBFloat16:
      return 0x1p-8;
    case ir::ScalarType::kInt32:
    case ir::ScalarType::kInt64:
    case ir::ScalarType::kBool:
      break;
  }
  return 0;
}

double ArithmeticUnitRoundoff(ir::ScalarType dtype, bool rounded_intermediates,
                              Fp32Precision precision) {
  if (!ir::IsFloat(dtype)) return 0;
  if (dtype == ir::ScalarType::kFloat32) return UnitRoundoff(dtype, precision);
  // Half types: their MMAs multiply the half inputs themselves; TF32 concerns float32 only.
  return rounded_intermediates ? UnitRoundoff(dtype) : UnitRoundoff(ir::ScalarType::kFloat32);
}

double AllowedError(const PrecisionRule& rule, double ref64, double magnitude) {
  double allowed = rule.atol + rule.rtol * std::fabs(ref64);
  if (std::isfinite(magnitude)) allowed += kCancellationFactor * rule.unit_roundoff * magnitude;
  return allowed;
}

double OverflowThreshold(ir::ScalarType dtype) {
  switch (dtype) {
    case ir::ScalarType::kFloat32:
      return std::ldexp(2.0 - std::ldexp(1.0, -24), 127);
    case ir::ScalarType::kFloat16:
      return std::ldexp(2.0 - std::ldexp(1.0, -11), 15);
    case ir::ScalarType::kBFloat16:
      return std::ldexp(2.0 - std::ldexp(1.0, -8), 127);
    default:
      return std::numeric_limits<double>::infinity();
  }
}

namespace {

// Whether an infinite `got` is the overflow a value within the allowed error of the finite
// `ref64` may round to in the output's type (the header comment).
bool AllowedOverflow(const PrecisionRule& rule, double got, double ref64, double magnitude) {
  return std::isinf(got) && std::isfinite(ref64) && std::signbit(got) == std::signbit(ref64) &&
         std::fabs(ref64) + AllowedError(rule, ref64, magnitude) >= OverflowThreshold(rule.output);
}

}  // namespace

double ErrorRatio(const PrecisionRule& rule, double got, double ref64, double magnitude) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (std::isnan(ref64) || std::isinf(ref64)) {
    return (std::isnan(ref64) ? std::isnan(got) : got == ref64) ? 0 : kInf;
  }
  if (AllowedOverflow(rule, got, ref64, magnitude)) {
    const double allowed = AllowedError(rule, ref64, magnitude);
    const double distance = std::max(0.0, OverflowThreshold(rule.output) - std::fabs(ref64));
    return allowed > 0 ? distance / allowed : 0;
  }
  if (!std::isfinite(got)) return kInf;
  const double error = std::fabs(got - ref64);
  if (error == 0) return 0;
  const double allowed = AllowedError(rule, ref64, magnitude);
  return allowed > 0 ? error / allowed : kInf;
}

bool PassesPrecisionRule(const PrecisionRule& rule, double got, double ref64, double magnitude) {
  if (std::isnan(ref64)) return std::isnan(got);
  if (std::isinf(ref64)) return got == ref64;
  if (!std::isfinite(got)) return AllowedOverflow(rule, got, ref64, magnitude);
  return std::fabs(got - ref64) <= AllowedError(rule, ref64, magnitude);
}

}  // namespace tilesearch::measure
