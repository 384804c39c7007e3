// Suite files: parsing of valid suites (library and fused problems) and every error path, with
// messages naming the file, the problem and the field.
#include <string>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/type.h"
#include "tools/suite.h"

namespace tilesearch::bench {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

std::string Wrap(const std::string& problems) {
  return R"({"version": 1, "suite": "t", "description": "d", "problems": [)" + problems + "]}";
}

const char kMatmul[] =
    R"j({"name": "mm", "op": "matmul", "shapes": [[8, 4], [4, 6]], "attrs": {"transpose_b": false},
        "inputs": ["A", "B"], "torch": "torch.matmul(A, B)", "tags": ["matmul"], "note": "n"})j";
const char kFused[] =
    R"j({"name": "dbr", "op": "fused", "shapes": [[16, 32], [24, 32], [24]], "inputs": ["X", "W", "b"],
        "torch": "torch.relu(F.linear(X, W) + b)", "tags": ["small"],
        "nodes": [{"op": "dense", "inputs": ["p0", "p1"]}, {"op": "add", "inputs": ["n0", "p2"]},
                  {"op": "relu", "inputs": ["n1"], "attrs": {}}]})j";

TEST(SuiteParseTest, ReadsLibraryAndFusedProblems) {
  absl::StatusOr<Suite> s = Suite::Parse(Wrap(std::string(kMatmul) + "," + kFused), "f.json");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "t");
  EXPECT_EQ(s->description, "d");
  ASSERT_EQ(s->problems.size(), 2u);
  const Problem& mm = s->problems[0];
  EXPECT_EQ(mm.name, "mm");
  EXPECT_EQ(mm.workload.op, "matmul");
  EXPECT_EQ(mm.workload.args.shapes, (std::vector<std::vector<int64_t>>{{8, 4}, {4, 6}}));
  EXPECT_EQ(mm.workload.args.dtype, ir::ScalarType::kFloat32);
  EXPECT_EQ(mm.workload.args.attrs.at("transpose_b"), "false");  // a boolean read as its text
  EXPECT_THAT(mm.inputs, ElementsAre("A", "B"));
  EXPECT_EQ(mm.torch, "torch.matmul(A, B)");
  EXPECT_FALSE(mm.is_fused());
  EXPECT_FALSE(mm.is_small());
  EXPECT_EQ(mm.note, "n");
  const Problem& f = s->problems[1];
  EXPECT_TRUE(f.is_fused());
  EXPECT_TRUE(f.is_small());
  ASSERT_EQ(f.workload.nodes.size(), 3u);
  EXPECT_EQ(f.workload.nodes[0].op, "dense");
  ASSERT_EQ(f.workload.nodes[1].inputs.size(), 2u);
  EXPECT_EQ(f.workload.nodes[1].inputs[0].ToString(), "n0");
  EXPECT_EQ(f.workload.nodes[1].inputs[1].ToString(), "p2");
  EXPECT_EQ(s->Find("dbr"), &s->problems[1]);
  EXPECT_EQ(s->Find("nope"), nullptr);
}

TEST(SuiteParseTest, BuildsBothKindsWithTheExpectedOutputShape) {
  absl::StatusOr<Suite> s = Suite::Parse(Wrap(std::string(kMatmul) + "," + kFused));
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<ir::ComputeDAG> mm = BuildProblem(s->problems[0]);
  ASSERT_TRUE(mm.ok()) << mm.status();
  EXPECT_EQ(mm->stage(mm->output_ids()[0]).shape(), (std::vector<int64_t>{8, 6}));
  // 2·M·N·K.
  EXPECT_DOUBLE_EQ(mm->Flops(), 2.0 * 8 * 6 * 4);
  // (8·4 + 4·6 + 8·6) floats.
  EXPECT_DOUBLE_EQ(MinimumBytes(*mm), 4.0 * (32 + 24 + 48));
  absl::StatusOr<ir::ComputeDAG> f = BuildProblem(s->problems[1]);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->stage(f->output_ids()[0]).shape(), (std::vector<int64_t>{16, 24}));
  EXPECT_EQ(f->input_ids().size(), 3u);
}

struct ErrorCase {
  const char* label;
  std::string text;
  const char* message;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.label; }

class SuiteParseErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(SuiteParseErrorTest, NamesFileProblemAndField) {
  absl::StatusOr<Suite> s = Suite::Parse(GetParam().text, "suites/x.json");
  EXPECT_THAT(s.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("suites/x.json: "), HasSubstr(GetParam().message))));
}

