// The correctness checker: dtype tolerances, NaN / Inf rules, mismatch reports, float16 / bfloat16
// packing against hand-computed bit patterns, poisoning, check inputs, and the float64 spot check
// of a reference against a matmul written as naive C++ loops.
#include "measure/checker.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/tensor.h"

namespace tilesearch::measure {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;
using Axes = std::vector<ir::Expr>;

using ::tilesearch::testing::Ok;

ir::HostBuffer Buffer(ir::ScalarType dtype, std::vector<int64_t> shape, std::vector<double> data) {
  ir::HostBuffer b = ir::HostBuffer::Zeros(dtype, std::move(shape));
  b.data = std::move(data);
  return b;
}

// C[i, j] = sum_k A[i, k] · B[k, j] with A [M, K], B [K, N].
constexpr int64_t kM = 8, kK = 16, kN = 4;
ir::ComputeDAG Matmul() {
  ir::Tensor a = Ok(ir::Placeholder("A", {kM, kK}));
  ir::Tensor b = Ok(ir::Placeholder("B", {kK, kN}));
  ir::Tensor c =
      Ok(ir::Reduce("C", {kM, kN}, ir::ReduceKind::kSum, {kK}, [&](const Axes& ax, const Axes& r) {
        return a(ax[0], r[0]) * b(r[0], ax[1]);
      }));
  return Ok(ir::ComputeDAG::Create({c}));
}

std::vector<double> NaiveMatmul(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> c(kM * kN, 0.0);
  for (int64_t i = 0; i < kM; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      double s = 0;
      for (int64_t k = 0; k < kK; ++k) s += a[i * kK + k] * b[k * kN + j];
      c[i * kN + j] = static_cast<float>(s);
    }
  }
  return c;
}

uint16_t Bits16(const std::vector<std::byte>& bytes, size_t i) {
  uint16_t u;
  std::memcpy(&u, bytes.data() + 2 * i, 2);
  return u;
}

// ---------------------------------------------------------------------------------------------
// Tolerance and comparison.

TEST(ToleranceTest, DefaultsByDtypeAndOverrides) {
  Tolerance f32 = ToleranceFor(ir::ScalarType::kFloat32);
  EXPECT_DOUBLE_EQ(f32.atol, 1e-4);
  EXPECT_DOUBLE_EQ(f32.rtol, 1e-4);
  Tolerance f16 = ToleranceFor(ir::ScalarType::kFloat16);
  EXPECT_DOUBLE_EQ(f16.atol, 1e-2);
  EXPECT_DOUBLE_EQ(f16.rtol, 1e-2);
  Tolerance bf16 = ToleranceFor(ir::ScalarType::kBFloat16);
  EXPECT_DOUBLE_EQ(bf16.atol, 1e-2);
  EXPECT_DOUBLE_EQ(bf16.rtol, 1e-2);
  for (ir::ScalarType t : {ir::ScalarType::kInt32, ir::ScalarType::kInt64, ir::ScalarType::kBool}) {
    EXPECT_EQ(ToleranceFor(t).atol, 0);
    EXPECT_EQ(ToleranceFor(t).rtol, 0);
  }
  Tolerance custom = ToleranceFor(ir::ScalarType::kFloat32, 0.5, 0);
  EXPECT_DOUBLE_EQ(custom.atol, 0.5);
  EXPECT_DOUBLE_EQ(custom.rtol, 1e-4);
}

