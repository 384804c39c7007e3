// The device compare's host side: the element rule and float32 summaries against a naive loop
// written here from the documented rule (NaN / Inf handling, tolerance, error maxima), summaries
// accumulated into a CheckReport equal CompareOutput's report, the mismatch text, the slot
// encoding, and the embedded PTX accepted by ptxas (skipped where /usr/local/cuda/bin/ptxas is
// missing). The kernels themselves run in cuda_runtime_test (device_compare_gpu_test.cc).
#include "measure/device_compare.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/checker.h"

namespace tilesearch::measure {
namespace {

using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kNanF = std::numeric_limits<float>::quiet_NaN();
constexpr float kInfF = std::numeric_limits<float>::infinity();

// The documented rule, written out independently of checker.cc.
struct Naive {
  int64_t mismatches = 0;
  int64_t first = -1;
  double max_abs = 0;
  double max_rel = 0;
};

// `magnitude` (optional): each element's M, widening its bound by allowance · M where M is finite.
Naive NaiveCompare(const std::vector<float>& got, const std::vector<float>& expected, double atol,
                   double rtol, const std::vector<float>* magnitude = nullptr,
                   double allowance = 0) {
  Naive r;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i];
    const double e = expected[i];
    bool ok;
    if (e != e) {
      ok = g != g;
    } else if (e == kInf || e == -kInf) {
      ok = g == e;
    } else {
      const bool g_finite = g == g && g != kInf && g != -kInf;
      const double diff = g_finite ? (g > e ? g - e : e - g) : kInf;
      const double m = magnitude != nullptr ? (*magnitude)[i] : 0;
      const bool finite_m = m == m && m != kInf && m != -kInf;
      ok = g_finite && diff <= atol + rtol * (e < 0 ? -e : e) + (finite_m ? allowance * m : 0);
      if (diff > r.max_abs) r.max_abs = diff;
      const double ae = e < 0 ? -e : e;
      if (ae > atol) {
        const double rel = diff / (ae > 1e-30 ? ae : 1e-30);
        if (rel > r.max_rel) r.max_rel = rel;
      }
    }
    if (!ok) {
      if (r.mismatches == 0) r.first = static_cast<int64_t>(i);
      ++r.mismatches;
    }
  }
  return r;
}

// Random values with planted NaNs, Infs, near-tolerance and far-off elements.
void MakeData(size_t n, uint32_t seed, std::vector<float>* got, std::vector<float>* expected) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4, 4);
  std::uniform_int_distribution<int> kind(0, 19);
  got->resize(n);
  expected->resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float e = u(rng);
    float g = e;
    switch (kind(rng)) {
      case 0:
        g = kNanF;
        break;  // NaN where finite
      case 1:
        g = e + 1.0f;
        break;  // far off
      case 2:
        g = e * (1 + 5e-5f);
        break;  // within rtol
      case 3:
        g = e + 3e-4f;
        break;  // just outside at small |e|
      case 4:
        (*expected)[i] = kNanF;
        got->at(i) = kNanF;
        continue;  // NaN for NaN: ok
      case 5:
        (*expected)[i] = kNanF;
        got->at(i) = 1;
        continue;  // value for NaN: wrong
      case 6:
        (*expected)[i] = kInfF;
        got->at(i) = kInfF;
        continue;  // same Inf: ok
      case 7:
        (*expected)[i] = -kInfF;
        got->at(i) = kInfF;
        continue;  // other Inf: wrong
      case 8:
        g = kInfF;
        break;  // Inf where finite
      case 9:
        (*expected)[i] = 0;
        got->at(i) = 5e-5f;
        continue;  // tiny |e|: no rel error
      default:
        break;
    }
    (*expected)[i] = e;
    (*got)[i] = g;
  }
}

