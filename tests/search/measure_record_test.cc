// Measure records: every field survives the JSON round trip, the line layout is the documented one
// (samples dropped, costs kept), each malformed field is refused with its name, a newer format
// version is refused with its own message, state hashes tell schedules apart, and throughput is
// FLOPs / median checked against hand-computed values. Round lines: the line layout (kind first,
// then the documented field order), NaN / -inf as null, and the kinds kept apart (a record line
// with "kind": "round" is refused and vice versa; "kind": "record" is accepted on records).
#include "search/measure_record.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tilesearch::search {
namespace {

using nlohmann::json;
using schedule::AnnotationStep;
using schedule::CacheWriteStep;
using schedule::IteratorAnnotation;
using schedule::ReorderStep;
using schedule::SplitStep;
using schedule::Step;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

std::vector<Step> TiledSteps(int64_t inner) {
  return {
      CacheWriteStep{2, ir::MemoryScope::kLocal},
      SplitStep{3, 0, 64, {16, inner}, true},
      ReorderStep{3, {0, 2, 1, 3}},
      AnnotationStep{3, 0, IteratorAnnotation::kBlockIdxX},
  };
}

// A valid record of a 64x48 · 48x32 matmul on an unusual CUDA target (every limit differs from
// the H200 defaults, so a reader that fills defaults would be caught).
MeasureRecord ValidRecord() {
  MeasureRecord r;
  r.workload_key = "0123456789abcdef";
  r.workload.op = "matmul";
  r.workload.args.shapes = {{64, 48}, {48, 32}};
  r.workload.args.attrs = {{"transpose_b", "false"}};
  r.target.kind = TargetKind::kCuda;
  r.target.arch = "sm_80";
  r.target.max_threads_per_block = 512;
  r.target.max_shared_memory_per_block = 40000;
  r.target.max_shared_memory_optin = 163840;
  r.target.max_registers_per_block = 32768;
  r.target.warp_size = 16;
  r.target.max_vthread_extent = 4;
  r.target.max_vector_bytes = 8;
  r.target.sm_count = 108;
  r.target.l2_bytes = int64_t{40} << 20;
  r.target.host_cores = 7;
  r.target.host_vector_bytes = 64;
  r.device_name = "NVIDIA A100-SXM4-40GB";
  r.steps = TiledSteps(4);
  r.result.costs_s = {0.0005, 0.00052, 0.00049};
  r.result.timing.samples_ms = {0.5, 0.52, 0.49};
  r.result.timing.runs = 3;
  r.result.timing.median_ms = 0.5;
  r.result.timing.mean_ms = 0.503;
  r.result.timing.min_ms = 0.49;
  r.result.timing.max_ms = 0.52;
  r.result.timing.p10_ms = 0.492;
  r.result.timing.p90_ms = 0.516;
  r.result.timing.stddev_ms = 0.015;
  r.result.compile_ms = 12.5;
  r.result.load_ms = 3.25;
  r.result.check_ms = 7;
  r.result.run_wall_ms = 40;
  r.result.check.trials = 2;
  r.result.check.max_abs_error = 1e-6;
  r.result.check.checked_elements = 4096;
  r.result.kernels.push_back({"main_kernel", 40, 8192, 0, 0, 1024});
  r.compile_ms = 15.75;
  r.run_ms = 41.5;
  r.timestamp = "2025-11-30T03:07:39.123Z";
  r.tilesearch_version = "0.5.0-test";
  r.seed = std::numeric_limits<uint64_t>::max();  // needs the unsigned range
  r.trial = 17;
  return r;
}

void ExpectSameTarget(const Target& a, const Target& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.max_threads_per_block, b.max_threads_per_block);
  EXPECT_EQ(a.max_shared_memory_per_block, b.max_shared_memory_per_block);
  EXPECT_EQ(a.max_shared_memory_optin, b.max_shared_memory_optin);
  EXPECT_EQ(a.max_registers_per_block, b.max_registers_per_block);
  EXPECT_EQ(a.warp_size, b.warp_size);
  EXPECT_EQ(a.max_vthread_extent, b.max_vthread_extent);
  EXPECT_EQ(a.max_vector_bytes, b.max_vector_bytes);
  EXPECT_EQ(a.sm_count, b.sm_count);
  EXPECT_EQ(a.l2_bytes, b.l2_bytes);
  EXPECT_EQ(a.host_cores, b.host_cores);
  EXPECT_EQ(a.host_vector_bytes, b.host_vector_bytes);
}

