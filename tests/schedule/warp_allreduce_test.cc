// Cross-thread reductions lowered as warp butterflies (schedule/thread_allreduce.cc): row
// reductions R[i] = combine_k A[i, k] bound to blockIdx.x / threadIdx.x (and threadIdx.y row
// groups) run in the interpreter's thread model and match hand-written float64 loops for sum,
// max, min and prod, float32 and int32, thread counts that are multiples of the warp (1, 2, 3 and
// 8 warps) and ones that are not (the shared-memory fallback), with and without tails.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/host_buffer.h"
#include "ir/reference.h"
#include "schedule/lower.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/schedule/schedule_test_util.h"

namespace tilesearch::schedule {
namespace {

using testing::Sched;
using tilesearch::testing::IsOk;

struct Case {
  ir::ReduceKind kind;
  ir::ScalarType dtype;
  int64_t rows;
  int64_t cols;
  int64_t threads;    // threadIdx.x extent of the reduction
  int64_t row_group;  // rows per block on threadIdx.y (1: none)
};

std::string Name(const Case& c) {
  return absl::StrCat(ir::ReduceKindName(c.kind), "_", ir::TypeName(c.dtype), "_", c.rows, "x",
                      c.cols, "_t", c.threads, "_y", c.row_group);
}

ir::ComputeDAG RowReduce(const Case& c) {
  ir::Tensor a = testing::Input("A", {c.rows, c.cols});
  if (c.dtype != ir::ScalarType::kFloat32) {
    auto typed = ir::Placeholder("A", {c.rows, c.cols}, c.dtype);
    EXPECT_TRUE(typed.ok());
    a = *typed;
  }
  auto r = ir::Reduce(
      "R", {c.rows}, c.kind, {c.cols},
      [&](const testing::Axes& ax, const testing::Axes& k) { return a(ax[0], k[0]); }, ir::Expr(),
      testing::Names({"i"}, {"k"}));
  EXPECT_TRUE(r.ok()) << r.status();
  return testing::MakeDag({*r});
}

State RowReduceSchedule(const ir::ComputeDAG& dag, const Case& c) {
  Sched s(dag);
  s.Split("R", "k", {c.threads});
  if (c.row_group > 1) {
    s.Split("R", "i", {c.row_group});
    s.Annotate("R", "i.0", IteratorAnnotation::kBlockIdxX);
    s.Annotate("R", "i.1", IteratorAnnotation::kThreadIdxY);
  } else {
    s.Annotate("R", "i", IteratorAnnotation::kBlockIdxX);
  }
  s.Annotate("R", "k.1", IteratorAnnotation::kThreadIdxX);
  EXPECT_THAT(s.status(), IsOk());
  return s.state();
}

// Independent reference: the combiner applied in float64 over each row.
std::vector<double> Expected(const Case& c, const ir::HostBuffer& a) {
  std::vector<double> out(c.rows);
  for (int64_t i = 0; i < c.rows; ++i) {
    double acc = 0;
    switch (c.kind) {
      case ir::ReduceKind::kSum:
        acc = 0;
        break;
      case ir::ReduceKind::kProd:
        acc = 1;
        break;
      case ir::ReduceKind::kMax:
        acc = -INFINITY;
        break;
      case ir::ReduceKind::kMin:
        acc = INFINITY;
        break;
      default:
        break;
    }
    for (int64_t k = 0; k < c.cols; ++k) {
      const double x = a.at({i, k});
      switch (c.kind) {
        case ir::ReduceKind::kSum:
          acc += x;
          break;
        case ir::ReduceKind::kProd:
          acc *= x;
          break;
        case ir::ReduceKind::kMax:
          acc = std::max(acc, x);
          break;
        case ir::ReduceKind::kMin:
          acc = std::min(acc, x);
          break;
        default:
          break;
      }
    }
    out[i] = acc;
  }
  return out;
}

class ShflBuffers : public ir::StmtVisitor {
 public:
  int shfl = 0;
  int barriers = 0;

