// ir::ContainsStmtKind: found under loops, sequences, allocations and either branch of a
// conditional; absent kinds are not found.
#include "ir/stmt_contains.h"

#include "gtest/gtest.h"
#include "ir/expr.h"
#include "ir/stmt.h"

namespace tilesearch::ir {
namespace {

TEST(StmtContainsTest, FindsAKindAnywhereInTheTree) {
  const Expr i = MakeVar("i");
  const Stmt store = StoreNode::Make("out", {i}, FloatConst(1.0));
  const Stmt realloc = SetMaxNRegNode::Make(232, true);
  // In the else branch of a conditional inside an allocation inside a loop.
  const Stmt deep = ForNode::Make(
      i, IntConst(0), IntConst(4), ForKind::kSerial,
      AllocateNode::Make({"tmp", ScalarType::kFloat32, {1}, MemoryScope::kLocal},
                         IfThenElseNode::Make(i < IntConst(2), store,
                                              SeqNode::Make({BarrierNode::Make(), realloc}))));
  EXPECT_TRUE(ContainsStmtKind(deep, StmtKind::kSetMaxNReg));
  EXPECT_TRUE(ContainsStmtKind(deep, StmtKind::kBarrier));
  EXPECT_TRUE(ContainsStmtKind(deep, StmtKind::kStore));
  EXPECT_TRUE(ContainsStmtKind(deep, StmtKind::kFor));
  EXPECT_FALSE(ContainsStmtKind(deep, StmtKind::kWgmma));
  EXPECT_FALSE(ContainsStmtKind(deep, StmtKind::kMbarrier));
  EXPECT_FALSE(ContainsStmtKind(store, StmtKind::kSetMaxNReg));
  EXPECT_FALSE(ContainsStmtKind(Stmt(), StmtKind::kStore));
}

}  // namespace
}  // namespace tilesearch::ir