TEST(MeasureRecordJsonTest, RoundTripKeepsEveryField) {
  const MeasureRecord in = ValidRecord();
  absl::StatusOr<MeasureRecord> out = MeasureRecordFromLine(MeasureRecordToLine(in));
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->version, 1);
  EXPECT_EQ(out->workload_key, "0123456789abcdef");
  EXPECT_TRUE(out->workload == in.workload);
  ExpectSameTarget(out->target, in.target);
  EXPECT_EQ(out->device_name, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(out->steps, in.steps);
  EXPECT_EQ(out->result.error, measure::MeasureError::kNone);
  EXPECT_THAT(out->result.costs_s, ElementsAre(0.0005, 0.00052, 0.00049));
  EXPECT_TRUE(out->result.timing.samples_ms.empty());  // dropped to keep lines short
  EXPECT_EQ(out->result.timing.runs, 3);
  EXPECT_EQ(out->result.timing.median_ms, 0.5);
  EXPECT_EQ(out->result.timing.mean_ms, 0.503);
  EXPECT_EQ(out->result.timing.min_ms, 0.49);
  EXPECT_EQ(out->result.timing.max_ms, 0.52);
  EXPECT_EQ(out->result.timing.p10_ms, 0.492);
  EXPECT_EQ(out->result.timing.p90_ms, 0.516);
  EXPECT_EQ(out->result.timing.stddev_ms, 0.015);
  EXPECT_EQ(out->result.compile_ms, 12.5);
  EXPECT_EQ(out->result.load_ms, 3.25);
  EXPECT_EQ(out->result.check_ms, 7);
  EXPECT_EQ(out->result.run_wall_ms, 40);
  EXPECT_EQ(out->result.check.trials, 2);
  EXPECT_EQ(out->result.check.max_abs_error, 1e-6);
  EXPECT_EQ(out->result.check.checked_elements, 4096);
  ASSERT_EQ(out->result.kernels.size(), 1u);
  EXPECT_EQ(out->result.kernels[0].name, "main_kernel");
  EXPECT_EQ(out->result.kernels[0].registers_per_thread, 40);
  EXPECT_EQ(out->result.kernels[0].static_shared_bytes, 8192);
  EXPECT_EQ(out->compile_ms, 15.75);
  EXPECT_EQ(out->run_ms, 41.5);
  EXPECT_EQ(out->timestamp, "2025-11-30T03:07:39.123Z");
  EXPECT_EQ(out->tilesearch_version, "0.5.0-test");
  EXPECT_EQ(out->seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(out->trial, 17);
}

TEST(MeasureRecordJsonTest, RoundTripOfAFailedTrialOnTheHost) {
  MeasureRecord in;
  in.workload_key = "fedcba9876543210";
  in.workload.op = "softmax";
  in.workload.args.shapes = {{128, 256}};
  in.target = Target::HostCpu();
  in.target.host_cores = 2;
  in.steps = {};
  in.result.error = measure::MeasureError::kCompileError;
  in.result.message = "error: \"x\" undefined\n\tat line 3 \\ tab";
  in.timestamp = "2025-01-01T00:00:00.000Z";
  in.seed = 0;
  in.trial = 0;
  absl::StatusOr<MeasureRecord> out = MeasureRecordFromLine(MeasureRecordToLine(in));
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->target.kind, TargetKind::kCpu);
  EXPECT_EQ(out->target.arch, "x86-64");
  EXPECT_EQ(out->target.host_cores, 2);
  EXPECT_EQ(out->device_name, "");
  EXPECT_TRUE(out->steps.empty());
  EXPECT_EQ(out->result.error, measure::MeasureError::kCompileError);
  EXPECT_EQ(out->result.message, in.result.message);
  EXPECT_FALSE(out->valid());
  EXPECT_TRUE(std::isinf(out->median_ms()));
  EXPECT_EQ(out->tilesearch_version, kTilesearchVersion);
}

