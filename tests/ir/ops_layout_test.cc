// transpose against direct index permutation, and the shared axis / shape helpers.
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/layout.h"
#include "ir/ops/registry.h"
#include "ir/reference.h"
#include "tests/ir/ops_expect_matches.h"

namespace tilesearch::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_ops::Unflatten;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

// Checks out[i] == x[j] with j[perm[d]] = i[d] for every element (transpose moves values exactly).
void CheckTranspose(const std::vector<int64_t>& shape, const std::vector<int64_t>& perm_arg,
                    const std::vector<int>& perm, const std::vector<int64_t>& out_shape) {
  SCOPED_TRACE(::testing::Message()
               << "rank " << shape.size() << " perm " << ShapeToString(perm_arg));
  absl::StatusOr<ComputeDAG> dag = TransposeDAG(shape, perm_arg);
  ASSERT_THAT(dag, IsOk());
  const int id = dag->output_ids()[0];
  const Tensor& out = dag->stage(id);
  ASSERT_EQ(out.shape(), out_shape);
  BufferMap inputs = MakeRandomInputs(*dag, 19);
  const HostBuffer& x = inputs.at("X");
  absl::StatusOr<BufferMap> got = RunReference(*dag, inputs);
  ASSERT_THAT(got, IsOk());
  const HostBuffer& y = got->at(out.name());
  for (int64_t flat = 0; flat < out.NumElements(); ++flat) {
    std::vector<int64_t> i = Unflatten(flat, out_shape);
    std::vector<int64_t> j(i.size());
    for (size_t d = 0; d < i.size(); ++d) j[perm[d]] = i[d];
    ASSERT_EQ(y.data[flat], x.at(j)) << "element " << flat;
    if (flat % 97 == 0) {
      absl::StatusOr<double> v = EvaluatePoint(*dag, id, i, inputs);
      ASSERT_THAT(v, IsOk());
      EXPECT_EQ(*v, x.at(j));
    }
  }
}

TEST(TransposeTest, PermutesAxes) {
  CheckTranspose({7, 127}, {1, 0}, {1, 0}, {127, 7});
  CheckTranspose({2, 3, 5}, {0, 2, 1}, {0, 2, 1}, {2, 5, 3});
  CheckTranspose({2, 3, 5}, {2, 0, 1}, {2, 0, 1}, {5, 2, 3});
  CheckTranspose({1, 7, 1, 3}, {3, 1, 0, 2}, {3, 1, 0, 2}, {3, 7, 1, 1});
  CheckTranspose({13}, {0}, {0}, {13});
}

TEST(TransposeTest, DefaultReversesAxes) { CheckTranspose({2, 3, 5}, {}, {2, 1, 0}, {5, 3, 2}); }

TEST(TransposeTest, NegativePermEntriesCountFromTheEnd) {
  CheckTranspose({2, 3, 5}, {0, -1, -2}, {0, 2, 1}, {2, 5, 3});
}

TEST(TransposeTest, RejectsBadPerms) {
  EXPECT_THAT(TransposeDAG({2, 3, 4}, {0, 0, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("transpose: perm [0, 0, 1] is not a permutation of 0..2")));
  EXPECT_THAT(TransposeDAG({2, 3, 4}, {0, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("transpose: perm [0, 1] is not a permutation of 0..2")));
  EXPECT_THAT(TransposeDAG({2, 3}, {0, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("perm [0, 2] is not a permutation of 0..1")));
  EXPECT_THAT(TransposeDAG({2, 0}, {1, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("transpose: input X has extent 0 in dimension 1")));
}

TEST(TransposeTest, RegistryParsesPerm) {
  OpArgs args;
  args.shapes = {{2, 3, 4}};
  args.attrs = {{"perm", "0,2,1"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("transpose", args);
  ASSERT_THAT(dag, IsOk());
  EXPECT_THAT(dag->stage(dag->output_ids()[0]).shape(), ElementsAre(2, 4, 3));
  args.attrs = {{"perm", "reverse"}};
  dag = BuildOp("transpose", args);
  ASSERT_THAT(dag, IsOk());
  EXPECT_THAT(dag->stage(dag->output_ids()[0]).shape(), ElementsAre(4, 3, 2));
  args.attrs = {{"perm", "0;2;1"}};
  EXPECT_THAT(BuildOp("transpose", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("attribute 'perm' of transpose: '0;2;1'")));
}

TEST(AxisHelpersTest, NormalizeAxisAndAxes) {
  absl::StatusOr<int> axis = NormalizeAxis("op", -1, 3);
  ASSERT_THAT(axis, IsOk());
  EXPECT_EQ(*axis, 2);
  EXPECT_THAT(NormalizeAxis("op", 3, 3), StatusIs(absl::StatusCode::kInvalidArgument,
                                                  HasSubstr("op: axis 3 out of range for rank 3")));
  absl::StatusOr<std::vector<int>> axes = NormalizeAxes("op", {-1, 0}, 3);
  ASSERT_THAT(axes, IsOk());
  EXPECT_THAT(*axes, ElementsAre(0, 2));
  EXPECT_THAT(NormalizeAxes("op", {2, -1}, 3),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("op: axis 2 given twice")));
  EXPECT_EQ(ShapeToString({2, 3}), "[2, 3]");
  EXPECT_EQ(ShapeToString({}), "[]");
}

}  // namespace
}  // namespace tilesearch::ir
