// The reference interpreter on hand-built loop nests, checked against naive C++ loops: CPU and
// GPU-style (blocks, threads, shared / local buffers, barriers) programs, the region-by-region
// thread model (a missing barrier gives a wrong answer), error statuses and float precision.
#include "ir/interpreter.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/host_buffer.h"
#include "ir/stmt.h"

namespace tilesearch::ir {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

constexpr ScalarType kF32 = ScalarType::kFloat32;

Expr V(const std::string& name) { return MakeVar(name); }
Expr C(int64_t v) { return IntConst(v); }
Expr Ld(const std::string& buffer, std::vector<Expr> indices, ScalarType t = kF32) {
  return LoadNode::Make(t, buffer, std::move(indices));
}
Stmt St(const std::string& buffer, std::vector<Expr> indices, Expr value) {
  return StoreNode::Make(buffer, std::move(indices), std::move(value));
}
Stmt Loop(const std::string& var, int64_t extent, Stmt body, ForKind kind = ForKind::kSerial) {
  return ForNode::Make(V(var), C(0), C(extent), kind, std::move(body));
}
Stmt Seq(std::vector<Stmt> stmts) { return SeqNode::Make(std::move(stmts)); }
BufferDecl Decl(const std::string& name, std::vector<int64_t> shape, ScalarType t = kF32,
                MemoryScope scope = MemoryScope::kGlobal) {
  return BufferDecl{name, t, std::move(shape), scope};
}

HostBuffer Random(std::vector<int64_t> shape, uint64_t seed) {
  HostBuffer b = HostBuffer::Zeros(kF32, std::move(shape));
  FillRandom(b, seed);
  return b;
}

// C[i, j] = sum_k A[i, k] * B[k, j], accumulating in place in C.
LoopNest CpuMatmul(int64_t m, int64_t n, int64_t k) {
  Stmt update =
      St("C", {V("i"), V("j")},
         Ld("C", {V("i"), V("j")}) + Ld("A", {V("i"), V("k")}) * Ld("B", {V("k"), V("j")}));
  Stmt body = Loop(
      "i", m, Loop("j", n, Seq({St("C", {V("i"), V("j")}, FloatConst(0)), Loop("k", k, update)})));
  return LoopNest{"matmul", {Decl("A", {m, k}), Decl("B", {k, n}), Decl("C", {m, n})}, 2, body};
}

// Naive float32 matmul, same summation order as the loop nests.
std::vector<float> NaiveMatmul(const HostBuffer& a, const HostBuffer& b, int64_t m, int64_t n,
                               int64_t k) {
  std::vector<float> c(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t r = 0; r < k; ++r) {
        const float prod =
            static_cast<float>(a.data[i * k + r]) * static_cast<float>(b.data[r * n + j]);
        acc = acc + prod;
      }
      c[i * n + j] = acc;
    }
  }
  return c;
}

TEST(InterpreterTest, CpuMatmulMatchesNaiveFloatLoopsExactly) {
  const int64_t m = 7, n = 13, k = 5;
  BufferMap buffers{
      {"A", Random({m, k}, 1)}, {"B", Random({k, n}, 2)}, {"C", HostBuffer::Zeros(kF32, {m, n})}};
  ASSERT_THAT(Interpret(CpuMatmul(m, n, k), buffers), IsOk());
  const std::vector<float> expected = NaiveMatmul(buffers["A"], buffers["B"], m, n, k);
  for (int64_t e = 0; e < m * n; ++e) EXPECT_EQ(buffers["C"].data[e], expected[e]) << e;
}

