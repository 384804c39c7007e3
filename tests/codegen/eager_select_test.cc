// Selects whose branches load only elements their condition loads (softplus's
// Select(X[i] > 20, X[i], log(1 + exp(X[i])))) are emitted eagerly, as one arith.select with one
// load per element, no branch, and vectorize. Selects whose condition does not load those elements
// (a padding select with an index-only condition, or a condition on another element) and whose
// branches are cheap (no call, no select) load global buffers at clamped indices, then select:
// no branch, and equal window elements loaded once. Branches that call a function keep the scf.if
// that performs only the taken branch's loads (ir/expr.h). The results of each kind, scalar and in
// vectorized loops, through the host JIT against float64 loops.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/host_buffer.h"
#include "ir/lower_naive.h"
#include "ir/ops/registry.h"
#include "tests/codegen/nest_builders.h"
#include "tests/codegen/ptx_test_util.h"

namespace tilesearch::codegen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::tilesearch::testing::IsOk;
using namespace ::tilesearch::codegen::testing;  // NOLINT: nest builders
using ir::Expr;
using ir::ForKind;

constexpr int64_t kN = 4096;
constexpr double kThreshold = 20.0;

// softplus(x) for beta 1, threshold 20, built as ir/ops/elementwise.cc builds it.
Expr Softplus(const Expr& x) {
  const Expr bx = x * 1.0;
  return ir::Select(bx > kThreshold, x, ir::Log(1.0 + ir::Exp(bx)) / 1.0);
}

// Y[i] = f(i) for i < kN, Y and X of kN float32.
using Body = std::function<Expr(const Expr& i)>;

Expr SoftplusAt(const Expr& i) { return Softplus(Ld("X", {i})); }

// Lazy: the condition reads no buffer; X[i - 1] must not be read at i = 0.
Expr PaddingAt(const Expr& i) {
  return ir::Select(i >= C(1), Ld("X", {i - C(1)}), ir::FloatConst(0.5));
}

// Lazy: the condition loads X[i], the branch X[i + 1] (read only below the last element).
Expr NeighbourAt(const Expr& i) {
  return ir::Select(Ld("X", {i}) < 0.0, Ld("X", {ir::Min(i + C(1), C(kN - 1))}) * 2.0,
                    ir::FloatConst(-1.0));
}

ir::LoopNest OneBuffer(const Body& f, ir::Stmt (*wrap)(const Body&)) {
  return ir::LoopNest{"elementwise", {Decl("X", {kN}), Decl("Y", {kN})}, 1, wrap(f)};
}

// GPU: blocks of 64 threads, each thread 4 consecutive elements in an inner loop of kind K.
template <ForKind K>
ir::Stmt GpuLoops(const Body& f) {
  const Expr i = (V("b") * C(64) + V("t")) * C(4) + V("v");
  return Loop("b", kN / 256,
              Loop("t", 64, Loop("v", 4, St("Y", {i}, f(i)), K), ForKind::kThreadIdxX),
              ForKind::kBlockIdxX);
}

// Host: 8 consecutive elements in an inner loop of kind K.
template <ForKind K>
ir::Stmt HostLoops(const Body& f) {
  const Expr i = V("o") * C(8) + V("v");
  return Loop("o", kN / 8, Loop("v", 8, St("Y", {i}, f(i)), K));
}

struct Gpu {
  std::string mlir;
  std::string ptx;
};

Gpu CompileGpu(const ir::LoopNest& nest) {
  GpuCompileOptions options;
  options.keep_mlir = true;
  absl::StatusOr<GpuModule> m = CompileToPtx(nest, {}, options);
  EXPECT_THAT(m, IsOk());
  if (!m.ok()) return {};
  return {m->mlir, m->ptx};
}

TEST(EagerSelectTest, SoftplusOpIsOneLoadAndNoBranchPerElement) {
  absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp("softplus", Args({{64, 256}}));
  ASSERT_THAT(dag, IsOk());
  absl::StatusOr<ir::LoopNest> nest = ir::LowerNaive(*dag);
  ASSERT_THAT(nest, IsOk());
  const Gpu g = CompileGpu(BindNaive(*nest));
  EXPECT_EQ(Count(g.mlir, "scf.if"), 0) << g.mlir;
  EXPECT_GE(Count(g.mlir, "arith.select"), 1) << g.mlir;
  // The branch's X[i] is the condition's load, read once.
  EXPECT_EQ(Count(g.ptx, "ld.global"), 1) << g.ptx;
  EXPECT_THAT(g.ptx, Not(HasSubstr("bra"))) << g.ptx;
  ExpectPtxasAccepts(g.ptx, "eager_select_softplus");
}

