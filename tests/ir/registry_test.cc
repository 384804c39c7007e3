// The operator library as data: every entry is documented and builds; lookup, argument checks
// and shape parsing report errors that name the operator and the argument.
#include "ir/ops/registry.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/reference.h"

namespace tilesearch::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

// One valid, small set of arguments per operator. A new operator must add its example here.
std::map<std::string, OpArgs> Examples() {
  auto args = [](std::vector<std::vector<int64_t>> shapes,
                 std::map<std::string, std::string> attrs = {}) {
    OpArgs a;
    a.shapes = std::move(shapes);
    a.attrs = std::move(attrs);
    return a;
  };
  return {
      // Linear.
      {"matmul", args({{3, 5}, {5, 4}})},
      {"batch_matmul", args({{2, 3, 5}, {2, 5, 4}})},
      {"dense", args({{3, 5}, {4, 5}})},
      {"gemv", args({{3, 5}, {5}})},
      // Convolution and pooling.
      {"conv1d", args({{1, 2, 9}, {3, 2, 3}})},
      {"conv2d_nchw", args({{1, 2, 6, 5}, {3, 2, 3, 3}}, {{"padding", "1"}})},
      {"conv2d_nhwc", args({{1, 6, 5, 2}, {3, 3, 2, 3}})},
      {"conv2d_nchw_padded", args({{1, 2, 6, 5}, {3, 2, 3, 3}}, {{"padding", "1"}})},
      {"depthwise_conv2d_nchw", args({{1, 2, 6, 5}, {2, 1, 3, 3}})},
      {"max_pool2d", args({{1, 2, 6, 5}}, {{"kernel", "2"}})},
      {"avg_pool2d", args({{1, 2, 6, 5}}, {{"kernel", "2"}})},
      // Fused.
      {"conv2d_bias_relu", args({{1, 2, 6, 5}, {3, 2, 3, 3}, {3}})},
      {"dense_bias_relu", args({{3, 5}, {4, 5}, {4}})},
      {"matmul_scale_residual", args({{3, 5}, {5, 4}, {3, 4}})},
      // Reductions and normalizations.
      {"reduce_sum", args({{3, 7}}, {{"axes", "1"}})},
      {"reduce_mean", args({{3, 7}})},
      {"reduce_max", args({{3, 7}}, {{"axes", "0"}, {"keepdim", "true"}})},
      {"reduce_min", args({{3, 7}})},
      {"softmax", args({{3, 7}})},
      {"log_softmax", args({{3, 7}}, {{"axis", "0"}})},
      {"layernorm", args({{3, 7}, {7}, {7}})},
      {"rmsnorm", args({{3, 7}, {7}})},
      // Elementwise and layout.
      {"relu", args({{3, 7}})},
      {"leaky_relu", args({{3, 7}})},
      {"gelu", args({{3, 7}})},
      {"sigmoid", args({{3, 7}})},
      {"tanh", args({{3, 7}})},
      {"swish", args({{3, 7}})},
      {"softplus", args({{3, 7}})},
      {"elu", args({{3, 7}})},
      {"hardtanh", args({{3, 7}})},
      {"add", args({{3, 7}, {7}})},
      {"sub", args({{3, 1}, {7}})},
      {"mul", args({{3, 7}, {3, 7}})},
      {"div", args({{3, 7}, {1}})},
      {"maximum", args({{3, 7}, {3, 1}})},
      {"minimum", args({{7}, {3, 7}})},
      {"scale", args({{3, 7}}, {{"scale", "0.5"}})},
      {"transpose", args({{3, 7, 2}}, {{"perm", "2,0,1"}})},
  };
}

TEST(RegistryTest, LibraryIsSortedAndEveryEntryIsDocumented) {
  const std::vector<OpInfo>& ops = OpLibrary();
  ASSERT_FALSE(ops.empty());
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpInfo& op = ops[i];
    SCOPED_TRACE(op.name);
    EXPECT_FALSE(op.name.empty());
    EXPECT_FALSE(op.summary.empty());
    EXPECT_FALSE(op.inputs.empty());
    EXPECT_TRUE(static_cast<bool>(op.build));
    for (const OpAttrInfo& attr : op.attrs) {
      EXPECT_FALSE(attr.name.empty());
      EXPECT_FALSE(attr.doc.empty()) << "attribute " << attr.name;
    }
    if (i > 0) {
      EXPECT_LT(ops[i - 1].name, op.name);
    }
  }
}

TEST(RegistryTest, EveryOperatorHasAnExampleThatBuildsAndRuns) {
  const std::map<std::string, OpArgs> examples = Examples();
  for (const OpInfo& op : OpLibrary()) {
    SCOPED_TRACE(op.name);
    auto it = examples.find(op.name);
    ASSERT_NE(it, examples.end()) << "no example arguments for operator '" << op.name
                                  << "': add one to Examples()";
    absl::StatusOr<ComputeDAG> dag = BuildOp(op.name, it->second);
    ASSERT_THAT(dag, IsOk());
    EXPECT_EQ(dag->input_ids().size(), it->second.shapes.size());
    ASSERT_FALSE(dag->output_ids().empty());
    absl::StatusOr<BufferMap> out = RunReference(*dag, MakeRandomInputs(*dag, 1));
    EXPECT_THAT(out, IsOk());
  }
}

