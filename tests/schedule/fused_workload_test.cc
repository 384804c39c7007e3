// Fused workloads (schedule/fused_workload.h): the JSON form (written exactly as documented, read
// back equal, old registry records unchanged), every structural and build error naming its field,
// and the built DAG computing dense + bias + relu as naive double loops do.
#include "schedule/fused_workload.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/reference.h"
#include "nlohmann/json.hpp"
#include "schedule/schedule_file.h"

namespace tilesearch::schedule {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

FusedOperand P(int i) { return FusedOperand{false, i}; }
FusedOperand N(int i) { return FusedOperand{true, i}; }

/// relu(dense(x[16, 32], w[24, 32]) + b[24]).
Workload DenseBiasRelu() {
  Workload w;
  w.op = kFusedWorkloadOp;
  w.args.shapes = {{16, 32}, {24, 32}, {24}};
  w.nodes = {{"dense", {P(0), P(1)}, {}}, {"add", {N(0), P(2)}, {}}, {"relu", {N(1)}, {}}};
  return w;
}

/// The documented JSON text of DenseBiasRelu (schedule/fused_workload.h).
const char kDenseBiasReluJson[] = R"({"op": "fused", "shapes": [[16, 32], [24, 32], [24]],
  "dtype": "float32", "attrs": {},
  "nodes": [{"op": "dense", "inputs": ["p0", "p1"], "attrs": {}},
            {"op": "add", "inputs": ["n0", "p2"], "attrs": {}},
            {"op": "relu", "inputs": ["n1"], "attrs": {}}]})";

TEST(FusedWorkloadJson, WritesTheDocumentedFormAndReadsItBackEqual) {
  const Workload w = DenseBiasRelu();
  EXPECT_EQ(WorkloadToJson(w), json::parse(kDenseBiasReluJson));
  absl::StatusOr<Workload> back = WorkloadFromJson(json::parse(kDenseBiasReluJson));
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(*back, w);
  EXPECT_TRUE(back->is_fused());
  EXPECT_EQ(back->nodes[1].inputs[0], N(0));
  EXPECT_EQ(back->nodes[1].inputs[1], P(2));

  // Node attributes: integers and booleans are read as text, like workload attributes.
  json j = json::parse(kDenseBiasReluJson);
  j["nodes"][2] = {{"op", "leaky_relu"}, {"inputs", {"n1"}}, {"attrs", {{"alpha", "0.25"}}}};
  j["nodes"][0]["attrs"] = {{"activation", "none"}};
  absl::StatusOr<Workload> with_attrs = WorkloadFromJson(j);
  ASSERT_THAT(with_attrs.status(), IsOk());
  EXPECT_EQ(with_attrs->nodes[2].attrs.at("alpha"), "0.25");
  EXPECT_EQ(WorkloadToJson(*with_attrs), j);
  // "attrs" of a node may be left out.
  j["nodes"][1].erase("attrs");
  absl::StatusOr<Workload> no_attrs = WorkloadFromJson(j);
  ASSERT_THAT(no_attrs.status(), IsOk());
  EXPECT_TRUE(no_attrs->nodes[1].attrs.empty());
}

TEST(FusedWorkloadJson, RegistryWorkloadsKeepTheirFourFields) {
  const json old = json::parse(
      R"({"op": "matmul", "shapes": [[64, 32], [32, 16]], "dtype": "float32",
          "attrs": {"transpose_b": "false"}})");
  absl::StatusOr<Workload> w = WorkloadFromJson(old);
  ASSERT_THAT(w.status(), IsOk());
  EXPECT_FALSE(w->is_fused());
  EXPECT_TRUE(w->nodes.empty());
  EXPECT_EQ(WorkloadToJson(*w), old);  // no "nodes" written
  EXPECT_EQ(w->ToString(), "matmul 64x32 32x16 float32 transpose_b=false");
}

TEST(FusedWorkloadJson, ToStringListsTheNodesThenShapesAndDtype) {
  Workload w = DenseBiasRelu();
  w.nodes[0].attrs["activation"] = "none";
  EXPECT_EQ(w.ToString(),
            "fused[dense(p0,p1){activation=none} add(n0,p2) relu(n1)] 16x32 24x32 24 float32");
}

TEST(FusedWorkloadJson, ScheduleFilesWithAFusedWorkloadRoundTrip) {
  ScheduleFile file;
  file.source = "fused.json";
  file.workload = DenseBiasRelu();
  file.target = Target::HostCpu();
  absl::StatusOr<ScheduleFile> back = ScheduleFile::Parse(file.ToText(), "fused.json");
  ASSERT_THAT(back.status(), IsOk()) << file.ToText();
  EXPECT_EQ(back->workload, file.workload);
  absl::StatusOr<ResolvedSchedule> resolved = back->Resolve();
  ASSERT_THAT(resolved.status(), IsOk());
  EXPECT_EQ(resolved->dag.input_ids().size(), 3u);
}

// One malformed field of the documented form → the message that names it.
struct JsonErrorCase {
  std::string name;
  std::function<void(json&)> edit;
  std::string message;
};