TEST(CompareOutputTest, WithinToleranceCountsNoMismatch) {
  // |got − ref| ≤ 1e-4 + 1e-4 · |ref|: 3.0003 vs 3 is 3e-4 ≤ 4e-4.
  ir::HostBuffer expected = Buffer(ir::ScalarType::kFloat32, {2, 2}, {1, 2, 3, 4});
  ir::HostBuffer got = Buffer(ir::ScalarType::kFloat32, {2, 2}, {1, 2, 3.0003, 4});
  CheckReport report;
  CompareOutput("C", got, expected, ToleranceFor(ir::ScalarType::kFloat32), 0,
                CheckDistribution::kUniformSymmetric, &report);
  EXPECT_EQ(report.mismatches, 0);
  EXPECT_EQ(report.checked_elements, 4);
  EXPECT_TRUE(report.first_mismatch.empty());
  EXPECT_NEAR(report.max_abs_error, 3e-4, 1e-12);
  EXPECT_NEAR(report.max_rel_error, 1e-4, 1e-12);
}

TEST(CompareOutputTest, MismatchReportsFirstElementWithIndexTrialAndDistribution) {
  ir::HostBuffer expected = Buffer(ir::ScalarType::kFloat32, {2, 3}, {1, 2, 3, 4, 1.25, 6});
  ir::HostBuffer got = Buffer(ir::ScalarType::kFloat32, {2, 3}, {1, 2, 3, 4, NAN, 7});
  CheckReport report;
  CompareOutput("C", got, expected, ToleranceFor(ir::ScalarType::kFloat32), 1,
                CheckDistribution::kNormalOffset, &report);
  EXPECT_EQ(report.mismatches, 2);
  EXPECT_EQ(report.first_mismatch, "C[1, 1]: got nan, expected 1.25 (trial 1, normal)");
  EXPECT_TRUE(std::isinf(report.max_abs_error));
  // A second trial accumulates but keeps the first mismatch.
  CompareOutput("C", got, expected, ToleranceFor(ir::ScalarType::kFloat32), 2,
                CheckDistribution::kUniformSymmetric, &report);
  EXPECT_EQ(report.mismatches, 4);
  EXPECT_EQ(report.checked_elements, 12);
  EXPECT_THAT(report.first_mismatch, HasSubstr("trial 1"));
}

TEST(CompareOutputTest, NanAndInfRules) {
  struct Case {
    double got, expected;
    bool match;
  };
  const Case cases[] = {
      {NAN, 1.0, false},
      {INFINITY, 1.0, false},
      {-INFINITY, 1.0, false},
      {NAN, NAN, true},
      {1.0, NAN, false},
      {INFINITY, INFINITY, true},
      {-INFINITY, INFINITY, false},
      {1e30, INFINITY, false},
      {-INFINITY, -INFINITY, true},
  };
  for (const Case& c : cases) {
    CheckReport report;
    CompareOutput("Y", Buffer(ir::ScalarType::kFloat32, {1}, {c.got}),
                  Buffer(ir::ScalarType::kFloat32, {1}, {c.expected}),
                  ToleranceFor(ir::ScalarType::kFloat32), 0, CheckDistribution::kUniformSymmetric,
                  &report);
    EXPECT_EQ(report.mismatches, c.match ? 0 : 1) << "got " << c.got << " expected " << c.expected;
  }
}

TEST(CompareOutputTest, IntegersAreExactAndHalfToleranceIsLooser) {
  CheckReport ints;
  CompareOutput("I", Buffer(ir::ScalarType::kInt32, {3}, {3, 4, -2}),
                Buffer(ir::ScalarType::kInt32, {3}, {3, 5, -2}),
                ToleranceFor(ir::ScalarType::kInt32), 0, CheckDistribution::kUniformSymmetric,
                &ints);
  EXPECT_EQ(ints.mismatches, 1);
  EXPECT_EQ(ints.first_mismatch, "I[1]: got 4, expected 5 (trial 0, uniform)");
  // float16: 1e-2 + 1e-2 · 2 = 0.03 allowed; 2.02 passes, 2.05 fails.
  CheckReport half;
  CompareOutput("H", Buffer(ir::ScalarType::kFloat16, {2}, {2.02, 2.05}),
                Buffer(ir::ScalarType::kFloat16, {2}, {2, 2}),
                ToleranceFor(ir::ScalarType::kFloat16), 0, CheckDistribution::kUniformPositive,
                &half);
  EXPECT_EQ(half.mismatches, 1);
  EXPECT_THAT(half.first_mismatch, HasSubstr("H[1]: got 2.05"));
  EXPECT_THAT(half.first_mismatch, HasSubstr("uniform01"));
}