TEST(DeviceCompareTest, SummaryEqualsNaiveLoop) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    for (double atol : {1e-4, 1e-2, 0.0}) {
      std::vector<float> got, expected;
      MakeData(5000, seed, &got, &expected);
      const double rtol = 1e-4;
      const Naive want = NaiveCompare(got, expected, atol, rtol);
      const CompareSummary s = SummarizeFloat32(
          got.data(), expected.data(), static_cast<int64_t>(got.size()), Tolerance{atol, rtol});
      EXPECT_EQ(s.elements, 5000);
      EXPECT_EQ(s.mismatches, want.mismatches) << "seed " << seed << " atol " << atol;
      EXPECT_EQ(s.first_mismatch, want.first);
      EXPECT_EQ(s.max_abs_error, want.max_abs);
      EXPECT_EQ(s.max_rel_error, want.max_rel);
      EXPECT_GT(want.mismatches, 500);  // the planted kinds did land
    }
  }
}

TEST(DeviceCompareTest, CorrectOutputHasNoMismatchAndItsExactErrors) {
  std::vector<float> expected = {1.0f, -2.0f, 0.5f, 1e-6f};
  std::vector<float> got = {1.0f, -2.0f + 1e-4f, 0.5f, 0.0f};
  const CompareSummary s = SummarizeFloat32(got.data(), expected.data(), 4, Tolerance{1e-4, 1e-4});
  EXPECT_EQ(s.mismatches, 0);
  EXPECT_EQ(s.first_mismatch, -1);
  EXPECT_EQ(s.max_abs_error, std::fabs(static_cast<double>(-2.0f + 1e-4f) + 2.0));
  // 1e-6 is not above atol, so only -2's relative error counts.
  EXPECT_EQ(s.max_rel_error, std::fabs(static_cast<double>(-2.0f + 1e-4f) + 2.0) / 2.0);
}

TEST(DeviceCompareTest, ElementRule) {
  const Tolerance t{1e-4, 1e-4};
  EXPECT_TRUE(CompareElement(1.0, 1.0, t).ok);
  EXPECT_TRUE(CompareElement(1.0 + 2e-4, 1.0, t).ok);  // 2e-4 <= 1e-4 + 1e-4
  EXPECT_FALSE(CompareElement(1.0 + 3e-4, 1.0, t).ok);
  EXPECT_FALSE(CompareElement(std::nan(""), 1.0, t).ok);
  EXPECT_TRUE(CompareElement(std::nan(""), std::nan(""), t).ok);
  EXPECT_FALSE(CompareElement(0.0, std::nan(""), t).ok);
  EXPECT_TRUE(CompareElement(kInf, kInf, t).ok);
  EXPECT_FALSE(CompareElement(-kInf, kInf, t).ok);
  EXPECT_FALSE(CompareElement(kInf, 1e30, t).ok);
  const ElementComparison inf_got = CompareElement(kInf, 2.0, t);
  EXPECT_TRUE(inf_got.has_abs_error);
  EXPECT_EQ(inf_got.abs_error, kInf);
  EXPECT_TRUE(inf_got.has_rel_error);
  EXPECT_EQ(inf_got.rel_error, kInf);
  const ElementComparison nan_ref = CompareElement(1.0, std::nan(""), t);
  EXPECT_FALSE(nan_ref.has_abs_error);
  EXPECT_FALSE(nan_ref.has_rel_error);
  const ElementComparison small = CompareElement(5e-5, 0.0, t);
  EXPECT_TRUE(small.ok);
  EXPECT_EQ(small.abs_error, 5e-5);
  EXPECT_FALSE(small.has_rel_error);
}