std::string P(const std::string& fields, const std::string& inputs = R"(["X"])") {
  return Wrap(R"j({"name": "p", "torch": "torch.relu(X)", "inputs": )j" + inputs + ", " + fields +
              "}");
}

INSTANTIATE_TEST_SUITE_P(
    Errors, SuiteParseErrorTest,
    ::testing::Values(
        ErrorCase{"not_json", "{", "not valid JSON: "},
        ErrorCase{"number_overflow", R"({"version": 1e400})", "number overflow"},
        ErrorCase{"not_object", "[1]", "must be a JSON object"},
        ErrorCase{"unknown_top", R"({"version": 1, "suite": "t", "problems": [], "x": 1})",
                  "unknown field 'x'"},
        ErrorCase{"no_version", R"({"suite": "t", "problems": []})", "field 'version' is missing"},
        ErrorCase{"bad_version", R"({"version": "1", "suite": "t", "problems": []})",
                  "field 'version' must be a positive integer"},
        ErrorCase{"new_version", R"({"version": 2, "suite": "t", "problems": []})",
                  "version 2 is newer than this build reads (1)"},
        ErrorCase{"no_suite", R"({"version": 1, "problems": []})", "field 'suite' is missing"},
        ErrorCase{"empty_problems", R"({"version": 1, "suite": "t", "problems": []})",
                  "field 'problems' must be a non-empty list"},
        ErrorCase{"problem_not_object", Wrap("3"),
                  "problem 0: field 'problems[0]' must be an object"},
        ErrorCase{"missing_torch",
                  Wrap(R"({"name": "p", "op": "relu", "shapes": [[4]], "inputs": ["X"]})"),
                  "problem 0 'p': field 'problems[0].torch' is missing"},
        ErrorCase{"unknown_field", P(R"("op": "relu", "shapes": [[4]], "axes": 1)"),
                  "problem 0 'p': unknown field 'problems[0].axes'"},
        ErrorCase{"bad_name",
                  Wrap(R"({"name": "Mat-mul", "op": "relu", "shapes": [[4]], "inputs": ["X"],
                           "torch": "X"})"),
                  "name 'Mat-mul' must be lower-case letters, digits and '_'"},
        ErrorCase{"bad_shape", P(R"("op": "relu", "shapes": [[4, 0]])"),
                  "problem 0 'p': field 'problems[0].shapes[0]' must be a list of positive "
                  "integers, got [4,0]"},
        ErrorCase{"shapes_not_list", P(R"("op": "relu", "shapes": 4)"),
                  "field 'problems[0].shapes' must be a list of shapes"},
        ErrorCase{"bad_dtype", P(R"("op": "relu", "shapes": [[4]], "dtype": "float33")"),
                  "field 'problems[0].dtype'"},
        ErrorCase{"input_count", P(R"("op": "add", "shapes": [[4], [4]])"),
                  "field 'problems[0].inputs' names 1 inputs but 'shapes' lists 2"},
        ErrorCase{"input_name",
                  Wrap(R"({"name": "p", "op": "relu", "shapes": [[4]], "inputs": ["F"],
                           "torch": "X"})"),
                  "input name 'F' must be an identifier other than torch and F"},
        ErrorCase{"input_twice",
                  Wrap(R"({"name": "p", "op": "add", "shapes": [[4], [4]], "inputs": ["X", "X"],
                           "torch": "X"})"),
                  "input name 'X' is used twice"},
        ErrorCase{"empty_torch",
                  Wrap(R"({"name": "p", "op": "relu", "shapes": [[4]], "inputs": ["X"],
                           "torch": ""})"),
                  "field 'problems[0].torch' must be a non-empty string"},
        ErrorCase{"duplicate_name", Wrap(std::string(kMatmul) + "," + kMatmul),
                  "problem 1 'mm': name 'mm' is used by problem 0 too"},
        ErrorCase{
            "nodes_not_fused",
            P(R"("op": "relu", "shapes": [[4]], "nodes": [{"op": "relu", "inputs": ["p0"]}])"),
            "field 'problems[0].nodes' is only valid in a \"fused\" workload (op is 'relu')"},
        ErrorCase{
            "fused_without_nodes", P(R"("op": "fused", "shapes": [[4]])"),
            "field 'problems[0].nodes' is missing (a fused workload lists its operator nodes)"},
        ErrorCase{"fused_attrs", P(R"("op": "fused", "shapes": [[4]], "attrs": {"axis": 1},
                       "nodes": [{"op": "relu", "inputs": ["p0"]}])"),
                  "field 'problems[0].attrs' must be empty in a fused workload"},
        ErrorCase{
            "unknown_graph_op",
            P(R"("op": "fused", "shapes": [[4]], "nodes": [{"op": "foo", "inputs": ["p0"]}])"),
            "field 'problems[0].nodes[0].op': unknown graph operator 'foo'"},
        ErrorCase{
            "missing_placeholder",
            P(R"("op": "fused", "shapes": [[4]], "nodes": [{"op": "relu", "inputs": ["p1"]}])"),
            "field 'problems[0].nodes[0].inputs[0]': placeholder p1 does not exist (the "
            "workload has 1 shapes)"},
        ErrorCase{"later_node",
                  P(R"("op": "fused", "shapes": [[4]], "nodes": [{"op": "relu", "inputs": ["p0"]},
                       {"op": "relu", "inputs": ["n1"]}])"),
                  "field 'problems[0].nodes[1].inputs[0]': n1 is not an earlier node"},
        ErrorCase{
            "bad_operand",
            P(R"("op": "fused", "shapes": [[4]], "nodes": [{"op": "relu", "inputs": ["x0"]}])"),
            "field 'problems[0].nodes[0].inputs[0]' must be \"p<index>\" or \"n<index>\", "
            "got 'x0'"},
        ErrorCase{"empty_nodes", P(R"("op": "fused", "shapes": [[4]], "nodes": [])"),
                  "field 'problems[0].nodes' must list at least one node"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return std::string(info.param.label); });