// ---------------------------------------------------------------------------------------------
// Packing.

TEST(PackTest, Float16BitPatternsRoundToNearestEven) {
  const std::vector<double> values = {
      1.0,
      -2.0,
      0.1,
      65504,
      65519,
      65520,
      std::ldexp(1.0, -24),
      std::ldexp(1.0, -25),
      3 * std::ldexp(1.0, -25),
      std::ldexp(1.0, -14),
      1 + std::ldexp(1.0, -11),      // tie between 1 (even) and 1 + 2^-10: 1
      1 + 3 * std::ldexp(1.0, -11),  // tie between 1 + 2^-10 (odd) and 1 + 2^-9: 1 + 2^-9
      INFINITY,
      -INFINITY};
  const std::vector<uint16_t> bits = {0x3C00, 0xC000, 0x2E66, 0x7BFF, 0x7BFF, 0x7C00, 0x0001,
                                      0x0000, 0x0002, 0x0400, 0x3C00, 0x3C02, 0x7C00, 0xFC00};
  ir::HostBuffer b =
      Buffer(ir::ScalarType::kFloat16, {static_cast<int64_t>(values.size())}, values);
  std::vector<std::byte> packed = PackBuffer(b);
  ASSERT_EQ(packed.size(), values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(Bits16(packed, i), bits[i]) << "value " << values[i];
  }
  ir::HostBuffer nan = Buffer(ir::ScalarType::kFloat16, {1}, {NAN});
  const uint16_t n = Bits16(PackBuffer(nan), 0);
  EXPECT_EQ(n & 0x7C00, 0x7C00);
  EXPECT_NE(n & 0x03FF, 0);
}

TEST(PackTest, BFloat16BitPatternsRoundToNearestEven) {
  const std::vector<double> values = {
      1.0, -1.0, 3.0, 1 + std::ldexp(1.0, -8), 1 + 3 * std::ldexp(1.0, -8), INFINITY};
  const std::vector<uint16_t> bits = {0x3F80, 0xBF80, 0x4040, 0x3F80, 0x3F82, 0x7F80};
  ir::HostBuffer b = Buffer(ir::ScalarType::kBFloat16, {6}, values);
  std::vector<std::byte> packed = PackBuffer(b);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(Bits16(packed, i), bits[i]) << "value " << values[i];
  }
}

TEST(UnpackTest, HalfPatternsDecodeToExactValues) {
  // 0x3555: exponent 13, mantissa 341 → 1365 / 4096; 0x0001: 2^-24; bf16 0x4049: 201 / 64.
  const uint16_t half[] = {0x3555, 0x0001, 0x7C00, 0xFC00, 0x8000, 0x7E00};
  ir::HostBuffer h = ir::HostBuffer::Zeros(ir::ScalarType::kFloat16, {6});
  ASSERT_THAT(UnpackBuffer(half, sizeof(half), &h), IsOk());
  EXPECT_EQ(h.data[0], 1365.0 / 4096);
  EXPECT_EQ(h.data[1], std::ldexp(1.0, -24));
  EXPECT_EQ(h.data[2], INFINITY);
  EXPECT_EQ(h.data[3], -INFINITY);
  EXPECT_EQ(h.data[4], 0.0);
  EXPECT_TRUE(std::signbit(h.data[4]));
  EXPECT_TRUE(std::isnan(h.data[5]));
  const uint16_t bf[] = {0x4049, 0xBF80};
  ir::HostBuffer b = ir::HostBuffer::Zeros(ir::ScalarType::kBFloat16, {2});
  ASSERT_THAT(UnpackBuffer(bf, sizeof(bf), &b), IsOk());
  EXPECT_EQ(b.data[0], 3.140625);
  EXPECT_EQ(b.data[1], -1.0);
}