TEST(InterpreterTest, Float64ModeKeepsProductsExactButRoundsStores) {
  const int64_t m = 7, n = 13, k = 5;
  BufferMap buffers{
      {"A", Random({m, k}, 3)}, {"B", Random({k, n}, 4)}, {"C", HostBuffer::Zeros(kF32, {m, n})}};
  ASSERT_THAT(Interpret(CpuMatmul(m, n, k), buffers, {Precision::kFloat64}), IsOk());
  const HostBuffer& a = buffers["A"];
  const HostBuffer& b = buffers["B"];
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;  // C is a float32 buffer: every store rounds
      for (int64_t r = 0; r < k; ++r) {
        acc = static_cast<float>(static_cast<double>(acc) + a.data[i * k + r] * b.data[r * n + j]);
      }
      EXPECT_EQ(buffers["C"].data[i * n + j], acc);
    }
  }
}

// A GPU-style tiled matmul: each 16x16 block of C is computed by 8x8 threads holding 2x2
// accumulators in a local buffer; 16x8 tiles of A and 8x16 tiles of B are staged in shared memory,
// filled cooperatively by threadIdx loops nested in the compute's threadIdx loops (sharing the
// hardware index), with barriers after the fill and after the use.
struct TiledMatmulOptions {
  bool barrier_after_fill = true;
  bool barrier_after_use = true;
};

LoopNest GpuTiledMatmul(int64_t m, int64_t n, int64_t k, TiledMatmulOptions opt = {}) {
  const Expr by = V("by"), bx = V("bx"), ty = V("ty"), tx = V("tx"), ko = V("ko");
  const Expr ki = V("ki"), ii = V("ii"), jj = V("jj"), f = V("f"), fy = V("fy"), fx = V("fx");
  const Expr fused = f * 64 + fy * 8 + fx;  // 0 .. 127: every element of a 128-element tile
  Stmt fill_a = Loop("f", 2,
                     Loop("fy", 8,
                          Loop("fx", 8,
                               St("As", {fused / 8, fused % 8},
                                  Ld("A", {by * 16 + fused / 8, ko * 8 + fused % 8})),
                               ForKind::kThreadIdxX),
                          ForKind::kThreadIdxY));
  Stmt fill_b = Loop("f", 2,
                     Loop("fy", 8,
                          Loop("fx", 8,
                               St("Bs", {fused / 16, fused % 16},
                                  Ld("B", {ko * 8 + fused / 16, bx * 16 + fused % 16})),
                               ForKind::kThreadIdxX),
                          ForKind::kThreadIdxY));
  Stmt compute = Loop("ki", 8,
                      Loop("ii", 2,
                           Loop("jj", 2,
                                St("acc", {ii, jj},
                                   Ld("acc", {ii, jj}) + Ld("As", {ty * 2 + ii, ki}) *
                                                             Ld("Bs", {ki, tx * 2 + jj})))));
  std::vector<Stmt> k_body = {fill_a, fill_b};
  if (opt.barrier_after_fill) k_body.push_back(BarrierNode::Make());
  k_body.push_back(compute);
  if (opt.barrier_after_use) k_body.push_back(BarrierNode::Make());
  Stmt thread_body =
      AllocateNode::Make(Decl("acc", {2, 2}, kF32, MemoryScope::kLocal),
                         Seq({Loop("ii", 2, Loop("jj", 2, St("acc", {ii, jj}, FloatConst(0)))),
                              Loop("ko", k / 8, Seq(k_body)),
                              Loop("ii", 2,
                                   Loop("jj", 2,
                                        St("C", {by * 16 + ty * 2 + ii, bx * 16 + tx * 2 + jj},
                                           Ld("acc", {ii, jj}))))}));
  Stmt block_body = AllocateNode::Make(
      Decl("As", {16, 8}, kF32, MemoryScope::kShared),
      AllocateNode::Make(
          Decl("Bs", {8, 16}, kF32, MemoryScope::kShared),
          Loop("ty", 8, Loop("tx", 8, thread_body, ForKind::kThreadIdxX), ForKind::kThreadIdxY)));
  Stmt body =
      Loop("by", m / 16, Loop("bx", n / 16, block_body, ForKind::kBlockIdxX), ForKind::kBlockIdxY);
  return LoopNest{
      "tiled_matmul", {Decl("A", {m, k}), Decl("B", {k, n}), Decl("C", {m, n})}, 2, body};
}

