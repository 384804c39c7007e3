// Schedule files: parsing every field, exact round trips through text, resolving into a DAG and a
// replayed state, loading from disk, and one error per malformed field, each naming the file and
// the field.
#include "schedule/schedule_file.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "schedule/lower.h"
#include "schedule/step.h"
#include "tests/schedule/lower_test_util.h"

namespace tilesearch::schedule {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

// A 64x48 · 48x32 matmul (stages A 0, B 1, C 2) split, reordered to i.0 j.0 i.1 j.1 k and bound
// (i.0 to blockIdx.x, i.1 to threadIdx.x).
json MatmulFile() {
  return json::parse(R"({
    "version": 1,
    "comment": "tiled matmul",
    "workload": {"op": "matmul", "shapes": [[64, 48], [48, 32]], "dtype": "float32",
                 "attrs": {"transpose_b": "false"}},
    "target": "cuda -arch=sm_80",
    "steps": [
      ["SP", 2, 0, 64, [4], 1],
      ["SP", 2, 2, 32, [8], 1],
      ["RE", 2, [0, 2, 1, 3, 4]],
      ["AN", 2, 0, 5],
      ["AN", 2, 2, 6]
    ]
  })");
}

absl::StatusOr<ScheduleFile> ParseJson(const json& j) {
  return ScheduleFile::Parse(j.dump(), "s.json");
}

TEST(ScheduleFileParse, ReadsEveryField) {
  absl::StatusOr<ScheduleFile> f = ParseJson(MatmulFile());
  ASSERT_THAT(f, IsOk());
  EXPECT_EQ(f->source, "s.json");
  EXPECT_EQ(f->comment, "tiled matmul");
  EXPECT_EQ(f->workload.op, "matmul");
  EXPECT_EQ(f->workload.args.shapes, (std::vector<std::vector<int64_t>>{{64, 48}, {48, 32}}));
  EXPECT_EQ(f->workload.args.dtype, ir::ScalarType::kFloat32);
  EXPECT_EQ(f->workload.args.attrs, (std::map<std::string, std::string>{{"transpose_b", "false"}}));
  EXPECT_EQ(f->target.kind, TargetKind::kCuda);
  EXPECT_EQ(f->target.arch, "sm_80");

  SplitStep split_i;
  split_i.stage_id = 2;
  split_i.iter_id = 0;
  split_i.extent = 64;
  split_i.lengths = {4};
  SplitStep split_j = split_i;
  split_j.iter_id = 2;
  split_j.extent = 32;
  split_j.lengths = {8};
  ReorderStep reorder;
  reorder.stage_id = 2;
  reorder.after_ids = {0, 2, 1, 3, 4};
  AnnotationStep block;
  block.stage_id = 2;
  block.iter_id = 0;
  block.annotation = IteratorAnnotation::kBlockIdxX;
  AnnotationStep thread = block;
  thread.iter_id = 2;
  thread.annotation = IteratorAnnotation::kThreadIdxX;
  EXPECT_EQ(f->steps, (std::vector<Step>{split_i, split_j, reorder, block, thread}));
}

TEST(ScheduleFileParse, OptionalFieldsTakeTheirDefaults) {
  json j = MatmulFile();
  j.erase("comment");
  j["workload"].erase("dtype");
  j["workload"].erase("attrs");
  j["target"] = "cpu";
  j["steps"] = json::array();
  absl::StatusOr<ScheduleFile> f = ParseJson(j);
  ASSERT_THAT(f, IsOk());
  EXPECT_EQ(f->comment, "");
  EXPECT_EQ(f->workload.args.dtype, ir::ScalarType::kFloat32);
  EXPECT_TRUE(f->workload.args.attrs.empty());
  EXPECT_EQ(f->target.kind, TargetKind::kCpu);
  EXPECT_TRUE(f->steps.empty());
}

