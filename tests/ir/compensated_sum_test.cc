// Compensated float32 sums (ir/compensated_sum.h) against float64 sums written as naive C++ loops:
// the Kahan bound holds over a long reduction where the plain float32 sum breaks it, the rewrite
// leaves what it must not touch alone, and results stay the same elsewhere.
#include "ir/compensated_sum.h"

#include <cmath>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/lower_naive.h"
#include "ir/reference.h"

namespace tilesearch::ir {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::tilesearch::testing::Ok;

using Axes = std::vector<Expr>;

constexpr double kU = 0x1p-24;  // float32's unit roundoff

// C[i, j] = Σ_k A[i, k] · B[k, j] with a long k.
ComputeDAG LongMatmul(int64_t m, int64_t k, int64_t n) {
  Tensor a = Ok(Placeholder("A", {m, k}));
  Tensor b = Ok(Placeholder("B", {k, n}));
  Tensor c = Ok(Reduce("C", {m, n}, ReduceKind::kSum, {k}, [&](const Axes& ax, const Axes& r) {
    return a(ax[0], r[0]) * b(r[0], ax[1]);
  }));
  return Ok(ComputeDAG::Create({c}));
}

// Softmax over the rows of X [rows, cols]: M = max, E = exp(X − M), S = Σ E, Y = E / S.
ComputeDAG Softmax(int64_t rows, int64_t cols) {
  Tensor x = Ok(Placeholder("X", {rows, cols}));
  Tensor mx = Ok(Reduce("M", {rows}, ReduceKind::kMax, {cols},
                        [&](const Axes& ax, const Axes& r) { return x(ax[0], r[0]); }));
  Tensor e = Ok(
      Compute("E", {rows, cols}, [&](const Axes& ax) { return Exp(x(ax[0], ax[1]) - mx(ax[0])); }));
  Tensor s = Ok(Reduce("S", {rows}, ReduceKind::kSum, {cols},
                       [&](const Axes& ax, const Axes& r) { return e(ax[0], r[0]); }));
  Tensor y =
      Ok(Compute("Y", {rows, cols}, [&](const Axes& ax) { return e(ax[0], ax[1]) / s(ax[0]); }));
  return Ok(ComputeDAG::Create({y}));
}

// The products' exact sum and Σ|products| in double (a product of two floats is exact in double).
struct Exact {
  double sum = 0;
  double magnitude = 0;
};
Exact ExactDot(const HostBuffer& a, const HostBuffer& b, int64_t i, int64_t j) {
  const int64_t k = a.shape[1], n = b.shape[1];
  Exact e;
  for (int64_t r = 0; r < k; ++r) {
    const double p = a.data[i * k + r] * b.data[r * n + j];
    e.sum += p;
    e.magnitude += std::fabs(p);
  }
  return e;
}

TEST(CompensatedSumTest, LongMatmulMeetsKahansBoundWherePlainSumsDoNot) {
  constexpr int64_t kM = 3, kK = 1 << 14, kN = 4;
  const ComputeDAG dag = LongMatmul(kM, kK, kN);
  const BufferMap inputs = MakeRandomInputs(dag, 7);
  const BufferMap plain = Ok(RunReference(dag, inputs));
  const BufferMap compensated = Ok(RunCompensatedReference(dag, inputs));
  double worst_plain = 0, worst_compensated = 0;  // error / (u · Σ|terms|)
  for (int64_t i = 0; i < kM; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      const Exact e = ExactDot(inputs.at("A"), inputs.at("B"), i, j);
      const double scale = kU * e.magnitude;
      // Kahan: |error| <= (2u + O(K u²)) Σ|terms|, plus the final rounding of the stored sum.
      const double got = compensated.at("C").data[i * kN + j];
      const double err = std::fabs(got - e.sum);
      EXPECT_LE(err, 2 * scale + kU * std::fabs(e.sum)) << "C[" << i << ", " << j << "]";
      worst_compensated = std::max(worst_compensated, err / scale);
      worst_plain =
          std::max(worst_plain, std::fabs(plain.at("C").data[i * kN + j] - e.sum) / scale);
    }
  }
  // The plain sequential sum's rounding errors accumulate over the 2^14 additions (a random walk
  // of half-ulps of partial sums); the compensated one is left with about its final rounding.
  EXPECT_GT(worst_plain, 20 * worst_compensated);
}

