// Measure records: JSON form (one line per trial), state hashes and throughput.
#include "search/measure_record.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "nlohmann/json.hpp"
#include "schedule/step_json.h"

namespace tilesearch::search {
namespace {

using nlohmann::json;

absl::Status FieldError(const std::string& field, const std::string& what) {
  const char* sep = !what.empty() && what[0] == ':' ? "" : " ";
  return absl::InvalidArgumentError(absl::StrCat("field '", field, "'", sep, what));
}

const json* Require(const json& j, const std::string& key, const std::string& field,
                    absl::Status* status) {
  if (!j.contains(key)) {
    *status = FieldError(field, "is missing");
    return nullptr;
  }
  return &j.at(key);
}

// Field readers: `field` is the full dotted name used in messages.
absl::Status ReadString(const json& obj, const std::string& key, const std::string& field,
                        std::string* out) {
  absl::Status status;
  const json* v = Require(obj, key, field, &status);
  if (v == nullptr) return status;
  if (!v->is_string()) return FieldError(field, "must be a string, got " + schedule::ShortJson(*v));
  *out = v->get<std::string>();
  return absl::OkStatus();
}

template <typename Int>
absl::Status ReadInt(const json& obj, const std::string& key, const std::string& field, Int* out,
                     int64_t min_value) {
  absl::Status status;
  const json* v = Require(obj, key, field, &status);
  if (v == nullptr) return status;
  const char* what =
      min_value > 0 ? "must be a positive integer, got " : "must be a non-negative integer, got ";
  if (!v->is_number_integer()) return FieldError(field, what + schedule::ShortJson(*v));
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<Int>::max())) {
      return FieldError(field, "is out of range, got " + schedule::ShortJson(*v));
    }
    if (min_value > 0 && u < static_cast<uint64_t>(min_value)) {
      return FieldError(field, what + schedule::ShortJson(*v));
    }
    *out = static_cast<Int>(u);
    return absl::OkStatus();
  }
  const int64_t s = v->get<int64_t>();
  if (s < min_value) return FieldError(field, what + schedule::ShortJson(*v));
  if (static_cast<uint64_t>(s) > static_cast<uint64_t>(std::numeric_limits<Int>::max())) {
    return FieldError(field, "is out of range, got " + schedule::ShortJson(*v));
  }
  *out = static_cast<Int>(s);
  return absl::OkStatus();
}

absl::Status ReadMs(const json& obj, const std::string& key, double* out) {
  absl::Status status;
  const json* v = Require(obj, key, key, &status);
  if (v == nullptr) return status;
  if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 0) {
    return FieldError(
        key, "must be a non-negative number of milliseconds, got " + schedule::ShortJson(*v));
  }
  *out = v->get<double>();
  return absl::OkStatus();
}

// Target limits, in the order they are written; `gpu` ones only in cuda targets.
struct LimitField {
  const char* name;
  bool gpu;
  int64_t (*get)(const Target&);
  void (*set)(Target&, int64_t);
};

#define TS_LIMIT(member, gpu)                                                   \
  LimitField {                                                                  \
#member, gpu, [](const Target& t) { return static_cast<int64_t>(t.member); }, \
        [](Target& t, int64_t v) { t.member = static_cast<decltype(t.member)>(v); } \
  }
const LimitField kLimitFields[] = {
    TS_LIMIT(max_threads_per_block, true),
    TS_LIMIT(max_shared_memory_per_block, true),
    TS_LIMIT(max_shared_memory_optin, true),
    TS_LIMIT(max_registers_per_block, true),
    TS_LIMIT(warp_size, true),
    TS_LIMIT(max_vthread_extent, true),
    TS_LIMIT(max_vector_bytes, true),
    TS_LIMIT(sm_count, true),
    TS_LIMIT(l2_bytes, true),
    TS_LIMIT(host_cores, false),
    TS_LIMIT(host_vector_bytes, false),
};
#undef TS_LIMIT

json TargetToJson(const Target& target, const std::string& device_name) {
  json j = {{"kind", target.kind == TargetKind::kCuda ? "cuda" : "cpu"},
            {"arch", target.arch},
            {"device_name", device_name}};
  for (const LimitField& f : kLimitFields) {
    if (f.gpu && !target.is_gpu()) continue;  // a cpu target has no SMs, warps or shared memory
    j[f.name] = f.get(target);
  }
  return j;
}