TEST(PackTest, IntegerFloatAndBoolRoundTrip) {
  ir::HostBuffer f = Buffer(ir::ScalarType::kFloat32, {3}, {0.5, -1.75, 1e10});
  std::vector<std::byte> pf = PackBuffer(f);
  float raw[3];
  std::memcpy(raw, pf.data(), 12);
  EXPECT_EQ(raw[0], 0.5f);
  EXPECT_EQ(raw[1], -1.75f);
  EXPECT_EQ(raw[2], 1e10f);

  ir::HostBuffer i64 = Buffer(ir::ScalarType::kInt64, {2}, {std::ldexp(1.0, 40) + 3, -7});
  std::vector<std::byte> p64 = PackBuffer(i64);
  int64_t raw64[2];
  std::memcpy(raw64, p64.data(), 16);
  EXPECT_EQ(raw64[0], (int64_t{1} << 40) + 3);
  EXPECT_EQ(raw64[1], -7);

  ir::HostBuffer i32 = Buffer(ir::ScalarType::kInt32, {2}, {-5, 7});
  ir::HostBuffer b = Buffer(ir::ScalarType::kBool, {3}, {1, 0, 1});
  std::vector<std::byte> pb = PackBuffer(b);
  ASSERT_EQ(pb.size(), 3u);
  EXPECT_EQ(pb[0], std::byte{1});
  EXPECT_EQ(pb[1], std::byte{0});

  for (const ir::HostBuffer* buf : {&f, &i64, &i32, &b}) {
    std::vector<std::byte> packed = PackBuffer(*buf);
    ir::HostBuffer back = ir::HostBuffer::Zeros(buf->dtype, buf->shape);
    ASSERT_THAT(UnpackBuffer(packed.data(), packed.size(), &back), IsOk());
    EXPECT_EQ(back.data, buf->data) << ir::TypeName(buf->dtype);
  }
}

TEST(UnpackTest, WrongByteCountIsAnError) {
  ir::HostBuffer b = ir::HostBuffer::Zeros(ir::ScalarType::kFloat16, {2, 3});
  std::vector<std::byte> bytes(11);
  EXPECT_THAT(UnpackBuffer(bytes.data(), bytes.size(), &b),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("11 bytes")));
}

TEST(PoisonTest, FloatsGetNanIntegersAndBoolThePattern) {
  uint32_t f32[2] = {0, 0};
  PoisonBytes(f32, ir::ScalarType::kFloat32, 2);
  EXPECT_EQ(f32[0], 0x7FC00000u);
  EXPECT_EQ(f32[1], 0x7FC00000u);
  uint16_t f16[3] = {0, 0, 0};
  PoisonBytes(f16, ir::ScalarType::kFloat16, 2);
  EXPECT_EQ(f16[0], 0x7E00);
  EXPECT_EQ(f16[1], 0x7E00);
  EXPECT_EQ(f16[2], 0);  // only `count` elements
  uint16_t bf16[1] = {0};
  PoisonBytes(bf16, ir::ScalarType::kBFloat16, 1);
  EXPECT_EQ(bf16[0], 0x7FC0);
  uint32_t i32[1] = {0};
  PoisonBytes(i32, ir::ScalarType::kInt32, 1);
  EXPECT_EQ(i32[0], 0x5A5A5A5Au);
  unsigned char flags[2] = {0, 0};
  PoisonBytes(flags, ir::ScalarType::kBool, 2);
  EXPECT_EQ(flags[1], 0x5A);
  // A poisoned bool never reads back as a valid 0 / 1.
  ir::HostBuffer b = ir::HostBuffer::Zeros(ir::ScalarType::kBool, {2});
  ASSERT_THAT(UnpackBuffer(flags, 2, &b), IsOk());
  EXPECT_NE(b.data[0], 0);
  EXPECT_NE(b.data[0], 1);
}

