// The cuda target's float32 erf / exp / log / log1p expansions (codegen/fast_math.h) against
// float64 libm over dense sweeps of float32 inputs, run on the host through the same MLIR rewrite
// with the C library's exp2f / log2f standing in for ex2.approx / lg2.approx (the hardware's own
// error is measured on the device by bench/scripts/h200_fast_math_check.sh); and the PTX of the
// naive gelu and softplus kernels: the expansions' instructions, no division, no per-interval
// coefficient selects.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "codegen/fast_math_host.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/lower_naive.h"
#include "ir/ops/registry.h"
#include "tests/codegen/nest_builders.h"
#include "tests/codegen/ptx_test_util.h"

namespace tilesearch::codegen {
namespace {

using testing::Count;
using testing::ExpectPtxasAccepts;
using ::testing::HasSubstr;
using ::testing::Not;
using ::tilesearch::testing::IsOk;

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint32_t Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// |got - want| in float32 ulps at the float64 reference `want` (the spacing of float32 values
// around |want|, 2^-149 for subnormal results).
double UlpError(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : INFINITY;
  if (std::isinf(want)) return got == static_cast<float>(want) ? 0 : INFINITY;
  int exponent = 0;
  std::frexp(want, &exponent);
  const double ulp = std::ldexp(1.0, std::max(exponent - 24, -149));
  return std::abs(static_cast<double>(got) - want) / ulp;
}

struct SweepResult {
  double max_ulp = 0;
  float worst_x = 0;
  int64_t points = 0;
};

// Every `stride`-th float32 bit pattern in [lo_bits, hi_bits] of both signs, and `extra`.
SweepResult Sweep(const FastMathHostFunction& f, const std::function<double(double)>& ref,
                  uint32_t lo_bits, uint32_t hi_bits, uint32_t stride,
                  const std::vector<float>& extra) {
  SweepResult r;
  auto check = [&](float x) {
    const double e = UlpError(f(x), ref(static_cast<double>(x)));
    ++r.points;
    if (!(e <= r.max_ulp)) {
      r.max_ulp = e;
      r.worst_x = x;
    }
  };
  for (uint64_t b = lo_bits; b <= hi_bits; b += stride) {
    check(FromBits(static_cast<uint32_t>(b)));
    check(FromBits(static_cast<uint32_t>(b) | 0x80000000u));
  }
  for (float x : extra) check(x);
  return r;
}

std::unique_ptr<FastMathHostFunction> Compile(FastMathFunction f) {
  absl::StatusOr<std::unique_ptr<FastMathHostFunction>> fn = CompileFastMathForHost(f);
  EXPECT_THAT(fn, IsOk());
  return fn.ok() ? std::move(*fn) : nullptr;
}

// Neighbours of v (the float32 values `n` steps either side), for range boundaries.
std::vector<float> Around(float v, int n = 4) {
  std::vector<float> out;
  for (int i = -n; i <= n; ++i) out.push_back(FromBits(Bits(v) + i));
  return out;
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();

TEST(FastMathTest, ErfWithinTwoUlpOfFloat64OverAllFloat32Ranges) {
  auto erf = Compile(FastMathFunction::kErf);
  ASSERT_NE(erf, nullptr);
  std::vector<float> extra = {0.0f, -0.0f, kDenormMin, 1e-30f, kInf, -kInf, 3.9199219f, 10.0f};
  for (float v : Around(1.0f)) extra.push_back(v);
  // Stride 211 over all finite magnitudes: 2 * 10.1 million points; then every float32 in
  // [0.5, 4], where the two ranges meet and erf leaves 1.
  const SweepResult all = Sweep(
      *erf, [](double x) { return std::erf(x); }, 0, 0x7F7FFFFF, 211, extra);
  EXPECT_LE(all.max_ulp, 2.0) << "at x = " << all.worst_x << " over " << all.points << " points";
  const SweepResult dense =
      Sweep(*erf, [](double x) { return std::erf(x); }, Bits(0.5f), Bits(4.0f), 1, {});
  EXPECT_LE(dense.max_ulp, 2.0) << "at x = " << dense.worst_x << " over " << dense.points;
  std::cout << "erf: max " << all.max_ulp << " ulp (" << all.points << " points), " << dense.max_ulp
            << " ulp over all of +-[0.5, 4] (" << dense.points << " points)\n";
  EXPECT_TRUE(std::isnan((*erf)(kNaN)));
  EXPECT_EQ((*erf)(kInf), 1.0f);
  EXPECT_EQ((*erf)(-kInf), -1.0f);
  EXPECT_TRUE(std::signbit((*erf)(-0.0f)));
}

TEST(FastMathTest, ExpWithinTwoUlpOfFloat64) {
  auto exp = Compile(FastMathFunction::kExp);
  ASSERT_NE(exp, nullptr);
  // Every 71st float32 of |x| <= 88.7 (overflow above), 2 * 15 million points, and subnormal
  // results down to -104.
  std::vector<float> extra = {0.0f, -0.0f, kDenormMin, 88.72f, -87.3f, -100.0f, -103.9f};
  const SweepResult r = Sweep(
      *exp, [](double x) { return std::exp(x); }, 0, Bits(88.72f), 71, extra);
  EXPECT_LE(r.max_ulp, 2.0) << "at x = " << r.worst_x << " over " << r.points << " points";
  std::cout << "exp: max " << r.max_ulp << " ulp (" << r.points << " points)\n";
  EXPECT_EQ((*exp)(kInf), kInf);
  EXPECT_EQ((*exp)(89.0f), kInf);
  EXPECT_EQ((*exp)(-kInf), 0.0f);
  EXPECT_EQ((*exp)(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan((*exp)(kNaN)));
}

TEST(FastMathTest, LogWithinTwoUlpOfFloat64) {
  auto log = Compile(FastMathFunction::kLog);
  ASSERT_NE(log, nullptr);
  std::vector<float> extra = {kDenormMin, 1.0f, 0.75f, 4.0f / 3.0f};
  for (float v : Around(0.75f)) extra.push_back(v);
  for (float v : Around(4.0f / 3.0f)) extra.push_back(v);
  // Positive inputs only (the sweep's negative ones are NaN on both sides): every 41st float32,
  // subnormals included (52 million points).
  SweepResult r;
  for (uint64_t b = 1; b <= 0x7F7FFFFF; b += 41) {
    const float x = FromBits(static_cast<uint32_t>(b));
    const double e = UlpError((*log)(x), std::log(static_cast<double>(x)));
    ++r.points;
    if (e > r.max_ulp) {
      r.max_ulp = e;
      r.worst_x = x;
    }
  }
  for (float x : extra) r.max_ulp = std::max(r.max_ulp, UlpError((*log)(x), std::log(double{x})));
  EXPECT_LE(r.max_ulp, 2.0) << "at x = " << r.worst_x << " over " << r.points << " points";
  std::cout << "log: max " << r.max_ulp << " ulp (" << r.points << " points)\n";
  EXPECT_EQ((*log)(0.0f), -kInf);
  EXPECT_TRUE(std::isnan((*log)(-1.0f)));
  EXPECT_EQ((*log)(kInf), kInf);
  EXPECT_TRUE(std::isnan((*log)(kNaN)));
}

// log1p, and log(1 + y) rewritten into it, on y > -1 down to the tiniest y (softplus's
// log1p(exp(x)) at very negative x, where log(1 + y) in float32 would return 0): every 61st
// float32 of y >= 0 and every 23rd of -1 < y < 0 (80 million points). Outside the polynomial's
// range the result is log2(1 + y) rounded, times ln 2 rounded: near y = -0.39, log1p just
// below 0.5 in magnitude has half the ulp of log2's result, so the two roundings make up to
// 2.9 ulp there.
void ExpectLog1pWithinUlp(const FastMathHostFunction& f, double bound, const char* name) {
  SweepResult r;
  auto check = [&](float y) {
    const double e = UlpError(f(y), std::log1p(static_cast<double>(y)));
    ++r.points;
    if (e > r.max_ulp) {
      r.max_ulp = e;
      r.worst_x = y;
    }
  };
  for (uint64_t b = 0; b <= 0x7F7FFFFF; b += 61) check(FromBits(static_cast<uint32_t>(b)));
  for (uint64_t b = 0; b < Bits(1.0f); b += 23) check(-FromBits(static_cast<uint32_t>(b)));
  for (float v : Around(-0.25f)) check(v);
  for (float v : Around(1.0f / 3.0f)) check(v);
  EXPECT_LE(r.max_ulp, bound) << name << " at y = " << r.worst_x << " over " << r.points;
  std::cout << name << ": max " << r.max_ulp << " ulp (" << r.points << " points)\n";
  EXPECT_EQ(f(1e-30f), 1e-30f);
  EXPECT_EQ(f(-1.0f), -kInf);
  EXPECT_TRUE(std::isnan(f(-2.0f)));
  EXPECT_EQ(f(kInf), kInf);
  EXPECT_TRUE(std::isnan(f(kNaN)));
}

TEST(FastMathTest, Log1pWithinThreeUlpOfFloat64) {
  auto log1p = Compile(FastMathFunction::kLog1p);
  ASSERT_NE(log1p, nullptr);
  ExpectLog1pWithinUlp(*log1p, 3.0, "log1p");
}

TEST(FastMathTest, LogOfOnePlusBecomesLog1p) {
  auto log_one_plus = Compile(FastMathFunction::kLogOnePlus);
  ASSERT_NE(log_one_plus, nullptr);
  ExpectLog1pWithinUlp(*log_one_plus, 3.0, "log(1 + y)");
}

absl::StatusOr<std::string> NaiveGpuPtx(const std::string& op) {
  ASSIGN_OR_RETURN(ir::ComputeDAG dag, ir::BuildOp(op, testing::Args({{64, 256}})));
  ASSIGN_OR_RETURN(ir::LoopNest nest, ir::LowerNaive(dag));
  ASSIGN_OR_RETURN(GpuModule m, CompileToPtx(testing::BindNaive(nest), {}));
  return m.ptx;
}

// gelu's erf is one ex2 and two short polynomials: no quotient and none of the piecewise erf's
// ~21 coefficient selects (one select joins the ranges).
TEST(FastMathTest, GeluPtxTakesTheTwoRangeErf) {
  absl::StatusOr<std::string> ptx = NaiveGpuPtx("gelu");
  ASSERT_THAT(ptx, IsOk());
  EXPECT_EQ(Count(*ptx, "ex2.approx.ftz.f32"), 1) << *ptx;
  EXPECT_THAT(*ptx, Not(HasSubstr("div."))) << *ptx;
  EXPECT_THAT(*ptx, Not(HasSubstr("rcp."))) << *ptx;
  EXPECT_LE(Count(*ptx, "selp.f32"), 1) << *ptx;
  EXPECT_THAT(*ptx, HasSubstr("copysign.f32")) << *ptx;
  ExpectPtxasAccepts(*ptx, "fast_math_gelu");
}

// softplus's log(1 + exp(x)) becomes log1p: the polynomial near 0 and lg2.approx elsewhere, not
// the frexp-based polynomial log with its special-case selects. Its lg2 flushes subnormal inputs
// (1 + y never is one), which saves lg2.approx's rescaling of them.
TEST(FastMathTest, SoftplusPtxTakesLog1pOnLg2) {
  absl::StatusOr<std::string> ptx = NaiveGpuPtx("softplus");
  ASSERT_THAT(ptx, IsOk());
  EXPECT_EQ(Count(*ptx, "lg2.approx.ftz.f32"), 1) << *ptx;
  EXPECT_EQ(Count(*ptx, "ex2.approx.ftz.f32"), 1) << *ptx;
  EXPECT_THAT(*ptx, Not(HasSubstr("cvt.rn.f32.s32"))) << *ptx;  // the frexp exponent
  EXPECT_THAT(*ptx, Not(HasSubstr("div."))) << *ptx;
  ExpectPtxasAccepts(*ptx, "fast_math_softplus");
}

}  // namespace
}  // namespace tilesearch::codegen