// Appends the fields of object `j` not in `allowed` to `unknown` (as prefix + name); with no
// `unknown` to report them to, the first one is an error.
absl::Status UnknownKeys(const json& j, const std::vector<std::string>& allowed,
                         const std::string& prefix, std::vector<std::string>* unknown) {
  if (unknown == nullptr) return schedule::CheckJsonKeys(j, allowed, prefix);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
      unknown->push_back(prefix + it.key());
    }
  }
  return absl::OkStatus();
}

absl::Status TargetFromJson(const json& j, Target* target, std::string* device_name,
                            std::vector<std::string>* unknown) {
  if (!j.is_object()) {
    return FieldError(
        "target", "must be an object with kind, arch and limits, got " + schedule::ShortJson(j));
  }
  std::vector<std::string> allowed = {"kind", "arch", "device_name"};
  for (const LimitField& f : kLimitFields) allowed.push_back(f.name);
  RETURN_IF_ERROR(UnknownKeys(j, allowed, "target.", unknown));
  std::string kind;
  RETURN_IF_ERROR(ReadString(j, "kind", "target.kind", &kind));
  if (kind == "cuda") {
    target->kind = TargetKind::kCuda;
  } else if (kind == "cpu") {
    target->kind = TargetKind::kCpu;
  } else {
    return FieldError("target.kind", "must be \"cuda\" or \"cpu\", got " + json(kind).dump());
  }
  RETURN_IF_ERROR(ReadString(j, "arch", "target.arch", &target->arch));
  device_name->clear();
  if (j.contains("device_name")) {
    RETURN_IF_ERROR(ReadString(j, "device_name", "target.device_name", device_name));
  }
  for (const LimitField& f : kLimitFields) {
    // Cpu targets are written without GPU limits; older logs have them (read, unused).
    if (f.gpu && !target->is_gpu() && !j.contains(f.name)) {
      f.set(*target, f.get(Target{}));
      continue;
    }
    int64_t v = 0;
    RETURN_IF_ERROR(ReadInt(j, f.name, absl::StrCat("target.", f.name), &v, 0));
    f.set(*target, v);
  }
  return absl::OkStatus();
}

// Top-level fields of a record, in the order lines are written.
constexpr const char* kRecordFields[] = {
    "version",    "workload_key", "workload",  "precision",          "target", "steps", "result",
    "compile_ms", "run_ms",       "timestamp", "tilesearch_version", "seed",   "trial", "untuned",
    "remeasured", "final_timing"};

// The "version" of a log line, checked first: a newer line may have fields this build does not
// know.
absl::StatusOr<int> ReadVersion(const json& j) {
  if (!j.contains("version")) return FieldError("version", "is missing");
  const json& version = j.at("version");
  if (!version.is_number_integer()) {
    return FieldError("version", "must be an integer, got " + schedule::ShortJson(version));
  }
  if (version.is_number_unsigned() ? version.get<uint64_t>() > kLogFormatVersion
                                   : version.get<int64_t>() > kLogFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("log format version ", schedule::ShortJson(version),
                     " is newer than this build reads (", kLogFormatVersion, ")"));
  }
  if (version.get<int64_t>() < 1) {
    return FieldError("version", absl::StrCat(": ", schedule::ShortJson(version),
                                              " is not valid (versions start at 1)"));
  }
  return version.get<int>();
}

// A finite number or null (NaN) in JSON; infinite values become null too.
json NumberOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// Reads a number that may be null (→ NaN); when `unit_interval`, it must lie in [0, 1].
absl::Status ReadNumberOrNull(const json& obj, const std::string& key, bool unit_interval,
                              double* out) {
  absl::Status status;
  const json* v = Require(obj, key, key, &status);
  if (v == nullptr) return status;
  if (v->is_null()) {
    *out = std::numeric_limits<double>::quiet_NaN();
    return absl::OkStatus();
  }
  const char* what =
      unit_interval ? "must be a number in [0, 1] or null, got " : "must be a number or null, got ";
  if (!v->is_number()) return FieldError(key, what + schedule::ShortJson(*v));
  const double d = v->get<double>();
  if (unit_interval && !(d >= 0 && d <= 1)) return FieldError(key, what + schedule::ShortJson(*v));
  *out = d;
  return absl::OkStatus();
}

