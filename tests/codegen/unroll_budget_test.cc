// GpuCompileOptions::unroll_budget / HostCompileOptions::unroll_budget: an unrolled loop nest
// whose full unrolling exceeds the budget is emitted as a loop (a backward branch in the PTX),
// one within it is unrolled as before (the same PTX as without a budget), and the budgeted code
// computes what naive C++ loops compute (host JIT, several budgets that roll different loops).
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gtest/gtest.h"
#include "ir/host_buffer.h"
#include "tests/codegen/nest_builders.h"
#include "tests/codegen/ptx_test_util.h"

namespace tilesearch::codegen {
namespace {

using ::tilesearch::testing::IsOk;
using namespace ::tilesearch::codegen::testing;  // NOLINT: nest builders
using ir::Expr;
using ir::ForKind;
using ir::Stmt;

// A padded 1-D convolution the way a SIMT convolution schedule computes it:
//   Out[o] = sum_r select(0 <= o + r - pad < n, In[o + r - pad], 0) * W[r],
// o = (bx * threads + tx) * tile + j; each thread keeps its `tile` outputs in a local accumulator,
// and the reduction over r (outer) and the outputs j (inner) are both unrolled loops.
struct Conv1d {
  int64_t n = 256, taps = 48, tile = 8, threads = 4, pad = 3;
  int64_t blocks() const { return n / (threads * tile); }

  ir::LoopNest Nest() const {
    const Expr o = (V("bx") * C(threads) + V("tx")) * C(tile) + V("j");
    const Expr x = o + V("r") - C(pad);
    const Expr in =
        ir::SelectNode::Make((x >= C(0)) && (x < C(n)), Ld("In", {x}), ir::FloatConst(0));
    Stmt init = Loop("j", tile, St("acc", {V("j")}, ir::FloatConst(0)), ForKind::kUnrolled);
    Stmt update =
        Loop("r", taps,
             Loop("j", tile, St("acc", {V("j")}, Ld("acc", {V("j")}) + in * Ld("W", {V("r")})),
                  ForKind::kUnrolled),
             ForKind::kUnrolled);
    Stmt write = Loop("j", tile, St("Out", {o}, Ld("acc", {V("j")})), ForKind::kUnrolled);
    Stmt thread = ir::AllocateNode::Make(
        Decl("acc", {tile}, ir::ScalarType::kFloat32, ir::MemoryScope::kLocal),
        Seq({init, update, write}));
    Stmt body = Loop("bx", blocks(), Loop("tx", threads, thread, ForKind::kThreadIdxX),
                     ForKind::kBlockIdxX);
    return ir::LoopNest{"conv1d", {Decl("In", {n}), Decl("W", {taps}), Decl("Out", {n})}, 2, body};
  }

  // Naive loops, the same summation order (r ascending).
  std::vector<float> Reference(const ir::HostBuffer& in, const ir::HostBuffer& w) const {
    std::vector<float> out(n, 0.0f);
    for (int64_t o = 0; o < n; ++o) {
      float acc = 0.0f;
      for (int64_t r = 0; r < taps; ++r) {
        const int64_t x = o + r - pad;
        const float v = x >= 0 && x < n ? static_cast<float>(in.data[x]) : 0.0f;
        acc += v * static_cast<float>(w.data[r]);
      }
      out[o] = acc;
    }
    return out;
  }
};

// Whether some branch of `ptx` jumps to a label defined above it (a loop).
bool HasBackwardBranch(const std::string& ptx) {
  std::vector<std::string> labels_seen;
  size_t pos = 0;
  while (pos < ptx.size()) {
    size_t end = ptx.find('\n', pos);
    if (end == std::string::npos) end = ptx.size();
    const std::string line = ptx.substr(pos, end - pos);
    pos = end + 1;
    const size_t colon = line.find(':');
    if (line.rfind("$L", 0) == 0 && colon != std::string::npos) {
      labels_seen.push_back(line.substr(0, colon));
      continue;
    }
    const size_t bra = line.find("bra");
    if (bra == std::string::npos) continue;
    const size_t target = line.find("$L", bra);
    if (target == std::string::npos) continue;
    const std::string label = line.substr(target, line.find(';', target) - target);
    for (const std::string& seen : labels_seen) {
      if (seen == label) return true;
    }
  }
  return false;
}

std::string Ptx(const ir::LoopNest& nest, int64_t budget) {
  GpuCompileOptions options;
  options.unroll_budget = budget;
  absl::StatusOr<GpuModule> m = CompileToPtx(nest, {}, options);
  EXPECT_THAT(m, IsOk());
  return m.ok() ? m->ptx : "";
}

TEST(UnrollBudgetTest, LargeUnrolledBodyIsALoopAboveTheBudgetAndUnrolledBelowIt) {
  const ir::LoopNest nest = Conv1d{}.Nest();
  const std::string unbudgeted = Ptx(nest, 0);
  // 48 × 8 accumulations of about 25 nodes each: some 10 K nodes.
  const std::string above = Ptx(nest, 1000);
  const std::string below = Ptx(nest, 100000);
  EXPECT_FALSE(HasBackwardBranch(unbudgeted)) << unbudgeted;
  EXPECT_TRUE(HasBackwardBranch(above)) << above;
  EXPECT_EQ(below, unbudgeted);
  // The loop's body holds the inner unrolled loop's 8 loads of In; the unrolled body all 384
  // (loads of one address under different (r, j) may merge, but not down to a loop's count).
  EXPECT_LT(Count(above, "ld.global"), Count(unbudgeted, "ld.global") / 4);
  ExpectPtxasAccepts(above, "unroll_budget_above");
}

TEST(UnrollBudgetTest, BudgetedHostCodeMatchesNaiveLoops) {
  const Conv1d conv;
  const ir::LoopNest nest = conv.Nest();
  ir::HostBuffer in = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {conv.n});
  ir::HostBuffer w = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {conv.taps});
  ir::FillRandom(in, 1);
  ir::FillRandom(w, 2);
  const std::vector<float> want = conv.Reference(in, w);
  // 0: everything unrolled; 1: every unrolled loop rolled; 1000: the r loop rolled around the
  // unrolled j loop.
  for (int64_t budget : {int64_t{0}, int64_t{1}, int64_t{1000}}) {
    SCOPED_TRACE(budget);
    HostCompileOptions options;
    options.unroll_budget = budget;
    options.num_threads = 1;
    absl::StatusOr<std::unique_ptr<HostKernel>> kernel = CompileForHost(nest, options);
    ASSERT_THAT(kernel, IsOk());
    ir::BufferMap buffers{
        {"In", in}, {"W", w}, {"Out", ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {conv.n})}};
    ASSERT_THAT(RunOnBuffers(**kernel, nest, buffers), IsOk());
    const ir::HostBuffer& out = buffers.at("Out");
    for (int64_t o = 0; o < conv.n; ++o) {
      ASSERT_NEAR(out.data[o], want[o], 1e-5 * std::fabs(want[o]) + 1e-6) << "output " << o;
    }
  }
}

}  // namespace
}  // namespace tilesearch::codegen
