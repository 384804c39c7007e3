// Async copies in the reference interpreter (ir/stmt.h StoreNode::async_copy, AsyncGroupNode):
// the source is read when a copy is issued, the destination written only when a wait completes
// the copy's group, so reading too early sees the old contents.
#include <cmath>
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

Expr F32Load(const std::string& buffer, Expr index) {
  return LoadNode::Make(ScalarType::kFloat32, buffer, {std::move(index)});
}

// for i in [0, 4): dst[i] = src[base + i] (async when `async`).
Stmt CopyLoop(const std::string& dst, const std::string& src, int64_t base, bool async) {
  Expr i = MakeVar("i");
  return ForNode::Make(i, IntConst(0), IntConst(4), ForKind::kSerial,
                       StoreNode::Make(dst, {i}, F32Load(src, i + IntConst(base)), async));
}

// out[row, i] = S[i] for i in [0, 4).
Stmt Snapshot(int64_t row) {
  Expr i = MakeVar("j");
  return ForNode::Make(
      i, IntConst(0), IntConst(4), ForKind::kSerial,
      StoreNode::Make("O", {IntConst(row), i}, LoadNode::Make(ScalarType::kFloat32, "S", {i})));
}

TEST(AsyncCopyInterpreter, CopiesLandAtTheWaitThatCompletesTheirGroup) {
  // S = 0; G[0..3] -> S async, commit; snapshot 0; G[4..7] -> S async, commit; G changes;
  // wait 1 (group 0 lands); snapshot 1; wait 0 (group 1 lands); snapshot 2.
  const BufferDecl g{"G", ScalarType::kFloat32, {8}, MemoryScope::kGlobal};
  const BufferDecl o{"O", ScalarType::kFloat32, {3, 4}, MemoryScope::kGlobal};
  const BufferDecl s{"S", ScalarType::kFloat32, {4}, MemoryScope::kShared};
  Expr i = MakeVar("i");
  Stmt zero = ForNode::Make(i, IntConst(0), IntConst(4), ForKind::kSerial,
                            StoreNode::Make("S", {i}, FloatConst(0)));
  Stmt overwrite_g = ForNode::Make(i, IntConst(0), IntConst(8), ForKind::kSerial,
                                   StoreNode::Make("G", {i}, FloatConst(-1)));
  LoopNest nest;
  nest.name = "async";
  nest.params = {g, o};
  nest.num_inputs = 1;
  nest.body = AllocateNode::Make(
      s,
      SeqNode::Make({zero, CopyLoop("S", "G", 0, true), AsyncGroupNode::Commit(), Snapshot(0),
                     CopyLoop("S", "G", 4, true), AsyncGroupNode::Commit(), overwrite_g,
                     AsyncGroupNode::Wait(1), Snapshot(1), AsyncGroupNode::Wait(0), Snapshot(2)}));
  BufferMap buffers;
  buffers["G"] = HostBuffer::Zeros(ScalarType::kFloat32, {8});
  for (int k = 0; k < 8; ++k) buffers["G"].data[k] = 10 + k;
  buffers["O"] = HostBuffer::Zeros(ScalarType::kFloat32, {3, 4});
  ASSERT_THAT(Interpret(nest, buffers), IsOk());
  const std::vector<double>& out = buffers["O"].data;
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(out[0 * 4 + k], 0) << k;       // nothing waited for yet
    EXPECT_EQ(out[1 * 4 + k], 10 + k) << k;  // group 0, read before G changed
    EXPECT_EQ(out[2 * 4 + k], 14 + k) << k;  // group 1, likewise
  }
}

TEST(AsyncCopyInterpreter, PlainStoresAreUnaffected) {
  const BufferDecl g{"G", ScalarType::kFloat32, {8}, MemoryScope::kGlobal};
  const BufferDecl o{"O", ScalarType::kFloat32, {3, 4}, MemoryScope::kGlobal};
  const BufferDecl s{"S", ScalarType::kFloat32, {4}, MemoryScope::kShared};
  LoopNest nest;
  nest.name = "sync";
  nest.params = {g, o};
  nest.num_inputs = 1;
  nest.body =
      AllocateNode::Make(s, SeqNode::Make({CopyLoop("S", "G", 2, false), AsyncGroupNode::Commit(),
                                           Snapshot(0), AsyncGroupNode::Wait(0), Snapshot(1)}));
  BufferMap buffers;
  buffers["G"] = HostBuffer::Zeros(ScalarType::kFloat32, {8});
  for (int k = 0; k < 8; ++k) buffers["G"].data[k] = 10 + k;
  buffers["O"] = HostBuffer::Zeros(ScalarType::kFloat32, {3, 4});
  ASSERT_THAT(Interpret(nest, buffers), IsOk());
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(buffers["O"].data[k], 12 + k) << k;
    EXPECT_EQ(buffers["O"].data[4 + k], 12 + k) << k;
  }
}

}  // namespace
}  // namespace tilesearch::ir