absl::Status ReadSeconds(const json& obj, const std::string& key, double* out) {
  absl::Status status;
  const json* v = Require(obj, key, key, &status);
  if (v == nullptr) return status;
  if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 0) {
    return FieldError(key,
                      "must be a non-negative number of seconds, got " + schedule::ShortJson(*v));
  }
  *out = v->get<double>();
  return absl::OkStatus();
}

// Fields of a round line, in the order they are written.
constexpr const char* kRoundFields[] = {"kind",
                                        "version",
                                        "workload_key",
                                        "target",
                                        "round",
                                        "first_trial",
                                        "trials",
                                        "valid",
                                        "local_search_trials",
                                        "local_search_fraction",
                                        "tensor_core_share",
                                        "model",
                                        "model_init",
                                        "model_trained",
                                        "train_samples",
                                        "train_programs",
                                        "boost_rounds",
                                        "model_validation_accuracy",
                                        "predicted",
                                        "pairwise_accuracy",
                                        "top_k_recall",
                                        "k",
                                        "judge",
                                        "train_s",
                                        "search_s",
                                        "build_s",
                                        "measure_s",
                                        "overlapped",
                                        "measure_split",
                                        "ranks",
                                        "timestamp",
                                        "tilesearch_version",
                                        "seed"};

// The object's top-level fields in `order` (those it has: optional ones may be absent), nested
// objects in nlohmann's sorted order; invalid UTF-8 replaced rather than throwing.
template <size_t N>
std::string OrderedLine(const json& j, const char* const (&order)[N]) {
  std::string line = "{";
  bool first = true;
  size_t written = 0;
  for (const char* key : order) {
    if (!j.contains(key)) continue;
    ++written;
    if (!first) line += ',';
    first = false;
    absl::StrAppend(&line, json(key).dump(), ":",
                    j.at(key).dump(-1, ' ', false, json::error_handler_t::replace));
  }
  CHECK(written == j.size()) << "a log line field is missing from the write order";
  return line + "}";
}

json StepArray(const std::vector<schedule::Step>& steps) {
  json list = json::array();
  for (const schedule::Step& s : steps) list.push_back(schedule::StepToJson(s));
  return list;
}

}  // namespace

namespace {

// The optional "precision" of a record (absent: ieee), which its workload key must agree with.
absl::Status ReadPrecision(const json& j, const std::string& workload_key,
                           measure::Fp32Precision* out) {
  if (j.contains("precision")) {
    const json& p = j.at("precision");
    absl::StatusOr<measure::Fp32Precision> parsed =
        p.is_string() ? measure::ParseFp32Precision(p.get<std::string>())
                      : absl::InvalidArgumentError("not a string");
    if (!parsed.ok()) {
      return FieldError("precision", "must be \"ieee\" or \"tf32\", got " + schedule::ShortJson(p));
    }
    *out = *parsed;
  }
  const bool tf32_key =
      workload_key.size() > 5 && workload_key.compare(workload_key.size() - 5, 5, "-tf32") == 0;
  if (tf32_key != (*out == measure::Fp32Precision::kTf32)) {
    return FieldError("precision", absl::StrCat(": ", measure::Fp32PrecisionName(*out),
                                                " record with workload key ", workload_key,
                                                " (a tf32 record's key ends in -tf32, an ieee "
                                                "one's does not)"));
  }
  return absl::OkStatus();
}

}  // namespace

bool MeasureRecord::valid() const {
  return result.ok() && std::isfinite(result.timing.median_ms) && result.timing.median_ms > 0;
}

double MeasureRecord::median_ms() const {
  return valid() ? result.timing.median_ms : std::numeric_limits<double>::infinity();
}