TEST(MeasureRecordJsonTest, LineLayoutIsTheDocumentedOne) {
  const std::string line = MeasureRecordToLine(ValidRecord());
  EXPECT_EQ(line.find('\n'), std::string::npos);
  // Top-level fields in the documented order, version first.
  EXPECT_EQ(line.rfind("{\"version\":1,\"workload_key\":\"0123456789abcdef\",\"workload\":", 0), 0u)
      << line;
  EXPECT_NE(line.find(",\"seed\":18446744073709551615,\"trial\":17}"), std::string::npos) << line;
  const json j = json::parse(line);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_THAT(keys,
              ::testing::UnorderedElementsAre("version", "workload_key", "workload", "precision",
                                              "target", "steps", "result", "compile_ms", "run_ms",
                                              "timestamp", "tilesearch_version", "seed", "trial"));
  EXPECT_NE(line.find("},\"precision\":\"ieee\",\"target\":"), std::string::npos) << line;
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["workload"]["op"], "matmul");
  EXPECT_EQ(j["workload"]["shapes"], json::parse("[[64, 48], [48, 32]]"));
  EXPECT_EQ(j["workload"]["dtype"], "float32");
  EXPECT_EQ(j["target"]["kind"], "cuda");
  EXPECT_EQ(j["target"]["arch"], "sm_80");
  EXPECT_EQ(j["target"]["device_name"], "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(j["target"]["max_threads_per_block"], 512);
  EXPECT_EQ(j["target"]["l2_bytes"], int64_t{40} << 20);
  ASSERT_TRUE(j["steps"].is_array());
  EXPECT_EQ(j["steps"].size(), 4u);
  EXPECT_EQ(j["steps"][1][0], "SP");
  EXPECT_EQ(j["steps"][1][4], json::parse("[16, 4]"));
  EXPECT_EQ(j["result"]["error"], "none");
  EXPECT_EQ(j["result"]["costs_s"], json::parse("[0.0005, 0.00052, 0.00049]"));
  EXPECT_FALSE(j["result"]["timing"].contains("samples_ms"));
  EXPECT_EQ(j["result"]["timing"]["median_ms"], 0.5);
  EXPECT_EQ(j["seed"], std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(j["trial"], 17);
}

TEST(MeasureRecordJsonTest, PrecisionRoundTripsIsIeeeWhenAbsentAndMustAgreeWithTheKey) {
  MeasureRecord tf32 = ValidRecord();
  tf32.precision = measure::Fp32Precision::kTf32;
  tf32.workload_key = measure::PrecisionWorkloadKey(tf32.workload_key, tf32.precision);
  EXPECT_EQ(tf32.workload_key, "0123456789abcdef-tf32");
  absl::StatusOr<MeasureRecord> back = MeasureRecordFromLine(MeasureRecordToLine(tf32));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->precision, measure::Fp32Precision::kTf32);
  EXPECT_EQ(back->workload_key, tf32.workload_key);
  // A line of an older log has no "precision": ieee.
  json old = MeasureRecordToJson(ValidRecord());
  old.erase("precision");
  back = MeasureRecordFromJson(old);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->precision, measure::Fp32Precision::kIeee);
  // The key and the precision must agree: neither can stand for the other precision's task.
  json lie = MeasureRecordToJson(ValidRecord());
  lie["precision"] = "tf32";
  EXPECT_THAT(
      MeasureRecordFromJson(lie),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("field 'precision': tf32 record with workload key 0123456789abcdef")));
  json untagged = MeasureRecordToJson(tf32);
  untagged.erase("precision");
  EXPECT_THAT(MeasureRecordFromJson(untagged),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ieee record")));
  json bad = MeasureRecordToJson(ValidRecord());
  bad["precision"] = "tf32x3";
  EXPECT_THAT(MeasureRecordFromJson(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'precision' must be \"ieee\" or \"tf32\"")));
}

TEST(MeasureRecordJsonTest, NewerVersionIsRefusedWithItsOwnMessage) {
  json j = MeasureRecordToJson(ValidRecord());
  j["version"] = 2;
  j["a_field_of_version_2"] = true;  // the version is checked before the fields
  EXPECT_THAT(MeasureRecordFromJson(j),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "log format version 2 is newer than this build reads (1)"));
}