constexpr int64_t kM = 32, kN = 48, kK = 24;

BufferMap MatmulBuffers() {
  return BufferMap{{"A", Random({kM, kK}, 11)},
                   {"B", Random({kK, kN}, 12)},
                   {"C", HostBuffer::Zeros(kF32, {kM, kN})}};
}

int CountMismatches(const HostBuffer& c, const std::vector<float>& expected) {
  int mismatches = 0;
  for (size_t e = 0; e < expected.size(); ++e) {
    if (!(c.data[e] == expected[e])) ++mismatches;  // NaN counts as a mismatch
  }
  return mismatches;
}

TEST(InterpreterTest, GpuTiledMatmulWithSharedMemoryMatchesNaiveLoops) {
  BufferMap buffers = MatmulBuffers();
  ASSERT_THAT(Interpret(GpuTiledMatmul(kM, kN, kK), buffers), IsOk());
  const std::vector<float> expected = NaiveMatmul(buffers["A"], buffers["B"], kM, kN, kK);
  EXPECT_EQ(CountMismatches(buffers["C"], expected), 0);
}

TEST(InterpreterTest, MissingBarrierAfterSharedFillGivesWrongAnswer) {
  BufferMap buffers = MatmulBuffers();
  ASSERT_THAT(Interpret(GpuTiledMatmul(kM, kN, kK, {.barrier_after_fill = false}), buffers),
              IsOk());
  const std::vector<float> expected = NaiveMatmul(buffers["A"], buffers["B"], kM, kN, kK);
  EXPECT_GT(CountMismatches(buffers["C"], expected), 0);
}

TEST(InterpreterTest, MissingBarrierAfterSharedUseGivesWrongAnswer) {
  // Without it, thread 0 runs the next iteration's fill before thread 1 has read the old tile.
  BufferMap buffers = MatmulBuffers();
  ASSERT_THAT(Interpret(GpuTiledMatmul(kM, kN, kK, {.barrier_after_use = false}), buffers), IsOk());
  const std::vector<float> expected = NaiveMatmul(buffers["A"], buffers["B"], kM, kN, kK);
  EXPECT_GT(CountMismatches(buffers["C"], expected), 0);
}

// for threadIdx.x tx in 0..4: allocate tmp[1] (scope): tmp[0] = tx * 10; barrier; out[tx] = tmp[0]
LoopNest ScratchPerThread(MemoryScope scope) {
  Stmt body =
      Loop("tx", 4,
           AllocateNode::Make(Decl("tmp", {1}, kF32, scope),
                              Seq({St("tmp", {C(0)}, Cast(kF32, V("tx") * 10)), BarrierNode::Make(),
                                   St("out", {V("tx")}, Ld("tmp", {C(0)}))})),
           ForKind::kThreadIdxX);
  return LoopNest{"scratch", {Decl("out", {4})}, 0, body};
}

TEST(InterpreterTest, LocalBuffersArePrivatePerThread) {
  BufferMap buffers{{"out", HostBuffer::Zeros(kF32, {4})}};
  ASSERT_THAT(Interpret(ScratchPerThread(MemoryScope::kLocal), buffers), IsOk());
  EXPECT_THAT(buffers["out"].data, ::testing::ElementsAre(0, 10, 20, 30));
}

TEST(InterpreterTest, SharedBuffersAreOnePerBlock) {
  // Every thread writes before the barrier; after it all read the last writer's value.
  BufferMap buffers{{"out", HostBuffer::Zeros(kF32, {4})}};
  ASSERT_THAT(Interpret(ScratchPerThread(MemoryScope::kShared), buffers), IsOk());
  EXPECT_THAT(buffers["out"].data, ::testing::ElementsAre(30, 30, 30, 30));
}