json MeasureRecordToJson(const MeasureRecord& record) {
  json result = measure::MeasureResultToJson(record.result);
  if (result.contains("timing") && result["timing"].is_object()) {
    result["timing"].erase("samples_ms");
  }
  json j{{"version", record.version},
         {"workload_key", record.workload_key},
         {"workload", schedule::WorkloadToJson(record.workload)},
         {"precision", measure::Fp32PrecisionName(record.precision)},
         {"target", TargetToJson(record.target, record.device_name)},
         {"steps", StepArray(record.steps)},
         {"result", std::move(result)},
         {"compile_ms", record.compile_ms},
         {"run_ms", record.run_ms},
         {"timestamp", record.timestamp},
         {"tilesearch_version", record.tilesearch_version},
         {"seed", record.seed},
         {"trial", record.trial}};
  if (record.untuned) j["untuned"] = true;  // only the untuned program's record carries it
  if (record.remeasured) j["remeasured"] = true;
  if (record.final_timing) j["final_timing"] = true;
  return j;
}

std::string MeasureRecordToLine(const MeasureRecord& record) {
  // Top-level fields in the documented order (version first, for people reading logs); nested
  // objects keep nlohmann's sorted order. Invalid UTF-8 in messages (compiler output) is
  // replaced rather than throwing.
  return OrderedLine(MeasureRecordToJson(record), kRecordFields);
}

absl::StatusOr<MeasureRecord> MeasureRecordFromJson(const json& j,
                                                    std::vector<std::string>* unknown_fields) {
  if (!j.is_object()) return absl::InvalidArgumentError("record is not a JSON object");
  MeasureRecord r;
  ASSIGN_OR_RETURN(r.version, ReadVersion(j));
  if (j.contains("kind") && LogLineKind(j) != "record") {
    return FieldError("kind",
                      "must be \"record\" in a record, got " + schedule::ShortJson(j.at("kind")));
  }
  std::vector<std::string> allowed(std::begin(kRecordFields), std::end(kRecordFields));
  allowed.push_back("kind");
  RETURN_IF_ERROR(UnknownKeys(j, allowed, "", unknown_fields));
  RETURN_IF_ERROR(ReadString(j, "workload_key", "workload_key", &r.workload_key));
  if (r.workload_key.empty()) return FieldError("workload_key", "must not be empty");
  if (!j.contains("workload")) return FieldError("workload", "is missing");
  ASSIGN_OR_RETURN(r.workload, schedule::WorkloadFromJson(j.at("workload"), "workload"));
  RETURN_IF_ERROR(ReadPrecision(j, r.workload_key, &r.precision));
  if (!j.contains("target")) return FieldError("target", "is missing");
  RETURN_IF_ERROR(TargetFromJson(j.at("target"), &r.target, &r.device_name, unknown_fields));
  if (!j.contains("steps")) return FieldError("steps", "is missing");
  if (!j.at("steps").is_array()) {
    return FieldError("steps",
                      "must be a list of steps, got " + schedule::ShortJson(j.at("steps")));
  }
  // Version-1 records hold steps of step-list format version 1.
  absl::StatusOr<std::vector<schedule::Step>> steps =
      schedule::StepsFromJson(json{{"version", 1}, {"steps", j.at("steps")}});
  if (!steps.ok()) return FieldError("steps", absl::StrCat(": ", steps.status().message()));
  r.steps = *std::move(steps);
  if (!j.contains("result")) return FieldError("result", "is missing");
  absl::StatusOr<measure::MeasureResult> result = measure::MeasureResultFromJson(j.at("result"));
  if (!result.ok()) {
    // "measure result field 'timing.median_ms' is not a number" → "field 'result.timing...".
    std::string message(result.status().message());
    const std::string prefix = "measure result field '";
    if (message.rfind(prefix, 0) == 0) {
      return absl::InvalidArgumentError("field 'result." + message.substr(prefix.size()));
    }
    return FieldError("result", ": " + message);
  }
  r.result = *std::move(result);
  // No kernel finishes in under a nanosecond: such a time is a damaged record, and taken as the
  // best it would print absurd throughputs (a zero or negative time makes the record invalid).
  if (const double ms = r.result.timing.median_ms; r.result.ok() && ms > 0 && ms < 1e-6) {
    return FieldError("result.timing.median_ms",
                      absl::StrCat(": ", ms, " ms is under a nanosecond (a damaged record)"));
  }
  RETURN_IF_ERROR(ReadMs(j, "compile_ms", &r.compile_ms));
  RETURN_IF_ERROR(ReadMs(j, "run_ms", &r.run_ms));
  RETURN_IF_ERROR(ReadString(j, "timestamp", "timestamp", &r.timestamp));
  RETURN_IF_ERROR(ReadString(j, "tilesearch_version", "tilesearch_version", &r.tilesearch_version));
  RETURN_IF_ERROR(ReadInt(j, "seed", "seed", &r.seed, 0));
  RETURN_IF_ERROR(ReadInt(j, "trial", "trial", &r.trial, 0));
  if (j.contains("untuned")) {
    if (!j.at("untuned").is_boolean()) {
      return FieldError("untuned",
                        "must be true or false, got " + schedule::ShortJson(j.at("untuned")));
    }
    r.untuned = j.at("untuned").get<bool>();
  }
  if (j.contains("remeasured")) {
    if (!j.at("remeasured").is_boolean()) {
      return FieldError("remeasured",
                        "must be true or false, got " + schedule::ShortJson(j.at("remeasured")));
    }
    r.remeasured = j.at("remeasured").get<bool>();
  }
  if (j.contains("final_timing")) {
    if (!j.at("final_timing").is_boolean()) {
      return FieldError("final_timing",
                        "must be true or false, got " + schedule::ShortJson(j.at("final_timing")));
    }
    r.final_timing = j.at("final_timing").get<bool>();
    if (r.final_timing && !r.remeasured) {
      return FieldError("final_timing", "is true on a record that is not \"remeasured\"");
    }
  }
  return r;
}