TEST(SuiteParseTest, LoadNamesADirectory) {
  const std::string dir = ::testing::TempDir();
  EXPECT_THAT(Suite::Load(dir).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is a directory")));
}

TEST(SuiteParseTest, LoadNamesAMissingFile) {
  EXPECT_THAT(Suite::Load("/nonexistent/suite.json").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("cannot read suite file '/nonexistent/suite.json'")));
}

// Adversarial nesting: a problem (or a field the suite reader checks itself) that is 100000
// nested lists is an error naming the field, not a stack overflow while the message quotes it.
// (The workload fields go through schedule::WorkloadFromJson, which still quotes them whole.)
TEST(SuiteParseTest, DeeplyNestedProblemIsAnErrorNotACrash) {
  const int depth = 100000;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  EXPECT_THAT(Suite::Parse(Wrap(deep), "suites/x.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("suites/x.json: problem 0"),
                             HasSubstr("field 'problems[0]' must be an object"))));
  EXPECT_THAT(Suite::Parse(P(R"("op": "relu", "shapes": [[4]], "tags": )" + deep)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'problems[0].tags'")));
}

Problem Parsed(const std::string& fields, const std::string& inputs = R"(["X"])") {
  absl::StatusOr<Suite> s = Suite::Parse(P(fields, inputs));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? s->problems[0] : Problem{};
}

TEST(SuiteBuildTest, ErrorsNameTheProblemAndNode) {
  EXPECT_THAT(
      BuildProblem(Parsed(R"("op": "relu", "shapes": [[4]], "attrs": {"axis": "1"})")).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("problem 'p': "), HasSubstr("axis"))));
  // A shape mismatch inside a fused problem names the node.
  EXPECT_THAT(BuildProblem(Parsed(R"("op": "fused", "shapes": [[4, 8], [3, 5]],
                             "nodes": [{"op": "matmul", "inputs": ["p0", "p1"]}])",
                                  R"(["X", "Y"])"))
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("problem 'p': fused workload: nodes[0] (matmul): ")));
  EXPECT_THAT(
      BuildProblem(Parsed(R"("op": "fused", "shapes": [[4], [4]],
                             "nodes": [{"op": "relu", "inputs": ["p0"]}])",
                          R"(["X", "Y"])"))
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("problem 'p': fused workload: placeholder p1 is not read by any node")));
  EXPECT_THAT(BuildProblem(Parsed(R"("op": "fused", "shapes": [[4]],
                             "nodes": [{"op": "relu", "inputs": ["p0"]},
                                       {"op": "sigmoid", "inputs": ["p0"]}])"))
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node n0 (relu) is not read by a later node")));
}

}  // namespace
}  // namespace tilesearch::bench