// Each malformed field is refused with a message naming it.
TEST(MeasureRecordJsonTest, MalformedFieldsAreNamed) {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"version missing", [](json& j) { j.erase("version"); }, "field 'version' is missing"},
      {"version zero", [](json& j) { j["version"] = 0; }, "versions start at 1"},
      {"version text", [](json& j) { j["version"] = "1"; }, "field 'version' must be an integer"},
      {"trial missing", [](json& j) { j.erase("trial"); }, "field 'trial' is missing"},
      {"trial negative", [](json& j) { j["trial"] = -3; },
       "field 'trial' must be a non-negative integer, got -3"},
      {"seed text", [](json& j) { j["seed"] = "42"; },
       "field 'seed' must be a non-negative integer, got \"42\""},
      {"seed negative", [](json& j) { j["seed"] = -1; }, "field 'seed'"},
      {"unknown field", [](json& j) { j["colour"] = "blue"; }, "unknown field 'colour'"},
      {"key type", [](json& j) { j["workload_key"] = 7; }, "field 'workload_key' must be a string"},
      {"key empty", [](json& j) { j["workload_key"] = ""; }, "field 'workload_key'"},
      {"workload shapes", [](json& j) { j["workload"]["shapes"] = "64x48"; },
       "field 'workload.shapes'"},
      {"target string", [](json& j) { j["target"] = "cuda -arch=sm_90"; }, "field 'target'"},
      {"target kind", [](json& j) { j["target"]["kind"] = "tpu"; },
       "field 'target.kind' must be \"cuda\" or \"cpu\", got \"tpu\""},
      {"target arch missing", [](json& j) { j["target"].erase("arch"); },
       "field 'target.arch' is missing"},
      {"target limit type", [](json& j) { j["target"]["warp_size"] = 32.5; },
       "field 'target.warp_size'"},
      {"target limit missing", [](json& j) { j["target"].erase("sm_count"); },
       "field 'target.sm_count' is missing"},
      {"target unknown", [](json& j) { j["target"]["clock_mhz"] = 1980; },
       "unknown field 'target.clock_mhz'"},
      {"steps object", [](json& j) { j["steps"] = json::object(); }, "field 'steps'"},
      {"step prefix", [](json& j) { j["steps"][1][0] = "XX"; }, "unknown step prefix 'XX'"},
      {"result missing", [](json& j) { j.erase("result"); }, "field 'result' is missing"},
      {"result error kind", [](json& j) { j["result"]["error"] = "exploded"; },
       "field 'result.error': unknown measure error 'exploded'"},
      {"result median type", [](json& j) { j["result"]["timing"]["median_ms"] = "fast"; },
       "field 'result.timing.median_ms' is not a number"},
      {"result median tiny", [](json& j) { j["result"]["timing"]["median_ms"] = 1e-300; },
       "field 'result.timing.median_ms': 1e-300 ms is under a nanosecond"},
      {"compile_ms text", [](json& j) { j["compile_ms"] = "12"; }, "field 'compile_ms'"},
      {"run_ms negative", [](json& j) { j["run_ms"] = -1.0; }, "field 'run_ms'"},
      {"timestamp number", [](json& j) { j["timestamp"] = 1700000000; },
       "field 'timestamp' must be a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    json j = MeasureRecordToJson(ValidRecord());
    c.edit(j);
    EXPECT_THAT(MeasureRecordFromJson(j), StatusIs(kInvalid, HasSubstr(c.message)));
  }
  EXPECT_THAT(MeasureRecordFromJson(json::array()),
              StatusIs(kInvalid, HasSubstr("record is not a JSON object")));
  EXPECT_THAT(MeasureRecordFromLine("{\"version\": 1, \"workl"),
              StatusIs(kInvalid, HasSubstr("not valid JSON")));
}