 protected:
  void VisitAllocate(const ir::AllocateNode* op, const ir::Stmt& s) override {
    if (absl::EndsWith(op->buffer.name, ".shfl")) ++shfl;
    ir::StmtVisitor::VisitAllocate(op, s);
  }
  void VisitBarrier(const ir::BarrierNode*, const ir::Stmt&) override { ++barriers; }
};

void Check(const Case& c) {
  SCOPED_TRACE(Name(c));
  const ir::ComputeDAG dag = RowReduce(c);
  const State state = RowReduceSchedule(dag, c);
  absl::StatusOr<LoweredKernel> k = Lower(dag, state, Target::H200());
  ASSERT_THAT(k, IsOk());
  ASSERT_EQ(k->launches.size(), 1u);
  EXPECT_EQ(k->launches[0].block[0], c.threads);
  EXPECT_EQ(k->launches[0].block[1], c.row_group);

  // Structure: butterflies exactly for warp multiples (5 within a warp, log2 of the padded warp
  // count across warps, each window two barriers in the loop nest), else the shared fallback.
  ShflBuffers v;
  v.Visit(k->nest.body);
  const int64_t warps = c.threads / 32;
  if (c.threads % 32 == 0) {
    int across = 0;
    while ((int64_t{1} << across) < warps) ++across;
    EXPECT_EQ(v.shfl, 1) << k->nest;
    // (The closing barrier is dropped at the end of the block's work, except inside a threadIdx.y
    // row-group loop.)
    EXPECT_EQ(v.barriers, 2 * (5 + across) + (warps > 1 ? 1 : 0) + (c.row_group > 1 ? 1 : 0))
        << k->nest;
  } else {
    EXPECT_EQ(v.shfl, 0) << k->nest;
  }

  for (uint64_t seed : {3u, 11u}) {
    ir::BufferMap inputs = ir::MakeRandomInputs(dag, seed);
    if (c.kind == ir::ReduceKind::kProd) {
      // Keep products away from underflow: factors in [0.5, 1.5).
      for (double& x : inputs.at("A").data) x = 1.0 + 0.5 * x;
    }
    absl::StatusOr<ir::BufferMap> got = testing::RunLowered(k->nest, inputs);
    ASSERT_THAT(got, IsOk()) << k->nest;
    const std::vector<double> want = Expected(c, inputs.at("A"));
    const ir::HostBuffer& r = got->at("R");
    for (int64_t i = 0; i < c.rows; ++i) {
      const double tol =
          c.dtype == ir::ScalarType::kInt32 ? 0.0 : 1e-5 * std::max(1.0, std::abs(want[i]));
      const double rel = c.kind == ir::ReduceKind::kProd ? 1e-5 * std::abs(want[i]) : tol;
      EXPECT_NEAR(r.data[i], want[i], std::max(tol, rel)) << "row " << i << " seed " << seed;
    }
  }
}

TEST(WarpAllReduceTest, EveryCombinerFloat32OneToEightWarps) {
  for (ir::ReduceKind kind :
       {ir::ReduceKind::kSum, ir::ReduceKind::kMax, ir::ReduceKind::kMin, ir::ReduceKind::kProd}) {
    for (int64_t threads : {32, 64, 96, 256}) {
      Check({kind, ir::ScalarType::kFloat32, 3, threads * 2, threads, 1});
    }
  }
}

TEST(WarpAllReduceTest, TailsWhereThreadsDoNotDivideTheRow) {
  // 100 = 64 + 36: the second pass of threads 36..63 is guarded; 40 = 32 + 8: in the second pass
  // most lanes add only the identity.
  Check({ir::ReduceKind::kSum, ir::ScalarType::kFloat32, 2, 100, 64, 1});
  Check({ir::ReduceKind::kMax, ir::ScalarType::kFloat32, 2, 40, 32, 1});
  Check({ir::ReduceKind::kMin, ir::ScalarType::kFloat32, 2, 333, 96, 1});
}

TEST(WarpAllReduceTest, Int32SumMaxMinAreExact) {
  for (ir::ReduceKind kind : {ir::ReduceKind::kSum, ir::ReduceKind::kMax, ir::ReduceKind::kMin}) {
    Check({kind, ir::ScalarType::kInt32, 2, 200, 64, 1});
  }
}

TEST(WarpAllReduceTest, RowGroupsOnThreadIdxYKeepTheirOwnSlots) {
  Check({ir::ReduceKind::kSum, ir::ScalarType::kFloat32, 8, 128, 64, 4});
  Check({ir::ReduceKind::kMax, ir::ScalarType::kFloat32, 6, 70, 32, 3});
}

TEST(WarpAllReduceTest, NonWarpMultiplesUseTheSharedFallback) {
  for (int64_t threads : {1, 7, 48, 100}) {
    Check({ir::ReduceKind::kSum, ir::ScalarType::kFloat32, 2, 150, threads, 1});
  }
}

}  // namespace
}  // namespace tilesearch::schedule