// ---------------------------------------------------------------------------------------------
// Check inputs.

TEST(MakeCheckInputsTest, DistributionsHaveTheirRanges) {
  ir::ComputeDAG dag = Matmul();
  ir::BufferMap u = MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, 7);
  ir::BufferMap p = MakeCheckInputs(dag, CheckDistribution::kUniformPositive, 7);
  ASSERT_EQ(u.size(), 2u);
  ASSERT_EQ(u.at("A").data.size(), static_cast<size_t>(kM * kK));
  EXPECT_EQ(u.at("B").shape, (std::vector<int64_t>{kK, kN}));
  bool negative = false;
  for (const auto& [name, b] : u) {
    for (double v : b.data) {
      EXPECT_GE(v, -1);
      EXPECT_LT(v, 1);
      EXPECT_EQ(v, static_cast<float>(v));
      negative |= v < 0;
    }
  }
  EXPECT_TRUE(negative);
  for (const auto& [name, b] : p) {
    for (double v : b.data) {
      EXPECT_GE(v, 0);
      EXPECT_LT(v, 1);
    }
  }
}

TEST(MakeCheckInputsTest, NormalHasOffsetMeanAndLargeSpread) {
  ir::Tensor x = Ok(ir::Placeholder("X", {4096}));
  ir::Tensor y = Ok(ir::Compute("Y", {4096}, [&](const Axes& ax) { return x(ax[0]) * x(ax[0]); }));
  ir::ComputeDAG dag = Ok(ir::ComputeDAG::Create({y}));
  const std::vector<double>& v =
      MakeCheckInputs(dag, CheckDistribution::kNormalOffset, 3).at("X").data;
  double sum = 0, sq = 0;
  for (double e : v) sum += e;
  const double mean = sum / v.size();
  for (double e : v) sq += (e - mean) * (e - mean);
  const double sd = std::sqrt(sq / (v.size() - 1));
  // score.py's normal(2, 32) for float32. Standard errors: 32 / 64 = 0.5 for the mean, about 0.35
  // for the deviation.
  EXPECT_NEAR(mean, 2.0, 2.0);
  EXPECT_NEAR(sd, 32.0, 1.6);
}

TEST(MakeCheckInputsTest, SeededPerSeedAndPerBufferName) {
  ir::ComputeDAG dag = Matmul();
  ir::BufferMap a = MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, 11);
  ir::BufferMap b = MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, 11);
  ir::BufferMap c = MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, 12);
  EXPECT_EQ(a.at("A").data, b.at("A").data);
  EXPECT_NE(a.at("A").data, c.at("A").data);
  // A buffer's values depend on its name, not on the other placeholders of the DAG.
  ir::Tensor only_a = Ok(ir::Placeholder("A", {kM, kK}));
  ir::Tensor neg =
      Ok(ir::Compute("N", {kM, kK}, [&](const Axes& ax) { return -only_a(ax[0], ax[1]); }));
  ir::ComputeDAG dag_a = Ok(ir::ComputeDAG::Create({neg}));
  EXPECT_EQ(MakeCheckInputs(dag_a, CheckDistribution::kUniformSymmetric, 11).at("A").data,
            a.at("A").data);
}