// The cancellation allowance: allowance · M widens the bound where M is finite, nowhere else,
// and the float32 summary reads M per element (the device kernel's host mirror).
TEST(DeviceCompareTest, MagnitudeWidensTheBoundByTheAllowance) {
  const Tolerance t{1e-4, 1e-4, 16 * std::ldexp(1.0, -11)};  // c · u of TF32
  // |1.01 − 1| = 1e-2 > 2e-4 plainly; M = 2: + 2 · 2^-7 = 1.56e-2 covers it; M = 1 (7.8e-3) not.
  EXPECT_FALSE(CompareElement(1.01, 1.0, t).ok);
  EXPECT_TRUE(CompareElement(1.01, 1.0, t, 2.0).ok);
  EXPECT_FALSE(CompareElement(1.01, 1.0, t, 1.0).ok);
  EXPECT_FALSE(CompareElement(1.01, 1.0, t, kInf).ok);  // no allowance from an infinite M
  EXPECT_FALSE(CompareElement(1.01, 1.0, t, std::nan("")).ok);
  EXPECT_FALSE(CompareElement(std::nan(""), 1.0, t, 1e30).ok);  // non-finite got: never
  EXPECT_FALSE(CompareElement(kInf, 1.0, t, 1e30).ok);
  // Without an allowance the magnitude changes nothing.
  EXPECT_FALSE(CompareElement(1.01, 1.0, Tolerance{1e-4, 1e-4}, 1e30).ok);

  std::vector<float> got, expected;
  MakeData(5000, 4, &got, &expected);
  std::vector<float> magnitude(got.size());
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> m(0.0f, 50.0f);
  for (float& x : magnitude) x = m(rng);
  magnitude[7] = kInfF;
  magnitude[8] = kNanF;
  const CompareSummary s = SummarizeFloat32(got.data(), expected.data(), 5000, t, magnitude.data());
  const Naive want = NaiveCompare(got, expected, t.atol, t.rtol, &magnitude, t.allowance);
  EXPECT_EQ(s.mismatches, want.mismatches);
  EXPECT_EQ(s.first_mismatch, want.first);
  EXPECT_EQ(s.max_abs_error, want.max_abs);
  // Fewer mismatches than without magnitudes: the allowance did widen some bounds.
  EXPECT_LT(s.mismatches, SummarizeFloat32(got.data(), expected.data(), 5000, t).mismatches);
}

TEST(DeviceCompareTest, AccumulatedSummariesEqualCompareOutputsReport) {
  // Two trials of two outputs each, summarized then accumulated vs compared by CompareOutput.
  const std::vector<int64_t> shape = {50, 100};
  CheckReport direct, accumulated;
  const Tolerance t = ToleranceFor(ir::ScalarType::kFloat32);
  for (int trial = 0; trial < 2; ++trial) {
    for (const char* name : {"C", "D"}) {
      std::vector<float> got, expected;
      // Trial 0 of "C" is correct; the rest carry planted errors.
      MakeData(5000, 10 + trial * 7 + name[0], &got, &expected);
      if (trial == 0 && name[0] == 'C') got = expected;
      ir::HostBuffer g = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, shape);
      ir::HostBuffer e = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, shape);
      for (size_t i = 0; i < got.size(); ++i) {
        g.data[i] = got[i];
        e.data[i] = expected[i];
      }
      const CheckDistribution d =
          trial == 0 ? CheckDistribution::kUniformSymmetric : CheckDistribution::kUniformPositive;
      CompareOutput(name, g, e, t, trial, d, &direct);
      const CompareSummary s = SummarizeFloat32(got.data(), expected.data(), 5000, t);
      const double g0 = s.first_mismatch >= 0 ? got[s.first_mismatch] : 0;
      const double e0 = s.first_mismatch >= 0 ? expected[s.first_mismatch] : 0;
      AccumulateSummary(name, shape, s, g0, e0, trial, d, &accumulated);
    }
  }
  EXPECT_GT(direct.mismatches, 0);
  EXPECT_EQ(accumulated.mismatches, direct.mismatches);
  EXPECT_EQ(accumulated.checked_elements, direct.checked_elements);
  EXPECT_EQ(accumulated.checked_elements, 4 * 5000);
  EXPECT_EQ(accumulated.max_abs_error, direct.max_abs_error);
  EXPECT_EQ(accumulated.max_rel_error, direct.max_rel_error);
  EXPECT_EQ(accumulated.first_mismatch, direct.first_mismatch);
  EXPECT_THAT(accumulated.first_mismatch, HasSubstr("(trial 0, uniform)"));
  EXPECT_THAT(accumulated.first_mismatch, ::testing::StartsWith("D["));
}