TEST(InterpreterTest, ThreadLoopShorterThanBlockDimGuardsThreads) {
  // blockDim.x = 8 from the first loop; the second (extent 5) and the nested one (extent 3) run
  // only for threads below their extents, each exactly once per thread.
  Stmt body = Loop(
      "bx", 2,
      Seq({Loop("tx", 8,
                St("all", {V("bx"), V("tx")}, Ld("all", {V("bx"), V("tx")}) + FloatConst(1)),
                ForKind::kThreadIdxX),
           Loop("t5", 5,
                Seq({St("five", {V("bx"), V("t5")}, Ld("five", {V("bx"), V("t5")}) + FloatConst(1)),
                     Loop("t3", 3,
                          St("three", {V("bx"), V("t3")},
                             Ld("three", {V("bx"), V("t3")}) + FloatConst(1)),
                          ForKind::kThreadIdxX)}),
                ForKind::kThreadIdxX)}),
      ForKind::kBlockIdxX);
  LoopNest nest{
      "guards", {Decl("all", {2, 8}), Decl("five", {2, 5}), Decl("three", {2, 3})}, 0, body};
  BufferMap buffers{{"all", HostBuffer::Zeros(kF32, {2, 8})},
                    {"five", HostBuffer::Zeros(kF32, {2, 5})},
                    {"three", HostBuffer::Zeros(kF32, {2, 3})}};
  ASSERT_THAT(Interpret(nest, buffers), IsOk());
  EXPECT_THAT(buffers["all"].data, ::testing::Each(1.0));
  EXPECT_THAT(buffers["five"].data, ::testing::Each(1.0));
  EXPECT_THAT(buffers["three"].data, ::testing::Each(1.0));
}

TEST(InterpreterTest, ReadingAnAllocationBeforeWritingItGivesNaN) {
  // out[i] = tmp[i] where tmp[0] is written and tmp[1] never is.
  Stmt body = AllocateNode::Make(Decl("tmp", {2}),
                                 Seq({St("tmp", {C(0)}, FloatConst(5)),
                                      Loop("i", 2, St("out", {V("i")}, Ld("tmp", {V("i")})))}));
  LoopNest nest{"uninit", {Decl("out", {2})}, 0, body};
  BufferMap buffers{{"out", HostBuffer::Zeros(kF32, {2})}};
  ASSERT_THAT(Interpret(nest, buffers), IsOk());
  EXPECT_EQ(buffers["out"].data[0], 5);
  EXPECT_TRUE(std::isnan(buffers["out"].data[1]));
}

TEST(InterpreterTest, SelectEvaluatesOnlyTheTakenBranch) {
  // out[i] = i < 4 ? A[i] : -1 for i in 0..8; A has 4 elements.
  Stmt body =
      Loop("i", 8, St("out", {V("i")}, Select(V("i") < C(4), Ld("A", {V("i")}), FloatConst(-1))));
  LoopNest nest{"pad", {Decl("A", {4}), Decl("out", {8})}, 1, body};
  BufferMap buffers{{"A", Random({4}, 5)}, {"out", HostBuffer::Zeros(kF32, {8})}};
  ASSERT_THAT(Interpret(nest, buffers), IsOk());
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(buffers["out"].data[i], i < 4 ? buffers["A"].data[i] : -1.0);
  }
}

