// The correctness rule (measure/precision_rule.h): the table of cases shared with score.py's tests
// (bench/harness/testdata/precision_cases.json), u per dtype, and real float32 sums judged against
// float64: float32 sums of 65536 cancelling products pass (the sequential ones miss 1e-4), the same
// sum with one term dropped fails, and two float32 tree orders of sum(x) − sum(x) pass.
#include "measure/precision_rule.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/status_matchers.h"
#include "gtest/gtest.h"
#include "ir/type.h"
#include "measure/checker.h"
#include "nlohmann/json.hpp"

namespace tilesearch::measure {
namespace {

using ::tilesearch::testing::Ok;

double Number(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  ADD_FAILURE() << "not a number: " << s;
  return 0;
}

nlohmann::json Table() {
  std::ifstream in(TS_PRECISION_CASES);
  EXPECT_TRUE(in.good()) << TS_PRECISION_CASES;
  return nlohmann::json::parse(in);
}

TEST(PrecisionRuleTest, ConstantsAreTheSharedTables) {
  const nlohmann::json table = Table();
  EXPECT_EQ(table.at("c").get<double>(), kCancellationFactor);
  const nlohmann::json& u = table.at("unit_roundoff");
  EXPECT_EQ(u.at("float32").get<double>(), UnitRoundoff(ir::ScalarType::kFloat32));
  EXPECT_EQ(u.at("tf32").get<double>(),
            UnitRoundoff(ir::ScalarType::kFloat32, Fp32Precision::kTf32));
  EXPECT_EQ(u.at("float16").get<double>(), UnitRoundoff(ir::ScalarType::kFloat16));
  EXPECT_EQ(u.at("bfloat16").get<double>(), UnitRoundoff(ir::ScalarType::kBFloat16));
  // Exactly representable powers of two: float32 keeps 24 significant bits, float16 and TF32 11,
  // bfloat16 8 (u is half an ulp of 1).
  EXPECT_EQ(UnitRoundoff(ir::ScalarType::kFloat32), std::ldexp(1.0, -24));
  EXPECT_EQ(UnitRoundoff(ir::ScalarType::kBFloat16), std::ldexp(1.0, -8));
  EXPECT_EQ(UnitRoundoff(ir::ScalarType::kInt32), 0);
  for (const char* dtype : {"float32", "float16", "bfloat16"}) {
    const ir::ScalarType t = Ok(ir::ParseType(dtype));
    const Tolerance tol = ToleranceFor(t);
    EXPECT_EQ(table.at("tolerance").at(dtype).at(0).get<double>(), tol.atol) << dtype;
    EXPECT_EQ(table.at("tolerance").at(dtype).at(1).get<double>(), tol.rtol) << dtype;
  }
}

TEST(PrecisionRuleTest, SharedCases) {
  const nlohmann::json table = Table();
  ASSERT_GE(table.at("cases").size(), 10u);
  for (const nlohmann::json& c : table.at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    const ir::ScalarType dtype = Ok(ir::ParseType(c.at("dtype").get<std::string>()));
    const Fp32Precision precision = Ok(ParseFp32Precision(c.at("precision").get<std::string>()));
    const Tolerance tol = ToleranceFor(dtype);
    const bool rounded = c.value("rounded_intermediates", false);
    const PrecisionRule rule{tol.atol, tol.rtol, ArithmeticUnitRoundoff(dtype, rounded, precision),
                             dtype};
    const double got = Number(c.at("got"));
    const double ref64 = Number(c.at("ref64"));
    const double m = Number(c.at("magnitude"));
    const bool pass = c.at("pass").get<bool>();
    EXPECT_EQ(PassesPrecisionRule(rule, got, ref64, m), pass) << name;
    EXPECT_EQ(ErrorRatio(rule, got, ref64, m) <= 1, pass) << name;
    if (c.contains("plain_1e4")) {
      EXPECT_EQ(CompareElement(got, ref64, Tolerance{1e-4, 1e-4}).ok, c.at("plain_1e4").get<bool>())
          << name;
    }
  }
}

// The thresholds are where rounding to the type gives infinity: just below stays finite.
TEST(PrecisionRuleTest, OverflowThresholdsAreWhereRoundingGivesInfinity) {
  for (ir::ScalarType t :
       {ir::ScalarType::kFloat32, ir::ScalarType::kFloat16, ir::ScalarType::kBFloat16}) {
    const double threshold = OverflowThreshold(t);
    EXPECT_TRUE(std::isinf(ir::RoundToType(threshold, t))) << ir::TypeName(t);
    EXPECT_TRUE(std::isinf(ir::RoundToType(-threshold, t))) << ir::TypeName(t);
    EXPECT_FALSE(std::isinf(ir::RoundToType(std::nextafter(threshold, 0.0), t))) << ir::TypeName(t);
  }
  EXPECT_EQ(OverflowThreshold(ir::ScalarType::kFloat16), 65520);
  EXPECT_TRUE(std::isinf(OverflowThreshold(ir::ScalarType::kInt32)));
}

// The overflow allowance follows the output's type: the same float64 value 65515 with got +inf
// passes for a float16 output (65515 + 1 % reaches 65520) and fails for a float32 one.
TEST(PrecisionRuleTest, InfinityPassesOnlyAsTheOutputTypesOverflow) {
  const Tolerance half = ToleranceFor(ir::ScalarType::kFloat16);
  PrecisionRule rule{half.atol, half.rtol, UnitRoundoff(ir::ScalarType::kFloat32),
                     ir::ScalarType::kFloat16};
  constexpr double kInf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(PassesPrecisionRule(rule, kInf, 65515, 65515));
  EXPECT_LE(ErrorRatio(rule, kInf, 65515, 65515), 1);
  EXPECT_GT(ErrorRatio(rule, kInf, 65515, 65515), 0);
  EXPECT_FALSE(PassesPrecisionRule(rule, -kInf, 65515, 65515));
  EXPECT_FALSE(PassesPrecisionRule(rule, std::nan(""), 65515, 65515));
  // 1 % below 64000 is out of reach: 64000 + 640.01 < 65520.
  EXPECT_FALSE(PassesPrecisionRule(rule, kInf, 64000, 64000));
  EXPECT_EQ(ErrorRatio(rule, kInf, 64000, 64000), kInf);
  rule.output = ir::ScalarType::kFloat32;
  EXPECT_FALSE(PassesPrecisionRule(rule, kInf, 65515, 65515));
  EXPECT_TRUE(ArbitrationElementPasses(
      kInf, 65515, 65515, RuleFor(ir::ScalarType::kFloat16, half, Fp32Precision::kIeee)));
  EXPECT_FALSE(ArbitrationElementPasses(
      kInf, 65515, 65515,
      RuleFor(ir::ScalarType::kFloat32, ToleranceFor(ir::ScalarType::kFloat32),
              Fp32Precision::kIeee)));
}

TEST(PrecisionRuleTest, ParsesPrecisionNames) {
  EXPECT_EQ(Ok(ParseFp32Precision("ieee")), Fp32Precision::kIeee);
  EXPECT_EQ(Ok(ParseFp32Precision("tf32")), Fp32Precision::kTf32);
  EXPECT_EQ(std::string(Fp32PrecisionName(Fp32Precision::kTf32)), "tf32");
  EXPECT_FALSE(ParseFp32Precision("TF32x3").ok());
}

// Uniform in [-1, 1) from the top 24 bits of a 64-bit draw (exact in float32; the same values on
// every platform, unlike std::uniform_real_distribution).
float Uniform(std::mt19937_64& rng) {
  return static_cast<float>(static_cast<double>(rng() >> 40) * 0x1p-23 - 1.0);
}

// Pairwise float32 sum of v[begin, end) (a tree reduction's order).
float TreeSum(const std::vector<float>& v, size_t begin, size_t end) {
  if (end - begin == 1) return v[begin];
  const size_t mid = begin + (end - begin) / 2;
  return TreeSum(v, begin, mid) + TreeSum(v, mid, end);
}

TEST(PrecisionRuleTest, LongCancellingFloat32SumPassesAndDroppedTermFails) {
  // K = 65536 float32 products of inputs uniform in [-1, 1), half of them the negation of the
  // other half in shuffled order: the exact sum is 0 (an output element where a long dot product
  // cancels, the elements where PyTorch's float32 misses 1e-4).
  constexpr int kHalf = 32768;
  std::mt19937_64 rng(7);
  const PrecisionRule rule{1e-4, 1e-4, UnitRoundoff(ir::ScalarType::kFloat32)};
  int sequential_misses_1e4 = 0;
  for (int row = 0; row < 8; ++row) {
    std::vector<float> terms;
    for (int k = 0; k < kHalf; ++k) {
      const float a = Uniform(rng), b = Uniform(rng);
      terms.push_back(a * b);
      terms.push_back(-(a * b));
    }
    for (size_t i = terms.size() - 1; i > 0; --i) std::swap(terms[i], terms[rng() % (i + 1)]);
    double exact = 0, magnitude = 0;
    size_t largest = 0;
    for (size_t k = 0; k < terms.size(); ++k) {
      exact += terms[k];
      magnitude += std::fabs(terms[k]);
      if (std::fabs(terms[k]) > std::fabs(terms[largest])) largest = k;
    }
    float sequential = 0;
    for (float p : terms) sequential += p;
    const float tree = TreeSum(terms, 0, terms.size());
    EXPECT_TRUE(PassesPrecisionRule(rule, tree, exact, magnitude)) << row;
    EXPECT_TRUE(PassesPrecisionRule(rule, sequential, exact, magnitude)) << row;
    if (!CompareElement(sequential, exact, Tolerance{1e-4, 1e-4}).ok) ++sequential_misses_1e4;
    EXPECT_FALSE(PassesPrecisionRule(rule, tree - terms[largest], exact, magnitude)) << row;
  }
  // The plain 1e-4 rule rejects some of the sequential float32 sums (one accumulator per output
  // over all of K, as a SIMT GEMM without split-K): why M is needed.
  EXPECT_GE(sequential_misses_1e4, 1);
}

TEST(PrecisionRuleTest, CatastrophicCancellationOfTwoFloat32Orders) {
  constexpr int kN = 4096;
  std::mt19937_64 rng(11);
  std::vector<float> x(kN);
  double magnitude = 0;
  for (float& v : x) {
    v = 100 + 50 * Uniform(rng);
    magnitude += 2 * std::fabs(v);  // each x_i appears in both sums
  }
  // Two tree sums pairing the terms differently (the second over x rotated by 3).
  std::vector<float> rotated(x.begin() + 3, x.end());
  rotated.insert(rotated.end(), x.begin(), x.begin() + 3);
  const float first = TreeSum(x, 0, x.size());
  const float second = TreeSum(rotated, 0, rotated.size());
  const double got = static_cast<double>(first) - second;  // exact value 0
  const PrecisionRule rule{1e-4, 1e-4, UnitRoundoff(ir::ScalarType::kFloat32)};
  EXPECT_NE(got, 0);                                            // the orders round differently...
  EXPECT_TRUE(PassesPrecisionRule(rule, got, 0.0, magnitude));  // ...within u · M
  EXPECT_FALSE(CompareElement(got, 0.0, Tolerance{1e-4, 1e-4}).ok);
  EXPECT_FALSE(PassesPrecisionRule(rule, got + 100, 0.0, magnitude));  // one term lost
}

TEST(PrecisionRuleTest, AllowanceAndRatio) {
  const PrecisionRule rule{1e-4, 1e-4, 0x1p-24};
  EXPECT_DOUBLE_EQ(AllowedError(rule, -2.0, 1024), 1e-4 + 2e-4 + 16 * 0x1p-24 * 1024);
  EXPECT_DOUBLE_EQ(AllowedError(rule, 1.0, std::numeric_limits<double>::infinity()), 2e-4);
  EXPECT_NEAR(ErrorRatio(rule, 1.0001, 1.0, 0), 0.5, 1e-9);
  EXPECT_EQ(ErrorRatio(rule, 3.0, 3.0, 0), 0);
  EXPECT_TRUE(std::isinf(ErrorRatio(PrecisionRule{}, 1.0, 2.0, 5.0)));
}

}  // namespace
}  // namespace tilesearch::measure