TEST(RoundRecordJsonTest, LayoutNullsAndKinds) {
  RoundRecord r;
  r.workload_key = "0123456789abcdef";
  r.target = Target::HostCpu();
  r.round = 2;
  r.first_trial = 3;
  r.trials = 2;
  r.valid = 1;
  r.model = "random";
  r.predicted = {0.25, -std::numeric_limits<double>::infinity()};
  r.pairwise_accuracy = std::numeric_limits<double>::quiet_NaN();
  r.top_k_recall = 1;
  r.k = 1;
  r.model_validation_accuracy = std::numeric_limits<double>::quiet_NaN();
  r.timestamp = "2025-11-30T00:00:00.000Z";
  const std::string line = RoundRecordToLine(r);
  EXPECT_EQ(line.rfind(R"({"kind":"round","version":1,"workload_key":"0123456789abcdef",)", 0), 0u)
      << line;
  EXPECT_THAT(line, HasSubstr(R"("predicted":[0.25,null],"pairwise_accuracy":null,)"));
  const json j = json::parse(line);
  EXPECT_EQ(LogLineKind(j), "round");
  absl::StatusOr<RoundRecord> back = RoundRecordFromJson(j);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->round, 2);
  EXPECT_EQ(back->predicted[0], 0.25);
  EXPECT_EQ(back->predicted[1], -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(back->pairwise_accuracy));
  EXPECT_EQ(back->top_k_recall, 1);
  EXPECT_TRUE(SameTarget(back->target, Target::HostCpu()));

  // Kinds are kept apart.
  EXPECT_THAT(MeasureRecordFromJson(j),
              StatusIs(kInvalid, HasSubstr("field 'kind' must be \"record\" in a record, got "
                                           "\"round\"")));
  json record = MeasureRecordToJson(ValidRecord());
  EXPECT_EQ(LogLineKind(record), "record");
  EXPECT_THAT(RoundRecordFromJson(record), StatusIs(kInvalid, HasSubstr("unknown field")));
  record["kind"] = "record";
  EXPECT_THAT(MeasureRecordFromJson(record), IsOk());
  record["kind"] = "round";
  EXPECT_THAT(MeasureRecordFromJson(record),
              StatusIs(kInvalid, HasSubstr("field 'kind' must be \"record\" in a record")));
  json wrong = j;
  wrong["valid"] = 3;
  EXPECT_THAT(RoundRecordFromJson(wrong),
              StatusIs(kInvalid, HasSubstr("field 'valid' is 3, more than the round's 2 trials")));
  wrong = j;
  wrong["round"] = 0;
  EXPECT_THAT(RoundRecordFromJson(wrong),
              StatusIs(kInvalid, HasSubstr("field 'round' must be a positive integer, got 0")));
  wrong = j;
  wrong["predicted"][1] = "fast";
  EXPECT_THAT(RoundRecordFromJson(wrong),
              StatusIs(kInvalid, HasSubstr("field 'predicted': score 1 must be a number or null")));
  wrong = j;
  wrong["version"] = 2;
  EXPECT_THAT(RoundRecordFromJson(wrong), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                   HasSubstr("log format version 2 is newer")));
}

// A round line as logs before the local-search fields hold them (and as rounds without local
// search still write them), written out by hand.
constexpr char kOldRoundLine[] =
    R"({"kind":"round","version":1,"workload_key":"944c58f7abbc0045","target":{"arch":"x86-64",)"
    R"("device_name":"","host_cores":2,"host_vector_bytes":32,"kind":"cpu","l2_bytes":62914560,)"
    R"("max_registers_per_block":65536,"max_shared_memory_optin":232448,)"
    R"("max_shared_memory_per_block":49152,"max_threads_per_block":1024,"max_vector_bytes":16,)"
    R"("max_vthread_extent":8,"sm_count":132,"warp_size":32},"round":2,"first_trial":2,)"
    R"("trials":2,"valid":2,"model":"xgboost","model_trained":true,"train_samples":2,)"
    R"("train_programs":2,"boost_rounds":1,"model_validation_accuracy":null,)"
    R"("predicted":[0.25,0.5],"pairwise_accuracy":0.0,"top_k_recall":1.0,"k":1,"train_s":0.5,)"
    R"("search_s":1.5,"build_s":0.25,"measure_s":2.5,"timestamp":"2026-11-30T05:50:11.258Z",)"
    R"("tilesearch_version":"0.5.0-dev","seed":1})";

// An older cpu line as this build rewrites it: the same bytes without the GPU limits of its target
// (a cpu target is written without them).
std::string WithoutGpuLimits(const std::string& line) {
  static const std::regex gpu_limit(
      R"re(,"(l2_bytes|max_registers_per_block|max_shared_memory_optin|)re"
      R"re(max_shared_memory_per_block|max_threads_per_block|max_vector_bytes|)re"
      R"re(max_vthread_extent|sm_count|warp_size)":[0-9]+)re");
  return std::regex_replace(line, gpu_limit, "");
}

TEST(RoundRecordJsonTest, LineWithoutLocalSearchFieldsReadsAsNoneAndIsRewrittenUnchanged) {
  absl::StatusOr<RoundRecord> old = RoundRecordFromJson(json::parse(kOldRoundLine));
  ASSERT_THAT(old, IsOk());
  EXPECT_EQ(old->local_search_trials, 0);
  EXPECT_EQ(old->local_search_fraction, 0.0);
  EXPECT_EQ(old->trials, 2);
  // Local search off: the line is written byte for byte as before (less the cpu target's GPU
  // limits, which are 9 fields).
  const std::string rewritten = WithoutGpuLimits(kOldRoundLine);
  EXPECT_EQ(std::string(kOldRoundLine).size() - rewritten.size(),
            std::string(R"(,"l2_bytes":62914560,"max_registers_per_block":65536,)"
                        R"("max_shared_memory_optin":232448,"max_shared_memory_per_block":49152,)"
                        R"("max_threads_per_block":1024,"max_vector_bytes":16,)"
                        R"("max_vthread_extent":8,"sm_count":132,"warp_size":32)")
                .size());
  EXPECT_EQ(RoundRecordToLine(*old), rewritten);
  EXPECT_FALSE(RoundRecordToJson(*old).contains("local_search_trials"));
}