TEST(MakeCheckInputsTest, HalfAndIntegerBuffersHoldRepresentableValues) {
  ir::Tensor h = Ok(ir::Placeholder("H", {512}, ir::ScalarType::kFloat16));
  ir::Tensor hy = Ok(ir::Compute("HY", {512}, [&](const Axes& ax) { return h(ax[0]) + h(ax[0]); }));
  ir::Tensor n = Ok(ir::Placeholder("I", {512}, ir::ScalarType::kInt32));
  ir::Tensor ny = Ok(ir::Compute("IY", {512}, [&](const Axes& ax) { return n(ax[0]) + n(ax[0]); }));
  ir::ComputeDAG dag = Ok(ir::ComputeDAG::Create({hy, ny}));
  for (CheckDistribution d :
       {CheckDistribution::kUniformSymmetric, CheckDistribution::kUniformPositive,
        CheckDistribution::kNormalOffset}) {
    ir::BufferMap in = MakeCheckInputs(dag, d, 5);
    for (double v : in.at("H").data) {
      // A normal float16 has 11 significant bits: v / 2^(e − 11) is an integer for v in
      // [2^(e−1), 2^e); below 2^-14 the quantum is 2^-24.
      int e = 0;
      std::frexp(v, &e);
      const double quantum = std::ldexp(1.0, std::max(e - 11, -24));
      EXPECT_EQ(std::fmod(v, quantum), 0.0) << v;
    }
    for (double v : in.at("I").data) EXPECT_EQ(v, std::trunc(v));
    if (d == CheckDistribution::kUniformSymmetric) {
      for (double v : in.at("I").data) {
        EXPECT_GE(v, -16);
        EXPECT_LT(v, 16);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Reference spot check.

TEST(VerifyReferenceSamplesTest, CorrectReferencePasses) {
  ir::ComputeDAG dag = Matmul();
  ir::BufferMap in = MakeCheckInputs(dag, CheckDistribution::kNormalOffset, 2);
  ir::BufferMap out;
  out.emplace("C", Buffer(ir::ScalarType::kFloat32, {kM, kN},
                          NaiveMatmul(in.at("A").data, in.at("B").data)));
  EXPECT_THAT(VerifyReferenceSamples(dag, in, out, 16, 9), IsOk());
}

TEST(VerifyReferenceSamplesTest, CorruptedElementIsCaught) {
  ir::ComputeDAG dag = Matmul();
  ir::BufferMap in = MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, 2);
  const std::vector<double> good = NaiveMatmul(in.at("A").data, in.at("B").data);
  // The first and last elements are always sampled.
  for (int64_t flat : {int64_t{0}, kM * kN - 1}) {
    ir::BufferMap out;
    std::vector<double> bad = good;
    bad[flat] += 0.5;
    out.emplace("C", Buffer(ir::ScalarType::kFloat32, {kM, kN}, bad));
    EXPECT_THAT(VerifyReferenceSamples(dag, in, out, 0, 9),
                StatusIs(absl::StatusCode::kInternal,
                         HasSubstr(flat == 0 ? "reference output 'C' disagrees with float64 "
                                               "point evaluation at [0, 0]"
                                             : "at [7, 3]")));
  }
  // A middle element, with enough samples to reach every one of the 32 elements.
  ir::BufferMap out;
  std::vector<double> bad = good;
  bad[3 * kN + 2] = NAN;
  out.emplace("C", Buffer(ir::ScalarType::kFloat32, {kM, kN}, bad));
  EXPECT_THAT(VerifyReferenceSamples(dag, in, out, 1000, 9),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("at [3, 2]: got nan")));
}

// A float16 output whose float64 value is past float16's range is +inf in the type (in our
// reference and in PyTorch alike): the spot check accepts that infinity, and still catches an
// infinity where the value is in range or of the other sign.
TEST(VerifyReferenceSamplesTest, HalfOutputPastItsRangeIsInfinity) {
  ir::Tensor a = Ok(ir::Placeholder("A", {kM, kK}, ir::ScalarType::kFloat16));
  ir::Tensor b = Ok(ir::Placeholder("B", {kK, kN}, ir::ScalarType::kFloat16));
  ir::Tensor c =
      Ok(ir::Reduce("C", {kM, kN}, ir::ReduceKind::kSum, {kK}, [&](const Axes& ax, const Axes& r) {
        return a(ax[0], r[0]) * b(r[0], ax[1]);
      }));
  ir::ComputeDAG dag = Ok(ir::ComputeDAG::Create({c}));
  ASSERT_EQ(dag.stage(dag.output_ids()[0]).dtype(), ir::ScalarType::kFloat16);
  const auto run = [&](double value, double got) {
    ir::BufferMap in;
    in.emplace("A",
               Buffer(ir::ScalarType::kFloat16, {kM, kK}, std::vector<double>(kM * kK, value)));
    in.emplace("B",
               Buffer(ir::ScalarType::kFloat16, {kK, kN}, std::vector<double>(kK * kN, value)));
    ir::BufferMap out;
    out.emplace("C", Buffer(ir::ScalarType::kFloat16, {kM, kN}, std::vector<double>(kM * kN, got)));
    return VerifyReferenceSamples(dag, in, out, 8, 9);
  };
  // 16 products of 64 · 64: 65536, past float16's largest finite 65504 (ties at 65520 go to inf).
  EXPECT_THAT(run(64, INFINITY), IsOk());
  EXPECT_THAT(run(64, -INFINITY), StatusIs(absl::StatusCode::kInternal, HasSubstr("got -inf")));
  // 16 products of 1 · 1: 16, far inside the range.
  EXPECT_THAT(run(1, 16), IsOk());
  EXPECT_THAT(run(1, INFINITY), StatusIs(absl::StatusCode::kInternal, HasSubstr("got inf")));
}

// A step budget below the points' cost keeps the first and last element (a corrupted middle one
// is then out of reach), and generated inputs (no data on the host) verify as held ones.
TEST(VerifyReferenceSamplesTest, StepBudgetKeepsFirstAndLastAndGeneratedInputsWork) {
  ir::ComputeDAG dag = Matmul();
  ir::BufferMap in = MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, 2);
  ir::BufferMap generated = MakeGeneratedCheckInputs(dag, CheckDistribution::kUniformSymmetric, 2);
  ASSERT_TRUE(generated.at("A").data.empty());
  const std::vector<double> good = NaiveMatmul(in.at("A").data, in.at("B").data);
  const int64_t one_point = kK;  // a matmul element costs K stage-body steps
  for (const ir::BufferMap* inputs : {&in, &generated}) {
    std::vector<double> bad = good;
    bad[3 * kN + 2] = NAN;
    ir::BufferMap out;
    out.emplace("C", Buffer(ir::ScalarType::kFloat32, {kM, kN}, bad));
    EXPECT_THAT(VerifyReferenceSamples(dag, *inputs, out, 1000, 9),
                StatusIs(absl::StatusCode::kInternal, HasSubstr("at [3, 2]: got nan")));
    EXPECT_THAT(VerifyReferenceSamples(dag, *inputs, out, 1000, 9, one_point), IsOk());
    bad[kM * kN - 1] += 0.5;
    out["C"] = Buffer(ir::ScalarType::kFloat32, {kM, kN}, bad);
    EXPECT_THAT(VerifyReferenceSamples(dag, *inputs, out, 1000, 9, one_point),
                StatusIs(absl::StatusCode::kInternal, HasSubstr("at [7, 3]")));
  }
}

TEST(VerifyReferenceSamplesTest, ToleranceIsWidenedTenfold) {
  ir::ComputeDAG dag = Matmul();
  ir::BufferMap in = MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, 2);
  std::vector<double> off = NaiveMatmul(in.at("A").data, in.at("B").data);
  off[0] += 5e-4;  // outside 1e-4 + 1e-4·|ref| but inside ten times that
  ir::BufferMap out;
  out.emplace("C", Buffer(ir::ScalarType::kFloat32, {kM, kN}, off));
  EXPECT_THAT(VerifyReferenceSamples(dag, in, out, 0, 1), IsOk());
}

TEST(VerifyReferenceSamplesTest, MissingOutputIsAnError) {
  ir::ComputeDAG dag = Matmul();
  ir::BufferMap in = MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, 2);
  EXPECT_THAT(VerifyReferenceSamples(dag, in, {}, 4, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'C'")));
}

}  // namespace
}  // namespace tilesearch::measure