TEST(InterpreterTest, IntegerDivisionAndModuloRoundTowardNegativeInfinity) {
  // q[i] = (i - 7) / 3, r[i] = (i - 7) % 3 in int64; wrap[i] = int32 max + i (wraps).
  const Expr x = V("i") - C(7);
  const Expr wrapped = Ld("big", {C(0)}, ScalarType::kInt32) + Cast(ScalarType::kInt32, V("i"));
  Stmt body = Loop(
      "i", 14,
      Seq({St("q", {V("i")}, x / C(3)), St("r", {V("i")}, x % C(3)), St("w", {V("i")}, wrapped)}));
  LoopNest nest{"intdiv",
                {Decl("big", {1}, ScalarType::kInt32), Decl("q", {14}, ScalarType::kInt64),
                 Decl("r", {14}, ScalarType::kInt64), Decl("w", {14}, ScalarType::kInt32)},
                1,
                body};
  BufferMap buffers{{"big", HostBuffer::Zeros(ScalarType::kInt32, {1})},
                    {"q", HostBuffer::Zeros(ScalarType::kInt64, {14})},
                    {"r", HostBuffer::Zeros(ScalarType::kInt64, {14})},
                    {"w", HostBuffer::Zeros(ScalarType::kInt32, {14})}};
  buffers["big"].data[0] = 2147483647.0;
  ASSERT_THAT(Interpret(nest, buffers), IsOk());
  for (int i = 0; i < 14; ++i) {
    const double v = i - 7;
    EXPECT_EQ(buffers["q"].data[i], std::floor(v / 3)) << i;
    EXPECT_EQ(buffers["r"].data[i], v - 3 * std::floor(v / 3)) << i;
    const int64_t sum = 2147483647LL + i;
    EXPECT_EQ(buffers["w"].data[i],
              static_cast<double>(sum > 2147483647LL ? sum - 4294967296LL : sum));
  }
}

// ---- errors ----------------------------------------------------------------------------------

TEST(InterpreterTest, OutOfRangeIndexIsAnError) {
  Stmt body = Loop("i", 4, Loop("j", 65, St("A", {V("i"), V("j")}, FloatConst(1))));
  LoopNest nest{"oob", {Decl("A", {4, 64})}, 0, body};
  BufferMap buffers{{"A", HostBuffer::Zeros(kF32, {4, 64})}};
  EXPECT_THAT(Interpret(nest, buffers),
              StatusIs(absl::StatusCode::kOutOfRange,
                       HasSubstr("index 64 out of range [0, 64) in dimension 1 of buffer 'A'")));
}

TEST(InterpreterTest, MissingWrongShapeAndWrongDtypeBuffersAreErrors) {
  const LoopNest nest = CpuMatmul(2, 3, 4);
  BufferMap missing{{"A", HostBuffer::Zeros(kF32, {2, 4})}, {"C", HostBuffer::Zeros(kF32, {2, 3})}};
  EXPECT_THAT(Interpret(nest, missing), StatusIs(absl::StatusCode::kInvalidArgument,
                                                 HasSubstr("missing buffer for parameter 'B'")));
  BufferMap shape{{"A", HostBuffer::Zeros(kF32, {2, 4})},
                  {"B", HostBuffer::Zeros(kF32, {3, 4})},
                  {"C", HostBuffer::Zeros(kF32, {2, 3})}};
  EXPECT_THAT(Interpret(nest, shape),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("buffer 'B' has shape [3, 4] but parameter 'B' of loop nest "
                                 "'matmul' has shape [4, 3]")));
  BufferMap dtype{{"A", HostBuffer::Zeros(kF32, {2, 4})},
                  {"B", HostBuffer::Zeros(kF32, {4, 3})},
                  {"C", HostBuffer::Zeros(ScalarType::kFloat16, {2, 3})}};
  EXPECT_THAT(Interpret(nest, dtype),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("buffer 'C' has dtype float16 but parameter 'C'")));
}