TEST(ScheduleFileParse, IntegerAndBooleanAttributesAreReadAsText) {
  json j = MatmulFile();
  j["workload"] = json::parse(
      R"({"op": "conv2d_nchw", "shapes": [[1, 3, 8, 8], [4, 3, 3, 3]], "dtype": "float16",
          "attrs": {"padding": 1, "stride": "2", "bias": false}})");
  absl::StatusOr<ScheduleFile> f = ParseJson(j);
  ASSERT_THAT(f, IsOk());
  EXPECT_EQ(f->workload.args.dtype, ir::ScalarType::kFloat16);
  EXPECT_EQ(f->workload.args.attrs, (std::map<std::string, std::string>{
                                        {"padding", "1"}, {"stride", "2"}, {"bias", "false"}}));
}

TEST(ScheduleFileText, RoundTripIsExact) {
  absl::StatusOr<ScheduleFile> f = ParseJson(MatmulFile());
  ASSERT_THAT(f, IsOk());
  const std::string text = f->ToText();
  absl::StatusOr<ScheduleFile> g = ScheduleFile::Parse(text, "s.json");
  ASSERT_THAT(g, IsOk()) << text;
  EXPECT_EQ(g->comment, f->comment);
  EXPECT_EQ(g->workload, f->workload);
  EXPECT_EQ(g->target.ToString(), "cuda -arch=sm_80");
  EXPECT_EQ(g->steps, f->steps);
  EXPECT_EQ(g->ToText(), text);
  // One step per line: 5 lines that hold a step array.
  int step_lines = 0;
  for (size_t pos = 0; (pos = text.find("\n    [\"", pos)) != std::string::npos; ++pos) {
    ++step_lines;
  }
  EXPECT_EQ(step_lines, 5) << text;
}

TEST(ScheduleFileText, EmptyStepsAndNoCommentRoundTrip) {
  ScheduleFile f;
  f.workload.op = "softmax";
  f.workload.args.shapes = {{4, 16}};
  f.target = Target::HostCpu();
  absl::StatusOr<ScheduleFile> g = ScheduleFile::Parse(f.ToText());
  ASSERT_THAT(g, IsOk()) << f.ToText();
  EXPECT_EQ(g->workload, f.workload);
  EXPECT_EQ(g->target.ToString(), "cpu");
  EXPECT_TRUE(g->steps.empty());
  EXPECT_EQ(g->comment, "");
}

TEST(Workload, TextUsesTheCommandLineSyntax) {
  Workload w;
  w.op = "matmul";
  w.args.shapes = {{64, 32}, {32, 16}};
  w.args.attrs = {{"transpose_b", "false"}, {"transpose_a", "true"}};
  EXPECT_EQ(w.ToString(), "matmul 64x32 32x16 float32 transpose_a=true transpose_b=false");
}

TEST(Workload, JsonRoundTripAndFieldPrefix) {
  Workload w;
  w.op = "softmax";
  w.args.shapes = {{4, 16}};
  w.args.dtype = ir::ScalarType::kBFloat16;
  w.args.attrs = {{"axis", "-1"}};
  absl::StatusOr<Workload> back = WorkloadFromJson(WorkloadToJson(w), "task.workload");
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(*back, w);
  json bad = WorkloadToJson(w);
  bad["shapes"] = 3;
  EXPECT_THAT(WorkloadFromJson(bad, "task.workload"),
              StatusIs(kInvalid, HasSubstr("field 'task.workload.shapes' must be a list")));
}