TEST(EagerSelectTest, SoftplusVectorizesToOne16ByteLoadAndStore) {
  const Gpu g = CompileGpu(OneBuffer(SoftplusAt, GpuLoops<ForKind::kVectorized>));
  EXPECT_EQ(Count(g.mlir, "scf.if"), 0) << g.mlir;
  EXPECT_THAT(g.mlir, HasSubstr("vector<4xi1>")) << g.mlir;  // the condition, per lane
  EXPECT_EQ(Count(g.ptx, "ld.global"), 1) << g.ptx;
  EXPECT_THAT(g.ptx, HasSubstr("ld.global.nc.v4")) << g.ptx;
  EXPECT_THAT(g.ptx, HasSubstr("st.global.v4")) << g.ptx;
  EXPECT_THAT(g.ptx, Not(HasSubstr("bra"))) << g.ptx;
  // log(1 + exp(x)) became log1p in the vector form too (its 1 is a broadcast there): one
  // lg2 per lane of 1 + y, no x - 1 of a plain log.
  EXPECT_EQ(Count(g.ptx, "lg2.approx.ftz.f32"), 4) << g.ptx;
  EXPECT_THAT(g.ptx, Not(HasSubstr("0fBF800000"))) << g.ptx;  // -1.0
  ExpectPtxasAccepts(g.ptx, "eager_select_softplus_v4");
}

// Lazy: the branch calls exp, which a select evaluated eagerly would compute for nothing.
Expr PaddedExpAt(const Expr& i) {
  return ir::Select(i >= C(1), ir::Exp(Ld("X", {i - C(1)})), ir::FloatConst(0.5));
}

// A 3-point window with zero padding at both ends, as a depthwise convolution's rows:
// Y[i] = X[i - 1] + 2 X[i] + 3 X[i + 1], X outside [0, kN) read as 0.
Expr WindowAt(const Expr& i) {
  Expr sum = ir::FloatConst(0.0);
  for (int k = 0; k < 3; ++k) {
    const Expr at = i + C(k - 1);
    sum = sum + ir::Select(at >= C(0) && at < C(kN), Ld("X", {at}), ir::FloatConst(0.0)) *
                    static_cast<double>(k + 1);
  }
  return sum;
}

// Float32 elements the PTX loads from global memory (scalar, 2- and 4-wide loads).
int GlobalElementsLoaded(const std::string& ptx) {
  return Count(ptx, "ld.global.nc.b32") + 2 * Count(ptx, "ld.global.nc.v2.b32") +
         4 * Count(ptx, "ld.global.nc.v4.b32");
}

TEST(EagerSelectTest, PaddingSelectsLoadAtClampedIndicesWithoutBranches) {
  for (const Body& f : {Body(PaddingAt), Body(NeighbourAt)}) {
    const Gpu scalar = CompileGpu(OneBuffer(f, GpuLoops<ForKind::kUnrolled>));
    EXPECT_EQ(Count(scalar.mlir, "scf.if"), 0) << scalar.mlir;
    EXPECT_THAT(scalar.ptx, Not(HasSubstr("bra"))) << scalar.ptx;
    // The vectorizer still refuses them (the condition depends on the lane): four scalar
    // selects, no vector load.
    const Gpu vec = CompileGpu(OneBuffer(f, GpuLoops<ForKind::kVectorized>));
    EXPECT_THAT(vec.mlir, Not(HasSubstr("vector.load"))) << vec.mlir;
    EXPECT_EQ(Count(vec.mlir, "scf.if"), 0) << vec.mlir;
    ExpectPtxasAccepts(vec.ptx, "eager_select_clamped");
  }
  // X[i - 1] may be X[-1]: clamped from below (i - 1 is at most kN - 2, so not from above).
  const Gpu pad = CompileGpu(OneBuffer(PaddingAt, GpuLoops<ForKind::kUnrolled>));
  EXPECT_THAT(pad.mlir, HasSubstr("arith.maxsi")) << pad.mlir;
  // At most one load per element (LLVM may widen the three in-range ones to an aligned 4).
  EXPECT_LE(Count(pad.ptx, "ld.global"), 4) << pad.ptx;
  // X[min(i + 1, kN - 1)] is in range by the known ranges: no clamp.
  const Gpu next = CompileGpu(OneBuffer(NeighbourAt, GpuLoops<ForKind::kUnrolled>));
  EXPECT_THAT(next.mlir, Not(HasSubstr("arith.maxsi"))) << next.mlir;
}

TEST(EagerSelectTest, PaddedWindowLoadsEachElementOnce) {
  // 4 outputs per thread read X[i - 1 .. i + 4]: 6 elements, each loaded once (each padding
  // branch loaded its own copy while the selects were branches: 12 loads). The four in the
  // middle are in range and aligned: LLVM's load vectorizer makes them one 16-byte load.
  const Gpu g = CompileGpu(OneBuffer(WindowAt, GpuLoops<ForKind::kUnrolled>));
  EXPECT_EQ(Count(g.mlir, "scf.if"), 0) << g.mlir;
  EXPECT_EQ(GlobalElementsLoaded(g.ptx), 6) << g.ptx;
  EXPECT_EQ(Count(g.ptx, "ld.global.nc.v4.b32"), 1) << g.ptx;
  EXPECT_THAT(g.ptx, Not(HasSubstr("bra"))) << g.ptx;
  ExpectPtxasAccepts(g.ptx, "eager_select_window");
}

// Lazy: the branch divides by a non-constant (evaluated where not taken, a division could trap).
Expr PaddedQuotientAt(const Expr& i) {
  return ir::Select(i >= C(1), Ld("X", {(i - C(1)) / (V("t") + C(1))}), ir::FloatConst(0.5));
}