absl::StatusOr<MeasureRecord> MeasureRecordFromLine(const std::string& line) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not valid JSON: ", e.what()));
  }
  return MeasureRecordFromJson(j);
}

std::string LogLineKind(const json& j) {
  if (!j.is_object()) return "";
  if (!j.contains("kind")) return "record";
  const json& kind = j.at("kind");
  return kind.is_string() ? kind.get<std::string>() : "";
}

json RoundRecordToJson(const RoundRecord& round) {
  json predicted = json::array();
  for (double p : round.predicted) predicted.push_back(NumberOrNull(p));
  json j{{"kind", "round"},
         {"version", round.version},
         {"workload_key", round.workload_key},
         {"target", TargetToJson(round.target, round.device_name)},
         {"round", round.round},
         {"first_trial", round.first_trial},
         {"trials", round.trials},
         {"valid", round.valid},
         {"model", round.model},
         {"model_trained", round.model_trained},
         {"train_samples", round.train_samples},
         {"train_programs", round.train_programs},
         {"boost_rounds", round.boost_rounds},
         {"model_validation_accuracy", NumberOrNull(round.model_validation_accuracy)},
         {"predicted", std::move(predicted)},
         {"pairwise_accuracy", NumberOrNull(round.pairwise_accuracy)},
         {"top_k_recall", NumberOrNull(round.top_k_recall)},
         {"k", round.k},
         {"train_s", round.train_s},
         {"search_s", round.search_s},
         {"build_s", round.build_s},
         {"measure_s", round.measure_s},
         {"timestamp", round.timestamp},
         {"tilesearch_version", round.tilesearch_version},
         {"seed", round.seed}};
  // Only rounds tuned with local search on carry its fields: other lines stay as before.
  if (!round.model_init.empty()) j["model_init"] = round.model_init;
  if (round.judge.has_value()) {
    j["judge"] = {{"pretrained", NumberOrNull(round.judge->pretrained)},
                  {"online", NumberOrNull(round.judge->online)},
                  {"cross_validated", round.judge->cross_validated}};
  }
  if (round.overlapped) j["overlapped"] = true;
  if (!round.measure_split.empty()) {
    const MeasureSplit& m = round.measure_split;
    j["measure_split"] = {{"prepare_s", m.prepare_s},
                          {"worker_setups", m.worker_setups},
                          {"setup_s", m.setup_s},
                          {"items_s", m.items_s}};
  }
  if (round.tensor_core_share >= 0) j["tensor_core_share"] = round.tensor_core_share;
  if (!round.ranks.empty()) {
    json ranks = json::array();
    for (const RankTiming& t : round.ranks) {
      ranks.push_back({{"rank", t.rank},
                       {"trials", t.trials},
                       {"build_s", t.build_s},
                       {"measure_s", t.measure_s},
                       {"idle_s", t.idle_s}});
    }
    j["ranks"] = std::move(ranks);
  }
  if (round.local_search_fraction > 0 || round.local_search_trials > 0) {
    j["local_search_trials"] = round.local_search_trials;
    j["local_search_fraction"] = NumberOrNull(round.local_search_fraction);
  }
  return j;
}