TEST(InterpreterTest, UnknownBufferAndVariableAreErrors) {
  LoopNest load{"bad", {Decl("out", {4})}, 0, Loop("i", 4, St("out", {V("i")}, Ld("Z", {V("i")})))};
  BufferMap buffers{{"out", HostBuffer::Zeros(kF32, {4})}};
  EXPECT_THAT(Interpret(load, buffers),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown buffer 'Z'")));
  LoopNest var{"bad", {Decl("out", {4})}, 0, Loop("i", 4, St("out", {V("j")}, FloatConst(0)))};
  EXPECT_THAT(Interpret(var, buffers),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown variable 'j'")));
}

TEST(InterpreterTest, IntegerDivisionByZeroIsAnError) {
  Stmt body = Loop("i", 4, St("out", {V("i")}, C(10) / (V("i") - C(2))));
  LoopNest nest{"div0", {Decl("out", {4}, ScalarType::kInt64)}, 0, body};
  BufferMap buffers{{"out", HostBuffer::Zeros(ScalarType::kInt64, {4})}};
  EXPECT_THAT(Interpret(nest, buffers),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("integer division by zero")));
}

LoopNest OneOutputKernel(Stmt thread_body) {
  return LoopNest{"k", {Decl("out", {8})}, 0, Loop("bx", 1, thread_body, ForKind::kBlockIdxX)};
}

TEST(InterpreterTest, BarrierInThreadDivergentConditionIsAnError) {
  Stmt body =
      Loop("tx", 8,
           IfThenElseNode::Make(V("tx") < C(2),
                                Seq({St("out", {V("tx")}, FloatConst(1)), BarrierNode::Make()})),
           ForKind::kThreadIdxX);
  BufferMap buffers{{"out", HostBuffer::Zeros(kF32, {8})}};
  EXPECT_THAT(Interpret(OneOutputKernel(body), buffers),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("barrier inside a thread-divergent condition")));
}

TEST(InterpreterTest, BarrierInThreadDivergentLoopIsAnError) {
  Stmt body = Loop(
      "tx", 8, ForNode::Make(V("r"), C(0), V("tx") + C(1), ForKind::kSerial, BarrierNode::Make()),
      ForKind::kThreadIdxX);
  BufferMap buffers{{"out", HostBuffer::Zeros(kF32, {8})}};
  EXPECT_THAT(Interpret(OneOutputKernel(body), buffers),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("barrier inside a thread-divergent loop 'r'")));
}

TEST(InterpreterTest, BarrierUnderThreadGuardIsAnError) {
  // blockDim.x = 8, but the barrier sits in a threadIdx.x loop of extent 4.
  Stmt body = Seq({Loop("tx", 8, St("out", {V("tx")}, FloatConst(1)), ForKind::kThreadIdxX),
                   Loop("t4", 4, BarrierNode::Make(), ForKind::kThreadIdxX)});
  BufferMap buffers{{"out", HostBuffer::Zeros(kF32, {8})}};
  EXPECT_THAT(Interpret(OneOutputKernel(body), buffers),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("barrier under a threadIdx guard")));
}

TEST(InterpreterTest, NonConstantThreadExtentIsAnError) {
  Stmt body = Loop("bx", 2,
                   ForNode::Make(V("tx"), C(0), V("bx") + C(1), ForKind::kThreadIdxX,
                                 St("out", {V("tx")}, FloatConst(1))),
                   ForKind::kBlockIdxX);
  LoopNest nest{"k", {Decl("out", {8})}, 0, body};
  BufferMap buffers{{"out", HostBuffer::Zeros(kF32, {8})}};
  EXPECT_THAT(Interpret(nest, buffers),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("extent of threadIdx.x loop 'tx' is not a constant")));
}

// ---- precision -------------------------------------------------------------------------------

TEST(InterpreterTest, NativePrecisionRoundsEveryFloat32Operation) {
  // out[0] = x[0] + x[1] + ... + x[15] as one expression, x = {1e8, 1, 1, ...}.
  const int n = 16;
  Expr sum = Ld("x", {C(0)});
  for (int i = 1; i < n; ++i) sum = sum + Ld("x", {C(i)});
  LoopNest nest{"sum", {Decl("x", {n}), Decl("out", {1})}, 1, St("out", {C(0)}, sum)};
  std::vector<float> x(n, 1.0f);
  x[0] = 1e8f;
  float expected_native = x[0];
  double expected_f64 = x[0];
  for (int i = 1; i < n; ++i) {
    expected_native = expected_native + x[i];
    expected_f64 += x[i];
  }
  for (Precision p : {Precision::kNative, Precision::kFloat64}) {
    BufferMap buffers{{"x", HostBuffer::Zeros(kF32, {n})}, {"out", HostBuffer::Zeros(kF32, {1})}};
    for (int i = 0; i < n; ++i) buffers["x"].data[i] = x[i];
    ASSERT_THAT(Interpret(nest, buffers, {p}), IsOk());
    if (p == Precision::kNative) {
      EXPECT_EQ(buffers["out"].data[0], expected_native);
      EXPECT_EQ(buffers["out"].data[0], 1e8);
    } else {
      EXPECT_EQ(buffers["out"].data[0], static_cast<float>(expected_f64));
      EXPECT_EQ(buffers["out"].data[0], 100000016.0);  // 1e8 + 15 rounded to a multiple of 8
    }
  }
}