TEST(FusedWorkloadJson, MalformedFieldsAreNamed) {
  const std::vector<JsonErrorCase> cases = {
      {"nodes on a registry operator", [](json& j) { j["op"] = "matmul"; },
       "field 'workload.nodes' is only valid in a \"fused\" workload (op is 'matmul')"},
      {"no nodes", [](json& j) { j.erase("nodes"); },
       "field 'workload.nodes' is missing (a fused workload lists its operator nodes)"},
      {"empty nodes", [](json& j) { j["nodes"] = json::array(); },
       "field 'workload.nodes' must list at least one node"},
      {"nodes not a list", [](json& j) { j["nodes"] = 3; },
       "field 'workload.nodes' must be a list of nodes"},
      {"workload attrs",
       [](json& j) {
         j["attrs"] = {{"activation", "relu"}};
       },
       "field 'workload.attrs' must be empty in a fused workload"},
      {"node not an object", [](json& j) { j["nodes"][1] = "add"; },
       "field 'workload.nodes[1]' must be an object with fields op, inputs and attrs"},
      {"unknown node field", [](json& j) { j["nodes"][1]["axis"] = 1; },
       "unknown field 'workload.nodes[1].axis' (expected op, inputs, attrs)"},
      {"node without op", [](json& j) { j["nodes"][1].erase("op"); },
       "field 'workload.nodes[1].op' is missing"},
      {"unknown graph operator", [](json& j) { j["nodes"][1]["op"] = "addd"; },
       "field 'workload.nodes[1].op': unknown graph operator 'addd'"},
      {"node without inputs", [](json& j) { j["nodes"][2].erase("inputs"); },
       "field 'workload.nodes[2].inputs' is missing"},
      {"inputs not a list", [](json& j) { j["nodes"][2]["inputs"] = "n1"; },
       "field 'workload.nodes[2].inputs' must be a list of operands"},
      {"operand not a string", [](json& j) { j["nodes"][1]["inputs"][1] = 2; },
       "field 'workload.nodes[1].inputs[1]' must be \"p<index>\" or \"n<index>\", got 2"},
      {"bad operand text", [](json& j) { j["nodes"][1]["inputs"][1] = "x2"; },
       "field 'workload.nodes[1].inputs[1]' must be \"p<index>\" or \"n<index>\", got 'x2'"},
      {"leading zero", [](json& j) { j["nodes"][1]["inputs"][1] = "p02"; }, "got 'p02'"},
      {"placeholder out of range", [](json& j) { j["nodes"][1]["inputs"][1] = "p3"; },
       "field 'workload.nodes[1].inputs[1]': placeholder p3 does not exist (the workload has 3 "
       "shapes)"},
      {"forward reference", [](json& j) { j["nodes"][1]["inputs"][0] = "n2"; },
       "field 'workload.nodes[1].inputs[0]': n2 is not an earlier node"},
      {"self reference (a cycle)", [](json& j) { j["nodes"][1]["inputs"][0] = "n1"; },
       "field 'workload.nodes[1].inputs[0]': n1 is not an earlier node"},
      // The operator's input count is checked before the unread-placeholder rule, which would
      // otherwise blame p1 for a dense given one operand.
      {"too few inputs", [](json& j) { j["nodes"][0]["inputs"] = {"p0"}; },
       "field 'workload.nodes[0].inputs': dense takes 2 to 3 inputs, got 1"},
      {"no inputs", [](json& j) { j["nodes"][2]["inputs"] = json::array(); },
       "field 'workload.nodes[2].inputs': relu takes 1 input, got 0"},
      {"too many inputs",
       [](json& j) {
         j["nodes"][2]["inputs"] = {"n1", "p2"};
       },
       "field 'workload.nodes[2].inputs': relu takes 1 input, got 2"},
      {"bad node attribute",
       [](json& j) {
         j["nodes"][0]["attrs"] = {{"activation", 1.5}};
       },
       "field 'workload.nodes[0].attrs.activation' must be a string, an integer or a boolean"},
  };
  for (const JsonErrorCase& c : cases) {
    SCOPED_TRACE(c.name);
    json j = json::parse(kDenseBiasReluJson);
    c.edit(j);
    EXPECT_THAT(WorkloadFromJson(j), StatusIs(kInvalid, HasSubstr(c.message)));
  }
}

/// relu(x·wᵀ + b) in double, naive loops: x[M, K], w[N, K], b[N] → [M, N].
std::vector<double> NaiveDenseBiasRelu(const ir::HostBuffer& x, const ir::HostBuffer& w,
                                       const ir::HostBuffer& b, int m, int n, int k) {
  std::vector<double> out(m * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int r = 0; r < k; ++r) acc += x.data[i * k + r] * w.data[j * k + r];
      out[i * n + j] = std::max(0.0, acc + b.data[j]);
    }
  }
  return out;
}