TEST(ScheduleFileResolve, BuildsTheOperatorAndReplaysTheSteps) {
  absl::StatusOr<ScheduleFile> f = ParseJson(MatmulFile());
  ASSERT_THAT(f, IsOk());
  absl::StatusOr<ResolvedSchedule> r = f->Resolve();
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->dag.num_stages(), 3);
  EXPECT_EQ(r->dag.stage(0).shape(), (std::vector<int64_t>{64, 48}));
  EXPECT_EQ(r->dag.stage(1).shape(), (std::vector<int64_t>{48, 32}));
  EXPECT_EQ(r->dag.stage(2).shape(), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(r->state.steps().size(), 5u);
  // i split by 4 and j by 8 (inner lengths), reordered to i.0 j.0 i.1 j.1 k.
  const Stage& c = r->state.stage(2);
  std::vector<std::pair<std::string, int64_t>> loops;
  for (const Iterator& it : c.iters) loops.emplace_back(it.name, it.extent);
  EXPECT_EQ(loops, (std::vector<std::pair<std::string, int64_t>>{
                       {"i.0", 16}, {"j.0", 4}, {"i.1", 4}, {"j.1", 8}, {"k", 48}}));
  EXPECT_EQ(c.iters[0].annotation, IteratorAnnotation::kBlockIdxX);
  EXPECT_EQ(c.iters[1].annotation, IteratorAnnotation::kNone);
  EXPECT_EQ(c.iters[2].annotation, IteratorAnnotation::kThreadIdxX);
}

TEST(ScheduleFileResolve, WorkloadErrorsNameTheFile) {
  json j = MatmulFile();
  j["workload"]["op"] = "matmull";
  EXPECT_THAT(ParseJson(j)->Resolve(),
              StatusIs(kInvalid, AllOf(StartsWith("s.json: workload: "),
                                       HasSubstr("unknown operator 'matmull'"))));
  j = MatmulFile();
  j["workload"]["shapes"] = json::parse("[[64, 48]]");
  EXPECT_THAT(ParseJson(j)->Resolve(),
              StatusIs(kInvalid, AllOf(StartsWith("s.json: workload: "),
                                       HasSubstr("expected 2 input shapes, got 1"))));
  j = MatmulFile();
  j["workload"]["shapes"] = json::parse("[[64, 48], [40, 32]]");
  EXPECT_THAT(ParseJson(j)->Resolve(), StatusIs(kInvalid, HasSubstr("inner dimensions differ")));
}

TEST(ScheduleFileResolve, StepErrorsNameTheFileAndTheStep) {
  json j = MatmulFile();
  j["steps"][3] = json::parse(R"(["AN", 99, 0, 5])");
  EXPECT_THAT(ParseJson(j)->Resolve(),
              StatusIs(kInvalid, AllOf(StartsWith("s.json: step 3: "), HasSubstr("99"))));
  // The split records extent 64 of i; on a 32-row workload it no longer matches.
  j = MatmulFile();
  j["workload"]["shapes"] = json::parse("[[32, 48], [48, 32]]");
  EXPECT_THAT(ParseJson(j)->Resolve(), StatusIs(kInvalid, StartsWith("s.json: step 0: ")));
}

TEST(ScheduleFileLoad, ReadsAFileAndNamesItInErrors) {
  const std::string path = ::testing::TempDir() + "/schedule_file_test.json";
  {
    std::ofstream out(path);
    out << MatmulFile().dump(2);
  }
  absl::StatusOr<ScheduleFile> f = ScheduleFile::Load(path);
  ASSERT_THAT(f, IsOk());
  EXPECT_EQ(f->source, path);
  EXPECT_EQ(f->steps.size(), 5u);
  {
    std::ofstream out(path);
    out << "{\"version\": 1,";
  }
  EXPECT_THAT(ScheduleFile::Load(path), StatusIs(kInvalid, StartsWith(path + ": not valid JSON")));
  {
    std::ofstream out(path);
    out << "{\"version\": 1e400}";  // a number no double holds: an error, not an exception
  }
  EXPECT_THAT(ScheduleFile::Load(path),
              StatusIs(kInvalid,
                       AllOf(StartsWith(path + ": not valid JSON"), HasSubstr("number overflow"))));
  std::remove(path.c_str());
  EXPECT_THAT(
      ScheduleFile::Load(path),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("cannot read schedule file '" + path + "'")));
  // A directory is named as one, not as a file of invalid JSON.
  EXPECT_THAT(ScheduleFile::Load(::testing::TempDir()),
              StatusIs(kInvalid, HasSubstr("it is a directory")));
}