TEST(RoundRecordJsonTest, ModelInitRoundTripsAfterModelAndOldLinesReadWithout) {
  absl::StatusOr<RoundRecord> old = RoundRecordFromJson(json::parse(kOldRoundLine));
  ASSERT_THAT(old, IsOk());
  EXPECT_EQ(old->model_init, "");
  json j = json::parse(kOldRoundLine);
  j["model_init"] = "models/default-cuda-sm_90.model";
  absl::StatusOr<RoundRecord> r = RoundRecordFromJson(j);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->model_init, "models/default-cuda-sm_90.model");
  // The line as this build writes the old one (a cpu target without GPU limits), with model_init
  // right after the model.
  std::string want = RoundRecordToLine(*old);
  const std::string model = R"("model":"xgboost",)";
  want.insert(want.find(model) + model.size(),
              R"("model_init":"models/default-cuda-sm_90.model",)");
  EXPECT_EQ(RoundRecordToLine(*r), want);
  j["model_init"] = "";
  EXPECT_THAT(RoundRecordFromJson(j),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'model_init' must not be empty when given")));
  j["model_init"] = 3;
  EXPECT_THAT(RoundRecordFromJson(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("field 'model_init' must be a string")));
}

TEST(RoundRecordJsonTest, JudgeRoundTripsAfterKAndOldLinesReadWithout) {
  absl::StatusOr<RoundRecord> old = RoundRecordFromJson(json::parse(kOldRoundLine));
  ASSERT_THAT(old, IsOk());
  EXPECT_FALSE(old->judge.has_value());
  EXPECT_FALSE(RoundRecordToJson(*old).contains("judge"));
  RoundRecord r = *old;
  r.judge = RoundRecord::Judgement{0.25, 0.875, true};
  const std::string line = RoundRecordToLine(r);
  EXPECT_THAT(line, HasSubstr(R"(,"judge":{"cross_validated":true,"online":0.875,)"
                              R"("pretrained":0.25},"train_s":)"));
  absl::StatusOr<RoundRecord> back = RoundRecordFromJson(json::parse(line));
  ASSERT_THAT(back, IsOk());
  ASSERT_TRUE(back->judge.has_value());
  EXPECT_EQ(back->judge->pretrained, 0.25);
  EXPECT_EQ(back->judge->online, 0.875);
  EXPECT_TRUE(back->judge->cross_validated);
  EXPECT_EQ(RoundRecordToLine(*back), line);
  json wrong = json::parse(line);
  wrong["judge"]["online"] = 1.5;
  EXPECT_THAT(RoundRecordFromJson(wrong),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("in 'judge': field 'online' must be a number in [0, 1]")));
  wrong = json::parse(line);
  wrong["judge"].erase("pretrained");
  EXPECT_THAT(RoundRecordFromJson(wrong), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   HasSubstr("in 'judge': field 'pretrained'")));
  wrong = json::parse(line);
  wrong["judge"]["cross_validated"] = "yes";
  EXPECT_THAT(RoundRecordFromJson(wrong),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'judge.cross_validated' must be true or false")));
  wrong["judge"] = 3;
  EXPECT_THAT(RoundRecordFromJson(wrong), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   HasSubstr("field 'judge' must be an object")));
}