TEST(FusedWorkloadBuild, ComputesDenseBiasReluLikeNaiveLoops) {
  absl::StatusOr<ir::ComputeDAG> dag = DenseBiasRelu().Build();
  ASSERT_THAT(dag.status(), IsOk());
  ASSERT_EQ(dag->input_ids().size(), 3u);
  // Kernel argument i is placeholder pI.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(dag->stage(dag->input_ids()[i]).name(), "p" + std::to_string(i));
  }
  ASSERT_EQ(dag->output_ids().size(), 1u);
  EXPECT_EQ(dag->stage(dag->output_ids()[0]).name(), "relu_2");
  const ir::BufferMap in = ir::MakeRandomInputs(*dag, 11);
  absl::StatusOr<ir::BufferMap> out = ir::RunReference(*dag, in);
  ASSERT_THAT(out.status(), IsOk());
  const ir::HostBuffer& y = out->at("relu_2");
  ASSERT_EQ(y.shape, (std::vector<int64_t>{16, 24}));
  const std::vector<double> want =
      NaiveDenseBiasRelu(in.at("p0"), in.at("p1"), in.at("p2"), 16, 24, 32);
  int positive = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(y.data[i], want[i], 1e-4) << "element " << i;
    positive += want[i] > 0;
  }
  EXPECT_GT(positive, 0);  // the relu does not zero everything
  EXPECT_LT(positive, static_cast<int>(want.size()));
}

TEST(FusedWorkloadBuild, ErrorsNameTheNodeOrPlaceholder) {
  {
    Workload w = DenseBiasRelu();
    w.args.shapes[1] = {24, 31};  // inner dimensions differ
    EXPECT_THAT(w.Build(), StatusIs(kInvalid, HasSubstr("fused workload: nodes[0] (dense): ")));
  }
  {
    Workload w = DenseBiasRelu();
    w.args.shapes[2] = {23};  // bias does not broadcast to [16, 24]
    EXPECT_THAT(w.Build(), StatusIs(kInvalid, HasSubstr("fused workload: nodes[1] (add): ")));
  }
  {
    Workload w = DenseBiasRelu();
    w.args.shapes.push_back({4});
    EXPECT_THAT(w.Build(), StatusIs(kInvalid, HasSubstr("placeholder p3 is not read by any node")));
  }
  {
    Workload w = DenseBiasRelu();
    w.nodes[2].inputs = {P(2)};  // relu of the bias: dense and add are dead
    EXPECT_THAT(w.Build(),
                StatusIs(kInvalid, HasSubstr("node n1 (add) is not read by a later node")));
  }
  {
    Workload w = DenseBiasRelu();
    w.nodes[0].inputs = {P(1), P(0)};  // dense(w, x): the DAG reads p1 first
    w.args.shapes = {{24, 32}, {16, 32}, {24}};
    EXPECT_THAT(w.Build(), StatusIs(kInvalid, HasSubstr("placeholders must be numbered in the "
                                                        "order the DAG reads them: it reads p1, "
                                                        "p0, p2")));
  }
  {
    Workload w = DenseBiasRelu();
    w.nodes[1].inputs[0] = N(2);
    EXPECT_THAT(w.Build(), StatusIs(kInvalid, HasSubstr("n2 is not an earlier node")));
  }
  {
    Workload w = DenseBiasRelu();
    w.nodes[0].inputs = {P(0)};  // dense of one operand
    EXPECT_THAT(w.Build(), StatusIs(kInvalid, HasSubstr("nodes[0].inputs': dense takes 2 to 3 "
                                                        "inputs, got 1")));
  }
  {
    Workload w = DenseBiasRelu();
    w.nodes[1].op = "addd";
    EXPECT_THAT(w.Build(), StatusIs(kInvalid, HasSubstr("unknown graph operator 'addd'")));
  }
  {
    Workload w = DenseBiasRelu();
    w.nodes[2].attrs["axis"] = "1";
    EXPECT_THAT(w.Build(), StatusIs(kInvalid, HasSubstr("nodes[2] (relu): ")));
  }
  {
    Workload w = DenseBiasRelu();
    w.args.attrs["activation"] = "relu";
    EXPECT_THAT(w.Build(),
                StatusIs(kInvalid, HasSubstr("fused workload: attributes belong to its nodes")));
  }
  {
    Workload w = DenseBiasRelu();
    w.op = "matmul";
    EXPECT_THAT(w.Build(), StatusIs(kInvalid, HasSubstr("workload 'matmul' lists nodes")));
  }
}

TEST(FusedWorkloadOperand, ParsesPlaceholdersAndNodes) {
  absl::StatusOr<FusedOperand> p12 = ParseFusedOperand("p12");
  ASSERT_THAT(p12.status(), IsOk());
  EXPECT_EQ(*p12, P(12));
  absl::StatusOr<FusedOperand> n0 = ParseFusedOperand("n0");
  ASSERT_THAT(n0.status(), IsOk());
  EXPECT_EQ(*n0, N(0));
  for (const char* bad : {"", "p", "n", "q1", "p-1", "p1x", "P1", "n00", "p99999999999"}) {
    EXPECT_THAT(ParseFusedOperand(bad), StatusIs(kInvalid, HasSubstr("must be \"p<index>\"")))
        << bad;
  }
}

}  // namespace
}  // namespace tilesearch::schedule