std::string RoundRecordToLine(const RoundRecord& round) {
  return OrderedLine(RoundRecordToJson(round), kRoundFields);
}

namespace {

// The optional "ranks" list of a round line (RoundRecord::ranks).
absl::Status ReadRankTimings(const json& list, std::vector<RankTiming>* out) {
  if (!list.is_array()) {
    return FieldError("ranks", "must be a list of objects, got " + schedule::ShortJson(list));
  }
  for (const json& item : list) {
    if (!item.is_object()) {
      return FieldError("ranks", "must hold objects, got " + schedule::ShortJson(item));
    }
    RankTiming t;
    int64_t rank = 0;
    RETURN_IF_ERROR(ReadInt(item, "rank", "ranks.rank", &rank, 0));
    t.rank = static_cast<int>(rank);
    RETURN_IF_ERROR(ReadInt(item, "trials", "ranks.trials", &t.trials, 0));
    RETURN_IF_ERROR(ReadSeconds(item, "build_s", &t.build_s));
    RETURN_IF_ERROR(ReadSeconds(item, "measure_s", &t.measure_s));
    RETURN_IF_ERROR(ReadSeconds(item, "idle_s", &t.idle_s));
    out->push_back(t);
  }
  return absl::OkStatus();
}

}  // namespace

json TargetToRecordJson(const Target& target, const std::string& device_name) {
  return TargetToJson(target, device_name);
}

absl::StatusOr<Target> TargetFromRecordJson(const json& j) {
  Target target;
  std::string device_name;
  RETURN_IF_ERROR(TargetFromJson(j, &target, &device_name, nullptr));
  return target;
}