// One malformed field: how to break the file and what the error must say.
struct Malformed {
  const char* name;
  std::function<void(json&)> mutate;
  const char* message;
};

class ScheduleFileErrors : public ::testing::TestWithParam<Malformed> {};

TEST_P(ScheduleFileErrors, NamesTheFileAndTheField) {
  json j = MatmulFile();
  GetParam().mutate(j);
  EXPECT_THAT(ParseJson(j),
              StatusIs(kInvalid, AllOf(StartsWith("s.json: "), HasSubstr(GetParam().message))));
}

INSTANTIATE_TEST_SUITE_P(
    EveryField, ScheduleFileErrors,
    ::testing::Values(
        Malformed{"NotAnObject", [](json& j) { j = json::array(); }, "is a JSON object"},
        Malformed{"UnknownField", [](json& j) { j["stpes"] = 1; },
                  "unknown field 'stpes' (expected version, comment, workload, target, steps)"},
        Malformed{"NoVersion", [](json& j) { j.erase("version"); }, "field 'version' is missing"},
        Malformed{"VersionText", [](json& j) { j["version"] = "1"; },
                  "field 'version' must be an integer"},
        Malformed{"NewerVersion", [](json& j) { j["version"] = 2; },
                  "version 2 is newer than this build reads (1)"},
        Malformed{"VersionZero", [](json& j) { j["version"] = 0; }, "version 0 is not valid"},
        Malformed{"CommentNumber", [](json& j) { j["comment"] = 3; },
                  "field 'comment' must be a string"},
        Malformed{"NoWorkload", [](json& j) { j.erase("workload"); },
                  "field 'workload' is missing"},
        Malformed{"WorkloadList", [](json& j) { j["workload"] = json::array(); },
                  "field 'workload' must be an object"},
        Malformed{"UnknownWorkloadField", [](json& j) { j["workload"]["axes"] = 1; },
                  "unknown field 'workload.axes' (expected op, shapes, dtype, attrs, nodes)"},
        Malformed{"NoOp", [](json& j) { j["workload"].erase("op"); },
                  "field 'workload.op' is missing"},
        Malformed{"OpNumber", [](json& j) { j["workload"]["op"] = 7; },
                  "field 'workload.op' must be an operator name"},
        Malformed{"NoShapes", [](json& j) { j["workload"].erase("shapes"); },
                  "field 'workload.shapes' is missing"},
        Malformed{"ShapesText", [](json& j) { j["workload"]["shapes"] = "64x64"; },
                  "field 'workload.shapes' must be a list of shapes"},
        Malformed{"ShapeNotList", [](json& j) { j["workload"]["shapes"][1] = 48; },
                  "field 'workload.shapes[1]' must be a list of positive integers, got 48"},
        Malformed{"ZeroExtent", [](json& j) { j["workload"]["shapes"][0][1] = 0; },
                  "field 'workload.shapes[0]' must be a list of positive integers, got [64,0]"},
        Malformed{"FloatExtent", [](json& j) { j["workload"]["shapes"][0][0] = 6.5; },
                  "field 'workload.shapes[0]' must be a list of positive integers"},
        Malformed{"EmptyShape", [](json& j) { j["workload"]["shapes"][0] = json::array(); },
                  "field 'workload.shapes[0]' must be a list of positive integers, got []"},
        Malformed{"DtypeNumber", [](json& j) { j["workload"]["dtype"] = 32; },
                  "field 'workload.dtype' must be a string"},
        Malformed{"UnknownDtype", [](json& j) { j["workload"]["dtype"] = "float33"; },
                  "field 'workload.dtype': unknown dtype 'float33'"},
        Malformed{"AttrsList", [](json& j) { j["workload"]["attrs"] = json::array(); },
                  "field 'workload.attrs' must be an object"},
        Malformed{"AttrFloat", [](json& j) { j["workload"]["attrs"]["eps"] = 1e-5; },
                  "field 'workload.attrs.eps' must be a string, an integer or a boolean"},
        Malformed{"AttrPast2To63",
                  [](json& j) { j["workload"]["attrs"]["axis"] = uint64_t{18446744073709551615u}; },
                  "field 'workload.attrs.axis' is an integer past 2^63 - 1: 18446744073709551615"},
        Malformed{"NoTarget", [](json& j) { j.erase("target"); }, "field 'target' is missing"},
        Malformed{"TargetNumber", [](json& j) { j["target"] = 90; },
                  "field 'target' must be a string"},
        Malformed{"UnknownTarget", [](json& j) { j["target"] = "rocm"; },
                  "field 'target': unknown target 'rocm'"},
        Malformed{"NoSteps", [](json& j) { j.erase("steps"); }, "field 'steps' is missing"},
        Malformed{"StepsObject", [](json& j) { j["steps"] = json::object(); },
                  "field 'steps' must be a list of steps"},
        Malformed{"UnknownStep", [](json& j) { j["steps"][2][0] = "XX"; },
                  "field 'steps': step 2: unknown step prefix 'XX'"},
        Malformed{"StepArity", [](json& j) { j["steps"][0] = json::parse(R"(["SP", 2, 0])"); },
                  "field 'steps': step 0: "},
        Malformed{"StepFieldType", [](json& j) { j["steps"][3][1] = "C"; },
                  "field 'steps': step 3: field 1 of step 'AN' is not an integer"}),
    [](const ::testing::TestParamInfo<Malformed>& info) { return std::string(info.param.name); });