TEST(RoundRecordJsonTest, MeasureSplitRoundTripsAfterMeasureAndOldLinesReadWithout) {
  absl::StatusOr<RoundRecord> old = RoundRecordFromJson(json::parse(kOldRoundLine));
  ASSERT_THAT(old, IsOk());
  EXPECT_TRUE(old->measure_split.empty());
  EXPECT_FALSE(RoundRecordToJson(*old).contains("measure_split"));
  RoundRecord r = *old;
  r.measure_split.prepare_s = 0.5;
  r.measure_split.worker_setups = 2;
  r.measure_split.setup_s = 1.25;
  r.measure_split.items_s = 0.75;
  const std::string line = RoundRecordToLine(r);
  EXPECT_THAT(line, HasSubstr(R"("measure_s":2.5,"measure_split":{"items_s":0.75,)"
                              R"("prepare_s":0.5,"setup_s":1.25,"worker_setups":2},)"));
  absl::StatusOr<RoundRecord> back = RoundRecordFromJson(json::parse(line));
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->measure_split.prepare_s, 0.5);
  EXPECT_EQ(back->measure_split.worker_setups, 2);
  EXPECT_EQ(back->measure_split.setup_s, 1.25);
  EXPECT_EQ(back->measure_split.items_s, 0.75);
  json wrong = json::parse(line);
  wrong["measure_split"]["worker_setups"] = -1;
  EXPECT_THAT(RoundRecordFromJson(wrong),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'measure_split.worker_setups' must be a non-negative")));
  wrong["measure_split"] = 3;
  EXPECT_THAT(RoundRecordFromJson(wrong),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'measure_split' must be an object")));
}

TEST(RoundRecordJsonTest, LocalSearchFieldsRoundTripAfterValid) {
  json j = json::parse(kOldRoundLine);
  j["local_search_trials"] = 2;
  j["local_search_fraction"] = 0.5;
  absl::StatusOr<RoundRecord> r = RoundRecordFromJson(j);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->local_search_trials, 2);
  EXPECT_EQ(r->local_search_fraction, 0.5);
  // Written after "valid", everything else as in the line without them.
  std::string want = WithoutGpuLimits(kOldRoundLine);
  const std::string valid = R"("valid":2,)";
  want.insert(want.find(valid) + valid.size(),
              R"("local_search_trials":2,"local_search_fraction":0.5,)");
  EXPECT_EQ(RoundRecordToLine(*r), want);

  // A round of a local-search job that had nothing to start from (the first round of a log):
  // the fraction is still recorded, with 0 trials.
  RoundRecord first = *r;
  first.local_search_trials = 0;
  first.local_search_fraction = 1;
  const std::string line = RoundRecordToLine(first);
  EXPECT_THAT(line, HasSubstr(R"("valid":2,"local_search_trials":0,"local_search_fraction":1.0,)"));
  absl::StatusOr<RoundRecord> back = RoundRecordFromJson(json::parse(line));
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->local_search_trials, 0);
  EXPECT_EQ(back->local_search_fraction, 1.0);
}

TEST(RoundRecordJsonTest, LocalSearchFieldErrors) {
  const json base = json::parse(kOldRoundLine);
  struct Case {
    const char* what;
    json trials;    // null: field absent
    json fraction;  // null: field absent
    const char* message;
  };
  const Case cases[] = {
      {"more than the round", 3, 1.0,
       "field 'local_search_trials' is 3, more than the round's 2 trials"},
      {"negative", -1, 1.0, "field 'local_search_trials' must be a non-negative integer, got -1"},
      {"not an integer", 1.5, 1.0, "field 'local_search_trials' must be a non-negative integer"},
      {"fraction above 1", 1, 1.5, "field 'local_search_fraction' must be a number in [0, 1]"},
      {"fraction a string", 1, "half", "field 'local_search_fraction' must be a number in [0, 1]"},
      {"trials alone", 1, nullptr,
       "field 'local_search_fraction' is missing (local_search_trials is given)"},
      {"fraction alone", nullptr, 0.5,
       "field 'local_search_trials' is missing (local_search_fraction is given)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    json j = base;
    if (!c.trials.is_null()) j["local_search_trials"] = c.trials;
    if (!c.fraction.is_null()) j["local_search_fraction"] = c.fraction;
    EXPECT_THAT(RoundRecordFromJson(j), StatusIs(kInvalid, HasSubstr(c.message)));
  }
  json null_fraction = base;
  null_fraction["local_search_trials"] = 1;
  null_fraction["local_search_fraction"] = nullptr;
  EXPECT_THAT(RoundRecordFromJson(null_fraction),
              StatusIs(kInvalid, HasSubstr("field 'local_search_fraction' must be a number in "
                                           "[0, 1], got null")));
}

// Null is refused, so the message must not offer it: the whole message is checked.
TEST(RoundRecordJsonTest, LocalSearchFractionOutOfRangeMessageDoesNotOfferNull) {
  json j = json::parse(kOldRoundLine);
  j["local_search_trials"] = 1;
  j["local_search_fraction"] = 2;
  const absl::StatusOr<RoundRecord> r = RoundRecordFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(std::string(r.status().message()),
            "field 'local_search_fraction' must be a number in [0, 1], got 2");
}

// Local search gets ceil(fraction · n) trials, so trials > 0 at fraction 0 contradict each other;
// fraction > 0 with 0 trials is consistent (a first round has no measured state to start from).
TEST(RoundRecordJsonTest, LocalSearchTrialsAtFractionZeroAreRefusedNamingBothFields) {
  json j = json::parse(kOldRoundLine);
  j["local_search_trials"] = 1;
  j["local_search_fraction"] = 0;
  EXPECT_THAT(RoundRecordFromJson(j),
              StatusIs(kInvalid, AllOf(HasSubstr("field 'local_search_trials' is 1"),
                                       HasSubstr("field 'local_search_fraction' is 0"))));
  j["local_search_fraction"] = 0.0;
  EXPECT_THAT(RoundRecordFromJson(j),
              StatusIs(kInvalid, HasSubstr("'local_search_fraction' is 0")));
  j["local_search_trials"] = 0;
  absl::StatusOr<RoundRecord> none = RoundRecordFromJson(j);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->local_search_trials, 0);
  j["local_search_fraction"] = 0.25;
  ASSERT_TRUE(RoundRecordFromJson(j).ok());
}