absl::StatusOr<RoundRecord> RoundRecordFromJson(const json& j,
                                                std::vector<std::string>* unknown_fields) {
  if (!j.is_object()) return absl::InvalidArgumentError("round line is not a JSON object");
  RoundRecord r;
  ASSIGN_OR_RETURN(r.version, ReadVersion(j));
  RETURN_IF_ERROR(
      UnknownKeys(j, std::vector<std::string>(std::begin(kRoundFields), std::end(kRoundFields)), "",
                  unknown_fields));
  if (LogLineKind(j) != "round") {
    return FieldError("kind",
                      "must be \"round\", got " +
                          (j.contains("kind") ? schedule::ShortJson(j.at("kind")) : "nothing"));
  }
  RETURN_IF_ERROR(ReadString(j, "workload_key", "workload_key", &r.workload_key));
  if (r.workload_key.empty()) return FieldError("workload_key", "must not be empty");
  if (!j.contains("target")) return FieldError("target", "is missing");
  RETURN_IF_ERROR(TargetFromJson(j.at("target"), &r.target, &r.device_name, unknown_fields));
  RETURN_IF_ERROR(ReadInt(j, "round", "round", &r.round, 1));
  RETURN_IF_ERROR(ReadInt(j, "first_trial", "first_trial", &r.first_trial, 0));
  RETURN_IF_ERROR(ReadInt(j, "trials", "trials", &r.trials, 0));
  RETURN_IF_ERROR(ReadInt(j, "valid", "valid", &r.valid, 0));
  if (r.valid > r.trials) {
    return FieldError(
        "valid", absl::StrCat("is ", r.valid, ", more than the round's ", r.trials, " trials"));
  }
  // Optional, together: absent in lines of rounds without local search (and in older logs).
  const bool has_local_trials = j.contains("local_search_trials");
  const bool has_local_fraction = j.contains("local_search_fraction");
  if (has_local_trials != has_local_fraction) {
    return has_local_trials
               ? FieldError("local_search_fraction", "is missing (local_search_trials is given)")
               : FieldError("local_search_trials", "is missing (local_search_fraction is given)");
  }
  if (has_local_trials) {
    RETURN_IF_ERROR(
        ReadInt(j, "local_search_trials", "local_search_trials", &r.local_search_trials, 0));
    if (r.local_search_trials > r.trials) {
      return FieldError("local_search_trials",
                        absl::StrCat("is ", r.local_search_trials, ", more than the round's ",
                                     r.trials, " trials"));
    }
    // A number in [0, 1]; null (unlike the accuracies' null = "not measured") is refused.
    const json& fraction = j.at("local_search_fraction");
    if (!fraction.is_number() || !(fraction.get<double>() >= 0 && fraction.get<double>() <= 1)) {
      return FieldError("local_search_fraction",
                        "must be a number in [0, 1], got " + schedule::ShortJson(fraction));
    }
    r.local_search_fraction = fraction.get<double>();
    // The tuner gives local search ceil(fraction · n) trials: none at fraction 0.
    if (r.local_search_fraction == 0 && r.local_search_trials > 0) {
      return FieldError("local_search_trials",
                        absl::StrCat("is ", r.local_search_trials,
                                     " but field 'local_search_fraction' is 0 (no local search "
                                     "trials at fraction 0)"));
    }
  }
  if (j.contains("tensor_core_share")) {
    const json& share = j.at("tensor_core_share");
    if (!share.is_number() || !(share.get<double>() >= 0 && share.get<double>() <= 1)) {
      return FieldError("tensor_core_share",
                        "must be a number in [0, 1], got " + schedule::ShortJson(share));
    }
    r.tensor_core_share = share.get<double>();
  }
  RETURN_IF_ERROR(ReadString(j, "model", "model", &r.model));
  if (j.contains("model_init")) {
    RETURN_IF_ERROR(ReadString(j, "model_init", "model_init", &r.model_init));
    if (r.model_init.empty()) return FieldError("model_init", "must not be empty when given");
  }
  if (!j.contains("model_trained")) return FieldError("model_trained", "is missing");
  if (!j.at("model_trained").is_boolean()) {
    return FieldError("model_trained",
                      "must be true or false, got " + schedule::ShortJson(j.at("model_trained")));
  }
  r.model_trained = j.at("model_trained").get<bool>();
  RETURN_IF_ERROR(ReadInt(j, "train_samples", "train_samples", &r.train_samples, 0));
  RETURN_IF_ERROR(ReadInt(j, "train_programs", "train_programs", &r.train_programs, 0));
  RETURN_IF_ERROR(ReadInt(j, "boost_rounds", "boost_rounds", &r.boost_rounds, 0));
  RETURN_IF_ERROR(
      ReadNumberOrNull(j, "model_validation_accuracy", true, &r.model_validation_accuracy));
  if (!j.contains("predicted")) return FieldError("predicted", "is missing");
  const json& predicted = j.at("predicted");
  if (!predicted.is_array()) {
    return FieldError("predicted",
                      "must be a list of numbers, got " + schedule::ShortJson(predicted));
  }
  if (static_cast<int64_t>(predicted.size()) != r.trials) {
    return FieldError("predicted",
                      absl::StrCat("has ", predicted.size(), " scores for ", r.trials, " trials"));
  }
  for (size_t i = 0; i < predicted.size(); ++i) {
    const json& p = predicted[i];
    if (p.is_null()) {
      r.predicted.push_back(-std::numeric_limits<double>::infinity());
    } else if (p.is_number()) {
      r.predicted.push_back(p.get<double>());
    } else {
      return FieldError("predicted", absl::StrCat(": score ", i, " must be a number or null, got ",
                                                  schedule::ShortJson(p)));
    }
  }
  RETURN_IF_ERROR(ReadNumberOrNull(j, "pairwise_accuracy", true, &r.pairwise_accuracy));
  RETURN_IF_ERROR(ReadNumberOrNull(j, "top_k_recall", true, &r.top_k_recall));
  RETURN_IF_ERROR(ReadInt(j, "k", "k", &r.k, 0));
  if (j.contains("judge")) {  // optional: judged rounds of tunes with a pretrained model
    const json& g = j.at("judge");
    if (!g.is_object())
      return FieldError("judge", "must be an object, got " + schedule::ShortJson(g));
    RoundRecord::Judgement judge;
    for (auto [key, out] :
         {std::pair{"pretrained", &judge.pretrained}, std::pair{"online", &judge.online}}) {
      if (absl::Status st = ReadNumberOrNull(g, key, true, out); !st.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("in 'judge': ", st.message()));
      }
    }
    if (!g.contains("cross_validated") || !g.at("cross_validated").is_boolean()) {
      return FieldError("judge.cross_validated", "must be true or false");
    }
    judge.cross_validated = g.at("cross_validated").get<bool>();
    r.judge = judge;
  }
  RETURN_IF_ERROR(ReadSeconds(j, "train_s", &r.train_s));
  RETURN_IF_ERROR(ReadSeconds(j, "search_s", &r.search_s));
  RETURN_IF_ERROR(ReadSeconds(j, "build_s", &r.build_s));
  RETURN_IF_ERROR(ReadSeconds(j, "measure_s", &r.measure_s));
  if (j.contains("overlapped")) {  // optional: written only when true
    if (!j.at("overlapped").is_boolean()) {
      return FieldError("overlapped",
                        "must be true or false, got " + schedule::ShortJson(j.at("overlapped")));
    }
    r.overlapped = j.at("overlapped").get<bool>();
  }
  if (j.contains("measure_split")) {  // optional: written by runners that report it
    const json& m = j.at("measure_split");
    if (!m.is_object()) {
      return FieldError("measure_split", "must be an object, got " + schedule::ShortJson(m));
    }
    RETURN_IF_ERROR(ReadSeconds(m, "prepare_s", &r.measure_split.prepare_s));
    RETURN_IF_ERROR(ReadInt(m, "worker_setups", "measure_split.worker_setups",
                            &r.measure_split.worker_setups, 0));
    RETURN_IF_ERROR(ReadSeconds(m, "setup_s", &r.measure_split.setup_s));
    RETURN_IF_ERROR(ReadSeconds(m, "items_s", &r.measure_split.items_s));
  }
  if (j.contains("ranks")) RETURN_IF_ERROR(ReadRankTimings(j.at("ranks"), &r.ranks));
  RETURN_IF_ERROR(ReadString(j, "timestamp", "timestamp", &r.timestamp));
  RETURN_IF_ERROR(ReadString(j, "tilesearch_version", "tilesearch_version", &r.tilesearch_version));
  RETURN_IF_ERROR(ReadInt(j, "seed", "seed", &r.seed, 0));
  return r;
}