TEST(EagerSelectTest, BranchesThatCallAFunctionOrDivideByAVariableStayBranches) {
  const Gpu scalar = CompileGpu(OneBuffer(PaddedExpAt, GpuLoops<ForKind::kUnrolled>));
  EXPECT_EQ(Count(scalar.mlir, "scf.if"), 4) << scalar.mlir;  // one per unrolled element
  const Gpu quotient = CompileGpu(OneBuffer(PaddedQuotientAt, GpuLoops<ForKind::kUnrolled>));
  EXPECT_EQ(Count(quotient.mlir, "scf.if"), 4) << quotient.mlir;
  const Gpu vec = CompileGpu(OneBuffer(PaddedExpAt, GpuLoops<ForKind::kVectorized>));
  EXPECT_THAT(vec.mlir, Not(HasSubstr("vector.load"))) << vec.mlir;
  EXPECT_EQ(Count(vec.mlir, "scf.if"), 4) << vec.mlir;
  ExpectPtxasAccepts(vec.ptx, "eager_select_lazy");
}

// X: random values over [-110, 45] (beyond the threshold and where exp(x) is far below float32's
// 1 + y resolution), the threshold itself and its neighbours, and zeros.
ir::HostBuffer Inputs() {
  ir::HostBuffer x = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {kN});
  ir::FillRandom(x, 7, -110.0, 45.0);
  for (double& v : x.data) v = static_cast<float>(v);
  const float t = static_cast<float>(kThreshold);
  const float around[] = {t, std::nextafter(t, 0.0f), std::nextafter(t, 100.0f), 0.0f, -0.0f};
  for (int k = 0; k < 5; ++k) x.data[100 + k] = around[k];
  return x;
}

std::vector<double> RunHost(const ir::LoopNest& nest, const ir::HostBuffer& x) {
  absl::StatusOr<std::unique_ptr<HostKernel>> k = CompileForHost(nest);
  EXPECT_THAT(k, IsOk());
  if (!k.ok()) return {};
  ir::BufferMap buffers;
  buffers["X"] = x;
  buffers["Y"] = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {kN});
  EXPECT_THAT(RunOnBuffers(**k, nest, buffers), IsOk());
  return buffers.at("Y").data;
}

TEST(EagerSelectTest, HostSoftplusMatchesFloat64ScalarAndVectorized) {
  const ir::HostBuffer x = Inputs();
  for (auto loops : {HostLoops<ForKind::kSerial>, HostLoops<ForKind::kVectorized>}) {
    const std::vector<double> y = RunHost(OneBuffer(SoftplusAt, loops), x);
    ASSERT_EQ(y.size(), static_cast<size_t>(kN));
    for (int64_t k = 0; k < kN; ++k) {
      const double v = x.data[k];
      const double want = v > kThreshold ? v : std::log1p(std::exp(v));
      // float32's log(1 + exp(x)): 1 + exp(x) rounds to 1 below x ~ -17 (the host keeps the plain
      // log), so an absolute term besides the relative one.
      EXPECT_NEAR(y[k], want, 1e-6 + 2e-6 * want) << "x = " << v;
    }
  }
}

TEST(EagerSelectTest, HostClampedAndLazySelectsMatchFloat64ScalarAndVectorized) {
  const ir::HostBuffer x = Inputs();
  for (auto loops : {HostLoops<ForKind::kSerial>, HostLoops<ForKind::kVectorized>}) {
    const std::vector<double> pad = RunHost(OneBuffer(PaddingAt, loops), x);
    const std::vector<double> next = RunHost(OneBuffer(NeighbourAt, loops), x);
    const std::vector<double> window = RunHost(OneBuffer(WindowAt, loops), x);
    const std::vector<double> exp_pad = RunHost(OneBuffer(PaddedExpAt, loops), x);
    ASSERT_EQ(pad.size(), static_cast<size_t>(kN));
    ASSERT_EQ(next.size(), static_cast<size_t>(kN));
    ASSERT_EQ(window.size(), static_cast<size_t>(kN));
    ASSERT_EQ(exp_pad.size(), static_cast<size_t>(kN));
    for (int64_t k = 0; k < kN; ++k) {
      EXPECT_EQ(pad[k], k >= 1 ? x.data[k - 1] : 0.5) << k;
      const double neighbour = x.data[std::min(k + 1, kN - 1)];
      EXPECT_EQ(next[k], x.data[k] < 0 ? neighbour * 2 : -1.0) << k;
      double want = 0;
      for (int64_t j = 0; j < 3; ++j) {
        const int64_t at = k + j - 1;
        if (at >= 0 && at < kN) want += x.data[at] * static_cast<double>(j + 1);
      }
      EXPECT_NEAR(window[k], want, 1e-5 * (1 + std::abs(want))) << k;
      const double e = k >= 1 ? std::exp(x.data[k - 1]) : 0.5;
      EXPECT_NEAR(exp_pad[k], e, 1e-6 * (1 + e)) << k;
    }
  }
}

}  // namespace
}  // namespace tilesearch::codegen