TEST(MeasureRecordTest, TimestampIsIso8601Utc) {
  const std::string t = CurrentTimestamp();
  EXPECT_TRUE(std::regex_match(t, std::regex(R"(20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d\d\dZ)"))) << t;
}

// Independent FNV-1a 64 (offset basis and prime from the FNV specification).
uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

TEST(StateHashTest, EqualStepsHashEqualAndDifferentSplitsDiffer) {
  EXPECT_EQ(StepsHash(TiledSteps(4)), StepsHash(TiledSteps(4)));
  EXPECT_NE(StepsHash(TiledSteps(4)), StepsHash(TiledSteps(8)));
  EXPECT_NE(StepsCanonicalText(TiledSteps(4)), StepsCanonicalText(TiledSteps(8)));
  // One step fewer is another schedule too.
  std::vector<Step> shorter = TiledSteps(4);
  shorter.pop_back();
  EXPECT_NE(StepsHash(shorter), StepsHash(TiledSteps(4)));
  // The hash is FNV-1a of the canonical text, and the text parses back to the same steps.
  EXPECT_EQ(StepsHash(TiledSteps(4)), Fnv1a(StepsCanonicalText(TiledSteps(4))));
  const json parsed = json::parse(StepsCanonicalText(TiledSteps(4)));
  ASSERT_TRUE(parsed.is_array());
  EXPECT_EQ(parsed.size(), 4u);
  // A record read back from its line hashes as the one written (the tuner's duplicate check
  // after a resume).
  const MeasureRecord r = ValidRecord();
  absl::StatusOr<MeasureRecord> back = MeasureRecordFromLine(MeasureRecordToLine(r));
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(RecordStateHash(*back), RecordStateHash(r));
  EXPECT_EQ(RecordStateHash(r), StepsHash(TiledSteps(4)));
}

TEST(ThroughputTest, FlopsAndBytesPerSecondFromTheMedian) {
  MeasureRecord r = ValidRecord();
  absl::StatusOr<ir::ComputeDAG> dag = r.workload.Build();
  ASSERT_THAT(dag, IsOk());
  // Matmul 64x48 · 48x32: 2·64·32·48 FLOPs in 0.5 ms.
  const double flops = 2.0 * 64 * 32 * 48;
  EXPECT_DOUBLE_EQ(RecordThroughput(r, *dag), flops / 0.5e-3);
  // fp32 inputs 64·48 + 48·32 and output 64·32 elements, 4 bytes each.
  const double bytes = 4.0 * (64 * 48 + 48 * 32 + 64 * 32);
  EXPECT_DOUBLE_EQ(RecordBandwidth(r, *dag), bytes / 0.5e-3);
  r.result.error = measure::MeasureError::kWrongAnswer;
  EXPECT_EQ(RecordThroughput(r, *dag), 0);
  EXPECT_EQ(RecordBandwidth(r, *dag), 0);
  r.result.error = measure::MeasureError::kNone;
  r.result.timing.median_ms = 0;  // no usable time
  EXPECT_FALSE(r.valid());
  EXPECT_EQ(RecordThroughput(r, *dag), 0);
}

TEST(SameTargetTest, KindAndArchDecideLimitsDoNot) {
  Target a = Target::H200();
  Target b = Target::H200();
  b.sm_count = 1;
  EXPECT_TRUE(SameTarget(a, b));
  b.arch = "sm_80";
  EXPECT_FALSE(SameTarget(a, b));
  EXPECT_FALSE(SameTarget(a, Target::HostCpu()));
}

}  // namespace
}  // namespace tilesearch::search