void MeasureSplit::Add(const measure::RunUsage& usage) {
  prepare_s += usage.prepare_ms / 1000;
  worker_setups += usage.worker_setups;
  setup_s += usage.setup_ms / 1000;
  items_s += usage.item_ms / 1000;
}

void MeasureSplit::Add(const MeasureSplit& other) {
  prepare_s += other.prepare_s;
  worker_setups += other.worker_setups;
  setup_s += other.setup_s;
  items_s += other.items_s;
}

std::string CurrentTimestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
}

bool SameTarget(const Target& a, const Target& b) { return a.kind == b.kind && a.arch == b.arch; }

std::string StepsCanonicalText(const std::vector<schedule::Step>& steps) {
  return StepArray(steps).dump();
}

uint64_t StepsHash(const std::vector<schedule::Step>& steps) {
  return ir::Fnv1a64(StepsCanonicalText(steps));
}

uint64_t RecordStateHash(const MeasureRecord& record) { return StepsHash(record.steps); }

double RecordThroughput(const MeasureRecord& record, const ir::ComputeDAG& dag) {
  if (!record.valid()) return 0;
  return dag.Flops() / (record.median_ms() * 1e-3);
}

double RecordBandwidth(const MeasureRecord& record, const ir::ComputeDAG& dag) {
  if (!record.valid()) return 0;
  return static_cast<double>(dag.InputBytes() + dag.OutputBytes()) / (record.median_ms() * 1e-3);
}

}  // namespace tilesearch::search