TEST(DeviceCompareTest, MismatchTextFormatsIndexAndValues) {
  EXPECT_EQ(MismatchText("C", {4, 30}, 2 * 30 + 17, std::nan(""), 1.25, 1,
                         CheckDistribution::kNormalOffset),
            "C[2, 17]: got nan, expected 1.25 (trial 1, normal)");
  EXPECT_EQ(MismatchText("out", {7}, 6, 0.1f, -3, 0, CheckDistribution::kUniformPositive),
            "out[6]: got 0.100000001, expected -3 (trial 0, uniform01)");
}

TEST(DeviceCompareTest, SlotEncoding) {
  const CompareSlot init = InitialCompareSlot();
  const CompareSummary none = DecodeCompareSlot(init, 10);
  EXPECT_EQ(none.elements, 10);
  EXPECT_EQ(none.mismatches, 0);
  EXPECT_EQ(none.first_mismatch, -1);
  EXPECT_EQ(none.max_abs_error, 0.0);
  EXPECT_EQ(none.max_rel_error, 0.0);
  CompareSlot slot = init;
  slot[0] = 3;
  const double abs_error = 0.375, rel_error = kInf;
  std::memcpy(&slot[1], &abs_error, 8);
  std::memcpy(&slot[2], &rel_error, 8);
  slot[3] = 41;
  const CompareSummary s = DecodeCompareSlot(slot, 100);
  EXPECT_EQ(s.mismatches, 3);
  EXPECT_EQ(s.first_mismatch, 41);
  EXPECT_EQ(s.max_abs_error, 0.375);
  EXPECT_EQ(s.max_rel_error, kInf);
  // The kernel maximizes bit patterns as unsigned integers: that order is the doubles' order for
  // non-negative values, +Inf included.
  const double ordered[] = {0.0, 1e-300, 1e-30, 0.5, 1.0, 3e10, 1e300, kInf};
  for (size_t i = 1; i < sizeof(ordered) / sizeof(ordered[0]); ++i) {
    uint64_t a, b;
    std::memcpy(&a, &ordered[i - 1], 8);
    std::memcpy(&b, &ordered[i], 8);
    EXPECT_LT(a, b) << ordered[i - 1] << " vs " << ordered[i];
  }
}

TEST(DeviceCompareTest, PtxHasEveryEntryAndTargetsSm75) {
  const std::string& ptx = DeviceComparePtx();
  EXPECT_THAT(ptx, HasSubstr(".target sm_75"));
  EXPECT_THAT(ptx, HasSubstr(".visible .entry tilesearch_compare_f32("));
  EXPECT_THAT(ptx, HasSubstr(".visible .entry tilesearch_compare_f16("));
  EXPECT_THAT(ptx, HasSubstr(".visible .entry tilesearch_compare_bf16("));
  // The 16-bit kernels widen their elements before the float64 rule.
  EXPECT_THAT(ptx, HasSubstr("cvt.f32.f16"));
  EXPECT_TRUE(DeviceComparer::Supports(ir::ScalarType::kBFloat16));
  EXPECT_FALSE(DeviceComparer::Supports(ir::ScalarType::kInt64));
  EXPECT_THAT(ptx, HasSubstr(".visible .entry tilesearch_bytes_differ("));
  EXPECT_EQ(&ptx, &DeviceComparePtx());
}

TEST(DeviceCompareTest, PtxassAcceptsThePtx) {
  const char* ptxas = "/usr/local/cuda/bin/ptxas";
  if (access(ptxas, X_OK) != 0) GTEST_SKIP() << ptxas << " not found";
  char dir[] = "/tmp/device_compare_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/compare.ptx";
  {
    std::ofstream out(path);
    out << DeviceComparePtx();
  }
  for (const char* arch : {"sm_75", "sm_90"}) {
    const std::string log = std::string(dir) + "/ptxas.log";
    const std::string cmd =
        std::string(ptxas) + " -arch=" + arch + " " + path + " -o /dev/null > " + log + " 2>&1";
    const int status = std::system(cmd.c_str());
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "ptxas -arch=" << arch << " rejected the compare PTX:\n"
        << text;
  }
  std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace
}  // namespace tilesearch::measure