// The shipped examples are in canonical form (ToText reproduces them byte for byte), resolve, and
// compute what the naive program computes when lowered for their own target.
TEST(ExampleSchedules, AreCanonicalAndMatchTheNaiveProgram) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TS_EXAMPLE_SCHEDULES_DIR)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    ++count;
    absl::StatusOr<ScheduleFile> f = ScheduleFile::Load(entry.path().string());
    ASSERT_THAT(f, IsOk());
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(f->ToText(), text);
    absl::StatusOr<ResolvedSchedule> r = f->Resolve();
    ASSERT_THAT(r, IsOk());
    testing::ExpectMatchesReference(r->dag, r->state, f->target, /*exact=*/false, /*seed=*/3);
  }
  EXPECT_GE(count, 3);
}

TEST(ScheduleFileErrorsText, DeeplyNestedValuesGiveAShortErrorNotAStackOverflow) {
  // Error messages quote the offending value; json::dump of a list nested 100000 deep recurses
  // once per level and would overflow the stack. Each field that quotes a value is tried.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string workload_head = R"({"version": 1, "target": "cpu", "steps": [], "workload": )";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {workload_head + R"({"op": "matmul", "shapes": )" + deep + "}}", "workload.shapes"},
      {workload_head + R"({"op": "matmul", "shapes": [[4, 4], [4, 4]], "attrs": {"a": )" + deep +
           "}}}",
       "workload.attrs"},
      {workload_head + deep + "}", "workload"},
      {R"({"version": 1, "target": "cpu", "workload": {"op": "relu", "shapes": [[4]]}, "steps": [)" +
           deep + "]}",
       "step"},
      {R"({"version": )" + deep + "}", "version"},
  };
  for (const auto& [text, what] : cases) {
    absl::StatusOr<ScheduleFile> f = ScheduleFile::Parse(text, "deep.json");
    ASSERT_FALSE(f.ok()) << what;
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("deep.json")) << what;
    EXPECT_LT(f.status().message().size(), 400u) << f.status().message().substr(0, 400);
  }
}

TEST(ScheduleFileErrorsText, NotJson) {
  EXPECT_THAT(ScheduleFile::Parse("{\"version\": 1", "s.json"),
              StatusIs(kInvalid, StartsWith("s.json: not valid JSON: ")));
}

}  // namespace
}  // namespace tilesearch::schedule