TEST(CompensatedSumTest, CancellingSumKeepsTheSmallTerms) {
  // X[0] = 1, then 2^12 terms of 2^-25 (each below half an ulp of 1, so a plain float32 sum
  // drops every one), then -1: the exact sum is 2^12 · 2^-25 = 2^-13.
  constexpr int64_t kLen = (1 << 12) + 2;
  Tensor x = Ok(Placeholder("X", {1, kLen}));
  Tensor s = Ok(Reduce("S", {1}, ReduceKind::kSum, {kLen},
                       [&](const Axes& ax, const Axes& r) { return x(ax[0], r[0]); }));
  const ComputeDAG dag = Ok(ComputeDAG::Create({s}));
  BufferMap inputs;
  HostBuffer xb = HostBuffer::Zeros(ScalarType::kFloat32, {1, kLen});
  xb.data[0] = 1.0;
  for (int64_t r = 1; r + 1 < kLen; ++r) xb.data[r] = 0x1p-25;
  xb.data[kLen - 1] = -1.0;
  inputs.emplace("X", xb);
  EXPECT_EQ(Ok(RunReference(dag, inputs)).at("S").data[0], 0.0);
  EXPECT_NEAR(Ok(RunCompensatedReference(dag, inputs)).at("S").data[0], 0x1p-13, 0x1p-13 * 1e-6);
}

TEST(CompensatedSumTest, MultiAxisReductionIsCompensatedAsOneChain) {
  // Σ over two reduce axes of [2, 64, 64]: one compensation across both loops, so the bound is
  // that of the whole 4096-term sum. The values make the plain sum lose digits: 1 then small.
  constexpr int64_t kR = 64;
  Tensor x = Ok(Placeholder("X", {2, kR, kR}));
  Tensor s = Ok(Reduce("S", {2}, ReduceKind::kSum, {kR, kR},
                       [&](const Axes& ax, const Axes& r) { return x(ax[0], r[0], r[1]); }));
  const ComputeDAG dag = Ok(ComputeDAG::Create({s}));
  BufferMap inputs = MakeRandomInputs(dag, 3);
  HostBuffer& xb = inputs.at("X");
  for (double& v : xb.data) v = static_cast<float>(v * 0x1p-20);
  xb.data[0] = xb.data[kR * kR] = 1.0;
  const BufferMap got = Ok(RunCompensatedReference(dag, inputs));
  for (int64_t b = 0; b < 2; ++b) {
    double exact = 0, magnitude = 0;
    for (int64_t r = 0; r < kR * kR; ++r) {
      exact += xb.data[b * kR * kR + r];
      magnitude += std::fabs(xb.data[b * kR * kR + r]);
    }
    EXPECT_LE(std::fabs(got.at("S").data[b] - exact), 2 * kU * magnitude + kU * std::fabs(exact))
        << "S[" << b << "]";
  }
  const LoopNest nest = CompensateFloatSums(Ok(LowerNaive(dag)));
  // One compensation buffer for the chain, not one per loop.
  const std::string text = ToString(nest);
  EXPECT_THAT(text, HasSubstr("S.kahan_c"));
  EXPECT_THAT(text, Not(HasSubstr("S.kahan_c1")));
}

TEST(CompensatedSumTest, LeavesMaxReductionsAndIntegerSumsAlone) {
  Tensor x = Ok(Placeholder("X", {4, 8}));
  Tensor m = Ok(Reduce("M", {4}, ReduceKind::kMax, {8},
                       [&](const Axes& ax, const Axes& r) { return x(ax[0], r[0]); }));
  Tensor xi = Ok(Placeholder("XI", {4, 8}, ScalarType::kInt32));
  Tensor si = Ok(Reduce("SI", {4}, ReduceKind::kSum, {8},
                        [&](const Axes& ax, const Axes& r) { return xi(ax[0], r[0]); }));
  const LoopNest nest = Ok(LowerNaive(Ok(ComputeDAG::Create({m, si}))));
  EXPECT_EQ(ToString(CompensateFloatSums(nest)), ToString(nest));
}

