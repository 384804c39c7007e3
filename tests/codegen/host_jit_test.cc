// Host JIT on hand-built nests: parallel and vectorized loops, local buffers in parallel bodies,
// GPU-style nests run serially, integer floor division, compared with naive C++ loops or the
// interpreter; the emitted LLVM IR holds vector operations; unsupported nests return errors.
#include <cmath>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/host_buffer.h"
#include "ir/interpreter.h"
#include "tests/codegen/nest_builders.h"

namespace tilesearch::codegen {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;
using namespace ::tilesearch::codegen::testing;  // NOLINT: nest builders
using ir::ForKind;
using ir::ScalarType;

ir::HostBuffer Random(std::vector<int64_t> shape, uint64_t seed,
                      ScalarType t = ScalarType::kFloat32) {
  ir::HostBuffer b = ir::HostBuffer::Zeros(t, std::move(shape));
  ir::FillRandom(b, seed);
  return b;
}

std::unique_ptr<HostKernel> Compile(const ir::LoopNest& nest, HostCompileOptions options = {}) {
  absl::StatusOr<std::unique_ptr<HostKernel>> k = CompileForHost(nest, options);
  EXPECT_THAT(k, IsOk());
  return k.ok() ? *std::move(k) : nullptr;
}

// C = A·B with i parallel, j split by 8 with the inner part vectorized, k serial in between.
ir::LoopNest ParallelVectorMatmul(int64_t m, int64_t n, int64_t k) {
  const ir::Expr j = V("jo") * C(8) + V("ji");
  ir::Stmt init = Loop(
      "jo", n / 8, Loop("ji", 8, St("C", {V("i"), j}, ir::FloatConst(0)), ForKind::kVectorized));
  ir::Stmt update =
      Loop("jo", n / 8,
           Loop("kk", k,
                Loop("ji", 8,
                     St("C", {V("i"), j},
                        Ld("C", {V("i"), j}) + Ld("A", {V("i"), V("kk")}) * Ld("B", {V("kk"), j})),
                     ForKind::kVectorized)));
  ir::Stmt body = Loop("i", m, Seq({init, update}), ForKind::kParallel);
  return ir::LoopNest{
      "pv_matmul", {Decl("A", {m, k}), Decl("B", {k, n}), Decl("C", {m, n})}, 2, body};
}

void ExpectMatmul(const ir::BufferMap& buffers, int64_t m, int64_t n, int64_t k) {
  const std::vector<float> want = NaiveMatmul(buffers.at("A"), buffers.at("B"), m, n, k);
  const ir::HostBuffer& c = buffers.at("C");
  for (int64_t e = 0; e < m * n; ++e) {
    ASSERT_NEAR(c.data[e], want[e], 1e-5 * std::fabs(want[e]) + 1e-6) << "element " << e;
  }
}

TEST(HostJitTest, ParallelVectorizedMatmulMatchesNaiveLoops) {
  const int64_t m = 37, n = 32, k = 19;
  const ir::LoopNest nest = ParallelVectorMatmul(m, n, k);
  HostCompileOptions options;
  options.keep_llvm_ir = true;
  options.num_threads = 4;
  std::unique_ptr<HostKernel> kernel = Compile(nest, options);
  ASSERT_NE(kernel, nullptr);
  EXPECT_THAT(kernel->llvm_ir(), HasSubstr("<8 x float>"));
  EXPECT_THAT(kernel->llvm_ir(), HasSubstr("ts_parallel_for"));
  ir::BufferMap buffers{{"A", Random({m, k}, 1)},
                        {"B", Random({k, n}, 2)},
                        {"C", ir::HostBuffer::Zeros(ScalarType::kFloat32, {m, n})}};
  ASSERT_THAT(RunOnBuffers(*kernel, nest, buffers), IsOk());
  ExpectMatmul(buffers, m, n, k);
  // A second run reuses the kernel (and the thread pool).
  buffers["A"] = Random({m, k}, 3);
  ASSERT_THAT(RunOnBuffers(*kernel, nest, buffers), IsOk());
  ExpectMatmul(buffers, m, n, k);
}

TEST(HostJitTest, SingleThreadAndPlainLoopsGiveTheSameMatmul) {
  const int64_t m = 9, n = 16, k = 5;
  const ir::LoopNest nest = ParallelVectorMatmul(m, n, k);
  HostCompileOptions options;
  options.num_threads = 1;
  options.vectorize = false;
  options.opt_level = 0;
  std::unique_ptr<HostKernel> kernel = Compile(nest, options);
  ASSERT_NE(kernel, nullptr);
  ir::BufferMap buffers{{"A", Random({m, k}, 4)},
                        {"B", Random({k, n}, 5)},
                        {"C", ir::HostBuffer::Zeros(ScalarType::kFloat32, {m, n})}};
  ASSERT_THAT(RunOnBuffers(*kernel, nest, buffers), IsOk());
  ExpectMatmul(buffers, m, n, k);
}

// Row sums through a local accumulator inside a parallel loop (one buffer per thread), a nested
// parallel loop (run serially) and a guarded vectorized tail (not contiguous-provable: a loop).
TEST(HostJitTest, LocalBuffersNestedParallelAndGuardedVectorLoopsMatchTheInterpreter) {
  const int64_t rows = 23, cols = 10;
  ir::Stmt acc_init = St("acc", {C(0)}, ir::FloatConst(0));
  ir::Stmt acc_add =
      Loop("c", cols, St("acc", {C(0)}, Ld("acc", {C(0)}) + Ld("X", {V("r"), V("c")})));
  ir::Stmt store = St("S", {V("r")}, Ld("acc", {C(0)}));
  ir::Stmt sums =
      Loop("r", rows,
           ir::AllocateNode::Make(Decl("acc", {1}, ScalarType::kFloat32, ir::MemoryScope::kLocal),
                                  Seq({acc_init, acc_add, store})),
           ForKind::kParallel);
  // Y[r, c] = 2 X[r, c] for c < cols, in chunks of 4 with a guard on the tail.
  const ir::Expr col = V("co") * C(4) + V("ci");
  ir::Stmt scaled =
      Loop("r2", rows,
           Loop("co", 3,
                Loop("ci", 4,
                     ir::IfThenElseNode::Make(
                         col < C(cols), St("Y", {V("r2"), col}, Ld("X", {V("r2"), col}) * 2.0)),
                     ForKind::kVectorized),
                ForKind::kParallel),
           ForKind::kParallel);
  const ir::LoopNest nest{"mixed",
                          {Decl("X", {rows, cols}), Decl("S", {rows}), Decl("Y", {rows, cols})},
                          1,
                          Seq({sums, scaled})};
  std::unique_ptr<HostKernel> kernel = Compile(nest);
  ASSERT_NE(kernel, nullptr);
  ir::BufferMap got{{"X", Random({rows, cols}, 7)},
                    {"S", ir::HostBuffer::Zeros(ScalarType::kFloat32, {rows})},
                    {"Y", ir::HostBuffer::Zeros(ScalarType::kFloat32, {rows, cols})}};
  ir::BufferMap want = got;
  ASSERT_THAT(RunOnBuffers(*kernel, nest, got), IsOk());
  ASSERT_THAT(ir::Interpret(nest, want), IsOk());
  EXPECT_EQ(got.at("S").data, want.at("S").data);
  EXPECT_EQ(got.at("Y").data, want.at("Y").data);
}

TEST(HostJitTest, GpuNestWithoutBarriersRunsSeriallyOnTheHost) {
  const int64_t m = 16, n = 24, k = 7;
  const ir::LoopNest nest = GpuSimpleMatmul(m, n, k);
  std::unique_ptr<HostKernel> kernel = Compile(nest);
  ASSERT_NE(kernel, nullptr);
  ir::BufferMap buffers{{"A", Random({m, k}, 8)},
                        {"B", Random({k, n}, 9)},
                        {"C", ir::HostBuffer::Zeros(ScalarType::kFloat32, {m, n})}};
  ASSERT_THAT(RunOnBuffers(*kernel, nest, buffers), IsOk());
  ExpectMatmul(buffers, m, n, k);
}

TEST(HostJitTest, IntegerDivisionAndModuloFloorLikeTheInterpreter) {
  // Q[i] = (i - 7) / d[i], R[i] = (i - 7) % d[i], D[i] = (i - 7) / 3, M[i] = (i - 7) % 3 with
  // divisors of both signs, for i in [0, 16).
  const ir::Expr a = V("i") - C(7);
  const ir::Expr d = Ld("d", {V("i")}, ScalarType::kInt64);
  ir::Stmt body = Loop("i", 16,
                       Seq({St("Q", {V("i")}, a / d), St("R", {V("i")}, a % d),
                            St("D", {V("i")}, a / C(3)), St("M", {V("i")}, a % C(3)),
                            St("F", {V("i")}, ir::Cast(ScalarType::kFloat32, a % C(4)) / 2.0)}));
  const ScalarType i64 = ScalarType::kInt64;
  const ir::LoopNest nest{"divmod",
                          {Decl("d", {16}, i64), Decl("Q", {16}, i64), Decl("R", {16}, i64),
                           Decl("D", {16}, i64), Decl("M", {16}, i64), Decl("F", {16})},
                          1,
                          body};
  std::unique_ptr<HostKernel> kernel = Compile(nest);
  ASSERT_NE(kernel, nullptr);
  ir::BufferMap got;
  got["d"] = ir::HostBuffer::Zeros(i64, {16});
  for (int i = 0; i < 16; ++i) got["d"].data[i] = (i % 2 ? -1 : 1) * (1 + i % 5);
  for (const char* name : {"Q", "R", "D", "M"}) got[name] = ir::HostBuffer::Zeros(i64, {16});
  got["F"] = ir::HostBuffer::Zeros(ScalarType::kFloat32, {16});
  ir::BufferMap want = got;
  ASSERT_THAT(RunOnBuffers(*kernel, nest, got), IsOk());
  ASSERT_THAT(ir::Interpret(nest, want), IsOk());
  for (const char* name : {"Q", "R", "D", "M", "F"}) {
    EXPECT_EQ(got.at(name).data, want.at(name).data) << name;
  }
  // Spot checks of floor semantics, independent of the interpreter: -7 / 3 = -3, -7 % 3 = 2.
  EXPECT_EQ(got.at("D").data[0], -3);
  EXPECT_EQ(got.at("M").data[0], 2);
}

// TF32 values of float32 inputs (the tensor-core split's parts), in scalar and vectorized loops,
// against values worked out by hand: rounding is to nearest with ties away from zero,
// truncation drops the low 13 mantissa bits; infinities and NaN stay what they are.
TEST(HostJitTest, Tf32RoundAndTruncateMatchTheirDefinition) {
  const float u = std::ldexp(1.0f, -10);  // one TF32 ulp at 1
  const std::vector<float> x = {1 + u / 2, -(1 + u / 2), 1 + u / 4, 1 + 3 * u / 4,
                                0.1f,      -3.0f,        INFINITY,  NAN};
  const std::vector<float> round = {1 + u, -(1 + u), 1.0f, 1 + u, 0.0999755859375f,
                                    -3.0f, INFINITY, NAN};
  const std::vector<float> trunc = {1.0f,  -1.0f,    1.0f, 1.0f, 0.0999755859375f,
                                    -3.0f, INFINITY, NAN};
  const int64_t n = static_cast<int64_t>(x.size());
  for (const ForKind kind : {ForKind::kSerial, ForKind::kVectorized}) {
    const ir::Expr xi = Ld("X", {V("i")});
    const ir::LoopNest nest{
        "tf32",
        {Decl("X", {n}), Decl("R", {n}), Decl("T", {n})},
        1,
        Loop("i", n,
             Seq({St("R", {V("i")}, ir::Tf32Round(xi)), St("T", {V("i")}, ir::Tf32Truncate(xi))}),
             kind)};
    std::unique_ptr<HostKernel> kernel = Compile(nest);
    ASSERT_NE(kernel, nullptr);
    ir::BufferMap got;
    got["X"] = ir::HostBuffer::Zeros(ScalarType::kFloat32, {n});
    for (int64_t i = 0; i < n; ++i) got["X"].data[i] = x[i];
    got["R"] = ir::HostBuffer::Zeros(ScalarType::kFloat32, {n});
    got["T"] = ir::HostBuffer::Zeros(ScalarType::kFloat32, {n});
    ir::BufferMap want = got;
    ASSERT_THAT(RunOnBuffers(*kernel, nest, got), IsOk());
    ASSERT_THAT(ir::Interpret(nest, want), IsOk());
    for (int64_t i = 0; i < n; ++i) {
      for (const auto& [name, expected] : {std::pair{"R", &round}, std::pair{"T", &trunc}}) {
        const double e = (*expected)[i];
        const double g = got.at(name).data[i];
        const double w = want.at(name).data[i];
        if (std::isnan(e)) {
          EXPECT_TRUE(std::isnan(g) && std::isnan(w)) << name << " " << i;
        } else {
          EXPECT_EQ(g, e) << name << " of " << x[i] << (kind == ForKind::kSerial ? "" : " vector");
          EXPECT_EQ(w, e) << name << " of " << x[i] << " (interpreter)";
        }
      }
    }
  }
}

TEST(HostJitTest, Int64ConstantsAbove2To53AreExact) {
  const int64_t big = (int64_t{1} << 60) + 3;  // not representable as a double
  const ScalarType i64 = ScalarType::kInt64;
  const ir::LoopNest nest{
      "big", {Decl("Y", {2}, i64)}, 0, Loop("i", 2, St("Y", {V("i")}, ir::IntConst(big) + V("i")))};
  std::unique_ptr<HostKernel> kernel = Compile(nest);
  ASSERT_NE(kernel, nullptr);
  std::vector<int64_t> y(2, 0);
  ASSERT_THAT(kernel->Run({y.data()}), IsOk());
  EXPECT_EQ(y[0], big);
  EXPECT_EQ(y[1], big + 1);
}

TEST(HostJitTest, GpuNestWithBarriersIsUnimplementedOnTheHost) {
  EXPECT_THAT(CompileForHost(GpuTiledMatmul(32, 32, 8)),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("barriers")));
}

