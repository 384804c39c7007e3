// Warpgroup MMA groups in flight in the reference interpreter (ir/stmt.h WgmmaNode `pending`,
// AsyncGroupNode::WgmmaWait): a group reads its shared operand tiles when it is retired (a wait
// that leaves fewer groups in flight, or an access to its accumulator), as the tensor cores read
// them while the group runs. An operand tile overwritten before the wait shows in the result,
// the way a ring slot released or refilled too early would; one overwritten after it does not.
// The expected values come from a naive float64 loop over the same bfloat16 integers.
#include <cstdint>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gtest/gtest.h"
#include "ir/host_buffer.h"
#include "ir/interpreter.h"
#include "ir/stmt.h"

namespace tilesearch::ir {
namespace {

using ::tilesearch::testing::IsOk;

constexpr int64_t kRows = 64;   // A: one 64-row tile
constexpr int64_t kCols = 8;    // B: n = 8
constexpr int64_t kDepth = 16;  // one bf16 k step

// K-major bfloat16 tiles with the 32-byte swizzle: a row of 16 elements is one 32-byte line.
WgmmaLayout Layout() {
  WgmmaLayout l;
  l.k_major = true;
  l.swizzle = 32;
  l.sbo = 8 * 32;
  l.element_bytes = 2;
  return l;
}

// The element index in the shared tile of element (row, k).
int64_t At(int64_t row, int64_t k) {
  return WgmmaSwizzle(WgmmaLayoutOffset(Layout(), row, k), 32) / 2;
}

double AValue(int64_t r, int64_t k) { return static_cast<double>((r + k) % 5 - 2); }
double BValue(int64_t c, int64_t k, double shift) {
  return static_cast<double>((3 * c + k) % 7 - 3) + shift;
}

// Where the overwrite of B and the wait go relative to each other.
enum class Order { kOverwriteThenWait, kWaitThenOverwrite, kOverwriteThenReadAcc };

// One block of 128 threads: copy A and B (global, already in the shared layout) into shared
// memory; barrier; wgmma with pending 1; barrier; every thread overwrites B with B2 (and waits
// before or after that, or never: the output store reads the accumulator); out[t, e] = acc.
LoopNest Nest(Order order) {
  const BufferDecl ag{"Ag", ScalarType::kBFloat16, {kRows * kDepth}, MemoryScope::kGlobal};
  const BufferDecl bg{"Bg", ScalarType::kBFloat16, {kCols * kDepth}, MemoryScope::kGlobal};
  const BufferDecl b2g{"B2g", ScalarType::kBFloat16, {kCols * kDepth}, MemoryScope::kGlobal};
  const BufferDecl out{"Out", ScalarType::kFloat32, {128, 4}, MemoryScope::kGlobal};
  const BufferDecl as{"As", ScalarType::kBFloat16, {kRows * kDepth}, MemoryScope::kShared};
  const BufferDecl bs{"Bs", ScalarType::kBFloat16, {kCols * kDepth}, MemoryScope::kShared};
  const BufferDecl acc{"acc", ScalarType::kFloat32, {1, 1, 4}, MemoryScope::kLocal};
  const Expr tx = MakeVar("tx");
  const Expr q = MakeVar("q");
  const Expr e = MakeVar("e");
  const Expr e2 = MakeVar("e2");
  auto bf16 = [](const std::string& buf, Expr i) {
    return LoadNode::Make(ScalarType::kBFloat16, buf, {std::move(i)});
  };
  // Thread t copies A elements 8 t .. 8 t + 7 and B element t (128 = 8 · 16 of them).
  const Expr a_at = tx * IntConst(8) + q;
  Stmt fill = SeqNode::Make({ForNode::Make(q, IntConst(0), IntConst(8), ForKind::kSerial,
                                           StoreNode::Make("As", {a_at}, bf16("Ag", a_at))),
                             StoreNode::Make("Bs", {tx}, bf16("Bg", tx))});
  Stmt zero = ForNode::Make(e, IntConst(0), IntConst(4), ForKind::kSerial,
                            StoreNode::Make("acc", {IntConst(0), IntConst(0), e}, FloatConst(0)));
  Stmt mma = WgmmaNode::Make(MmaKind::kBF16, 1, kCols, 1, "acc", "As", IntConst(0), Layout(), "Bs",
                             IntConst(0), Layout(), tx, /*pending=*/1);
  Stmt overwrite = StoreNode::Make("Bs", {tx}, bf16("B2g", tx));
  Stmt store = ForNode::Make(
      e2, IntConst(0), IntConst(4), ForKind::kSerial,
      StoreNode::Make("Out", {tx, e2},
                      LoadNode::Make(ScalarType::kFloat32, "acc", {IntConst(0), IntConst(0), e2})));
  std::vector<Stmt> body = {zero, fill, BarrierNode::Make(), mma, BarrierNode::Make()};
  switch (order) {
    case Order::kOverwriteThenWait:
      body.insert(body.end(), {overwrite, BarrierNode::Make(), AsyncGroupNode::WgmmaWait(0)});
      break;
    case Order::kWaitThenOverwrite:
      // (The barrier after the wait: every thread's group is done before any thread overwrites.)
      body.insert(body.end(), {AsyncGroupNode::WgmmaWait(0), BarrierNode::Make(), overwrite,
                               BarrierNode::Make()});
      break;
    case Order::kOverwriteThenReadAcc:
      body.insert(body.end(), {overwrite, BarrierNode::Make()});
      break;
  }
  body.push_back(store);
  Stmt threads = ForNode::Make(tx, IntConst(0), IntConst(128), ForKind::kThreadIdxX,
                               AllocateNode::Make(acc, SeqNode::Make(body)));
  const Expr bx = MakeVar("bx");
  LoopNest nest;
  nest.name = "wgmma_in_flight";
  nest.params = {ag, bg, b2g, out};
  nest.num_inputs = 3;
  nest.body = ForNode::Make(bx, IntConst(0), IntConst(1), ForKind::kBlockIdxX,
                            AllocateNode::Make(as, AllocateNode::Make(bs, threads)));
  return nest;
}

// Runs the nest and checks out[t, e] against A · B (shift 0) or A · B2 (shift 1).
void ExpectProduct(Order order, double shift) {
  BufferMap buffers;
  buffers["Ag"] = HostBuffer::Zeros(ScalarType::kBFloat16, {kRows * kDepth});
  buffers["Bg"] = HostBuffer::Zeros(ScalarType::kBFloat16, {kCols * kDepth});
  buffers["B2g"] = HostBuffer::Zeros(ScalarType::kBFloat16, {kCols * kDepth});
  buffers["Out"] = HostBuffer::Zeros(ScalarType::kFloat32, {128, 4});
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t k = 0; k < kDepth; ++k) buffers["Ag"].data[At(r, k)] = AValue(r, k);
  }
  for (int64_t c = 0; c < kCols; ++c) {
    for (int64_t k = 0; k < kDepth; ++k) {
      buffers["Bg"].data[At(c, k)] = BValue(c, k, 0);
      buffers["B2g"].data[At(c, k)] = BValue(c, k, 1);
    }
  }
  ASSERT_THAT(Interpret(Nest(order), buffers), IsOk());
  for (int64_t t = 0; t < 128; ++t) {
    for (int64_t e = 0; e < 4; ++e) {
      const int64_t row = 16 * (t / 32) + (t % 32) / 4 + 8 * (e / 2);
      const int64_t col = 2 * (t % 4) + e % 2;
      double want = 0;
      for (int64_t k = 0; k < kDepth; ++k) want += AValue(row, k) * BValue(col, k, shift);
      ASSERT_EQ(buffers["Out"].data[t * 4 + e], want) << "thread " << t << " element " << e;
    }
  }
}

TEST(WgmmaInterpreter, AGroupInFlightReadsItsTilesWhenTheWaitRetiresIt) {
  ExpectProduct(Order::kOverwriteThenWait, 1);
}

TEST(WgmmaInterpreter, ATileOverwrittenAfterTheWaitDoesNotChangeTheResult) {
  ExpectProduct(Order::kWaitThenOverwrite, 0);
}

TEST(WgmmaInterpreter, ReadingTheAccumulatorRetiresTheGroupFirst) {
  // No wait at all: the output store's read of the accumulator performs the group (ptxas makes
  // the hardware wait there), after the overwrite.
  ExpectProduct(Order::kOverwriteThenReadAcc, 1);
}

}  // namespace
}  // namespace tilesearch::ir