TEST(CompensatedSumTest, SoftmaxResultsAgreeWithThePlainProgram) {
  // Short sums: compensation changes a result by at most a few ulps.
  constexpr int64_t kRows = 5, kCols = 11;
  const ComputeDAG dag = Softmax(kRows, kCols);
  const BufferMap inputs = MakeRandomInputs(dag, 11);
  const BufferMap plain = Ok(RunReference(dag, inputs));
  const BufferMap compensated = Ok(RunCompensatedReference(dag, inputs));
  for (size_t i = 0; i < plain.at("Y").data.size(); ++i) {
    EXPECT_NEAR(compensated.at("Y").data[i], plain.at("Y").data[i], 8 * kU) << i;
  }
}

TEST(CompensatedSumTest, FreshBufferNamesAvoidExistingOnes) {
  // A placeholder already named like the compensation buffer: the rewrite picks another name.
  Tensor a = Ok(Placeholder("C.kahan_c", {2, 8}));
  Tensor b = Ok(Placeholder("B", {8, 2}));
  Tensor c = Ok(Reduce("C", {2, 2}, ReduceKind::kSum, {8}, [&](const Axes& ax, const Axes& r) {
    return a(ax[0], r[0]) * b(r[0], ax[1]);
  }));
  const ComputeDAG dag = Ok(ComputeDAG::Create({c}));
  EXPECT_THAT(ToString(CompensateFloatSums(Ok(LowerNaive(dag)))), HasSubstr("C.kahan_c1"));
  const BufferMap inputs = MakeRandomInputs(dag, 5);
  const BufferMap got = Ok(RunCompensatedReference(dag, inputs));
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      double exact = 0;
      for (int64_t r = 0; r < 8; ++r) {
        exact += inputs.at("C.kahan_c").data[i * 8 + r] * inputs.at("B").data[r * 2 + j];
      }
      EXPECT_NEAR(got.at("C").data[i * 2 + j], exact, 1e-6);
    }
  }
}

TEST(EvaluatePointRoundedTest, IsThePlainNaiveProgramAtEveryPoint) {
  // The plain float32 program's values, one point at a time, equal the interpreter's run of the
  // naive program (kNative: every operation rounded) exactly, on a long sum and on softmax.
  const ComputeDAG mm = LongMatmul(2, 1 << 12, 3);
  const BufferMap mm_inputs = MakeRandomInputs(mm, 21);
  const BufferMap mm_plain = Ok(RunReference(mm, mm_inputs));
  const BufferMap mm_compensated = Ok(RunCompensatedReference(mm, mm_inputs));
  int differs_from_compensated = 0;
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      const double got = Ok(EvaluatePointRounded(mm, mm.output_ids()[0], {i, j}, mm_inputs));
      EXPECT_EQ(got, mm_plain.at("C").data[i * 3 + j]) << i << ", " << j;
      differs_from_compensated += got != mm_compensated.at("C").data[i * 3 + j];
    }
  }
  EXPECT_GT(differs_from_compensated, 0);  // the point evaluation does round like the plain sum

  constexpr int64_t kRows = 3, kCols = 7;
  const ComputeDAG softmax = Softmax(kRows, kCols);
  const BufferMap inputs = MakeRandomInputs(softmax, 5);
  const BufferMap plain = Ok(RunReference(softmax, inputs));
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t j = 0; j < kCols; ++j) {
      EXPECT_EQ(Ok(EvaluatePointRounded(softmax, softmax.output_ids()[0], {i, j}, inputs)),
                plain.at("Y").data[i * kCols + j])
          << i << ", " << j;
    }
  }
  EXPECT_THAT(
      EvaluatePointRounded(softmax, softmax.output_ids()[0], {kRows, 0}, inputs),
      ::tilesearch::testing::StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("out of range")));
}

}  // namespace
}  // namespace tilesearch::ir