TEST(InterpreterTest, HalfPrecisionStoresRoundToNearestEven) {
  // Values and their binary16 / bfloat16 roundings, worked out by hand.
  const std::vector<double> in = {
      1 + std::ldexp(1, -11), 1 + 3 * std::ldexp(1, -11), 2049, 0.1, 65519, 65520, 3.14159};
  const std::vector<double> half = {1,       1 + std::ldexp(1, -9),
                                    2048,    0.0999755859375,
                                    65504,   std::numeric_limits<double>::infinity(),
                                    3.140625};
  const std::vector<double> bf16_in = {1 + std::ldexp(1, -8), 1 + 3 * std::ldexp(1, -8), 3.14159};
  const std::vector<double> bf16 = {1, 1 + std::ldexp(1, -6), 3.140625};
  const int64_t n = in.size(), nb = bf16_in.size();
  LoopNest nest{"cast",
                {Decl("x", {n}), Decl("y", {nb}), Decl("h", {n}, ScalarType::kFloat16),
                 Decl("b", {nb}, ScalarType::kBFloat16)},
                2,
                Seq({Loop("i", n, St("h", {V("i")}, Ld("x", {V("i")}))),
                     Loop("i", nb, St("b", {V("i")}, Ld("y", {V("i")})))})};
  BufferMap buffers{{"x", HostBuffer::Zeros(kF32, {n})},
                    {"y", HostBuffer::Zeros(kF32, {nb})},
                    {"h", HostBuffer::Zeros(ScalarType::kFloat16, {n})},
                    {"b", HostBuffer::Zeros(ScalarType::kBFloat16, {nb})}};
  for (int64_t i = 0; i < n; ++i) buffers["x"].data[i] = static_cast<float>(in[i]);
  for (int64_t i = 0; i < nb; ++i) buffers["y"].data[i] = static_cast<float>(bf16_in[i]);
  ASSERT_THAT(Interpret(nest, buffers), IsOk());
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(buffers["h"].data[i], half[i]) << in[i];
  for (int64_t i = 0; i < nb; ++i) EXPECT_EQ(buffers["b"].data[i], bf16[i]) << bf16_in[i];
}

TEST(InterpreterTest, HalfOperandsAreComputedInFloat32) {
  // 2048 + 1 is exact in float32 but not representable in float16.
  const ScalarType f16 = ScalarType::kFloat16;
  const Expr sum = Ld("a", {C(0)}, f16) + Ld("a", {C(1)}, f16);
  LoopNest nest{"h",
                {Decl("a", {2}, f16), Decl("wide", {1}), Decl("narrow", {1}, f16)},
                1,
                Seq({St("wide", {C(0)}, sum), St("narrow", {C(0)}, sum)})};
  BufferMap buffers{{"a", HostBuffer::Zeros(f16, {2})},
                    {"wide", HostBuffer::Zeros(kF32, {1})},
                    {"narrow", HostBuffer::Zeros(f16, {1})}};
  buffers["a"].data = {2048, 1};
  ASSERT_THAT(Interpret(nest, buffers), IsOk());
  EXPECT_EQ(buffers["wide"].data[0], 2049);
  EXPECT_EQ(buffers["narrow"].data[0], 2048);
}

}  // namespace
}  // namespace tilesearch::ir