TEST(RegistryTest, DocumentedDefaultsAreTheDefaults) {
  // Passing every documented default explicitly must build the same workload as omitting it.
  const std::map<std::string, OpArgs> examples = Examples();
  for (const OpInfo& op : OpLibrary()) {
    SCOPED_TRACE(op.name);
    auto it = examples.find(op.name);
    if (it == examples.end()) continue;  // reported by the test above
    OpArgs implicit = it->second;
    OpArgs explicit_defaults = it->second;
    auto names_an_attribute = [&](const std::string& text) {
      return std::any_of(op.attrs.begin(), op.attrs.end(),
                         [&](const OpAttrInfo& a) { return a.name == text; });
    };
    for (const OpAttrInfo& attr : op.attrs) {
      if (attr.default_value.empty() || implicit.attrs.count(attr.name)) continue;
      // A default naming another attribute ("stride" defaults to "kernel") means "the same as".
      if (names_an_attribute(attr.default_value)) continue;
      explicit_defaults.attrs[attr.name] = attr.default_value;
    }
    absl::StatusOr<ComputeDAG> a = BuildOp(op.name, implicit);
    absl::StatusOr<ComputeDAG> b = BuildOp(op.name, explicit_defaults);
    ASSERT_THAT(a, IsOk());
    ASSERT_THAT(b, IsOk());
    EXPECT_EQ(a->WorkloadKey(), b->WorkloadKey());
  }
}

TEST(RegistryTest, ExamplesNameOnlyLibraryOperators) {
  for (const auto& [name, args] : Examples()) {
    EXPECT_THAT(FindOp(name), IsOk()) << name;
  }
}

TEST(RegistryTest, FindOpReportsUnknownNamesWithSuggestions) {
  absl::StatusOr<const OpInfo*> op = FindOp("softmax");
  ASSERT_THAT(op, IsOk());
  EXPECT_EQ((*op)->name, "softmax");
  EXPECT_THAT(FindOp("sofmax"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("unknown operator 'sofmax' (did you mean softmax")));
  EXPECT_THAT(FindOp("zzzzzzzzzzzz"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown operator 'zzzzzzzzzzzz'")));
}

TEST(RegistryTest, BuildOpRejectsUnknownOperator) {
  EXPECT_THAT(
      BuildOp("convolution9", OpArgs{}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown operator 'convolution9'")));
}

TEST(RegistryTest, BuildOpRejectsWrongShapeCount) {
  OpArgs args;
  args.shapes = {{3, 7}};
  EXPECT_THAT(BuildOp("add", args), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("add: expected 2 input shapes, got 1")));
  args.shapes = {{3, 7}, {7}};
  EXPECT_THAT(BuildOp("softmax", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("softmax: expected 1 input shape, got 2")));
}

TEST(RegistryTest, BuildOpRejectsUnknownAttributeListingValidOnes) {
  OpArgs args;
  args.shapes = {{3, 7}};
  args.attrs = {{"dim", "1"}};
  EXPECT_THAT(BuildOp("softmax", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("softmax: unknown attribute 'dim' (valid: axis)")));
  EXPECT_THAT(BuildOp("relu", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("relu: unknown attribute 'dim' (valid: none)")));
  args.attrs = {{"axes", "1"}, {"keep", "1"}};
  EXPECT_THAT(BuildOp("reduce_sum", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown attribute 'keep' (valid: axes, keepdim)")));
}

TEST(RegistryTest, BuildOpRejectsBadAttributeValues) {
  OpArgs args;
  args.shapes = {{3, 7}};
  args.attrs = {{"axis", "last"}};
  EXPECT_THAT(BuildOp("softmax", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("attribute 'axis' of softmax: 'last' is not an integer")));
  args.attrs = {{"keepdim", "maybe"}};
  EXPECT_THAT(BuildOp("reduce_max", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("attribute 'keepdim' of reduce_max: 'maybe' is not a boolean")));
  args.attrs = {{"alpha", "1e999"}};
  EXPECT_THAT(BuildOp("elu", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("attribute 'alpha' of elu: '1e999' is not a finite number")));
  // Errors of the operator itself pass through.
  args.attrs = {{"axis", "2"}};
  EXPECT_THAT(BuildOp("softmax", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("softmax: axis 2 out of range for rank 2")));
}

TEST(RegistryTest, BuildOpUsesTheDtype) {
  OpArgs args;
  args.shapes = {{3, 7}};
  args.dtype = ScalarType::kFloat16;
  absl::StatusOr<ComputeDAG> dag = BuildOp("relu", args);
  ASSERT_THAT(dag, IsOk());
  EXPECT_EQ(dag->stage(dag->output_ids()[0]).dtype(), ScalarType::kFloat16);
}

TEST(ParseShapeTest, AcceptsBothSeparators) {
  absl::StatusOr<std::vector<int64_t>> shape = ParseShape("64x128x3");
  ASSERT_THAT(shape, IsOk());
  EXPECT_THAT(*shape, ElementsAre(64, 128, 3));
  shape = ParseShape("64,128,3");
  ASSERT_THAT(shape, IsOk());
  EXPECT_THAT(*shape, ElementsAre(64, 128, 3));
  shape = ParseShape(" 7 ");
  ASSERT_THAT(shape, IsOk());
  EXPECT_THAT(*shape, ElementsAre(7));
}

TEST(ParseShapeTest, RejectsMalformedText) {
  EXPECT_THAT(ParseShape(""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(ParseShape("64xax3"), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("shape '64xax3': 'a' is not an integer")));
  EXPECT_THAT(ParseShape("64x"), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("shape '64x': '' is not an integer")));
  EXPECT_THAT(ParseShape("4x0"), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("shape '4x0': extent 0 is not positive")));
  EXPECT_THAT(ParseShape("4x-2"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("extent -2 is not positive")));
  EXPECT_THAT(ParseShape("4x5,6"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("mixes 'x' and ','")));
  EXPECT_THAT(ParseShape("2.5x3"), Not(IsOk()));
}

}  // namespace
}  // namespace tilesearch::ir