TEST(HostJitTest, LocalBufferAroundThreadLoopsIsUnimplementedOnTheHost) {
  ir::Stmt body = ir::AllocateNode::Make(
      Decl("t", {1}, ScalarType::kFloat32, ir::MemoryScope::kLocal),
      Loop("tx", 4, St("Y", {V("tx")}, ir::FloatConst(1)), ForKind::kThreadIdxX));
  const ir::LoopNest nest{"local_around", {Decl("Y", {4})}, 0, body};
  EXPECT_THAT(CompileForHost(nest),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("local buffer 't'")));
}

TEST(HostJitTest, UnknownBuffersAndVariablesAreInvalidArguments) {
  const ir::LoopNest unknown_buffer{
      "bad", {Decl("Y", {4})}, 0, Loop("i", 4, St("Y", {V("i")}, Ld("Z", {V("i")})))};
  EXPECT_THAT(CompileForHost(unknown_buffer),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown buffer 'Z'")));
  const ir::LoopNest unknown_var{
      "bad", {Decl("Y", {4})}, 0, Loop("i", 4, St("Y", {V("j")}, ir::FloatConst(0)))};
  EXPECT_THAT(CompileForHost(unknown_var),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown variable 'j'")));
  const ir::LoopNest wrong_rank{
      "bad", {Decl("Y", {4})}, 0, Loop("i", 4, St("Y", {V("i"), V("i")}, ir::FloatConst(0)))};
  EXPECT_THAT(CompileForHost(wrong_rank),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2 indices")));
}

TEST(HostJitTest, RunChecksTheBufferCount) {
  const ir::LoopNest nest{
      "one", {Decl("Y", {4})}, 0, Loop("i", 4, St("Y", {V("i")}, ir::FloatConst(1)))};
  std::unique_ptr<HostKernel> kernel = Compile(nest);
  ASSERT_NE(kernel, nullptr);
  EXPECT_THAT(kernel->Run({}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes 1 buffers, got 0")));
  ir::BufferMap wrong{{"Y", ir::HostBuffer::Zeros(ScalarType::kFloat32, {5})}};
  EXPECT_THAT(RunOnBuffers(*kernel, nest, wrong),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("buffer 'Y'")));
}

}  // namespace
}  // namespace tilesearch::codegen
