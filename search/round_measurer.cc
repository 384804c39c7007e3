#include "search/round_measurer.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "measure/builder.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/step_json.h"

namespace tilesearch::search {
namespace {

using nlohmann::json;

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

absl::Status FieldError(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("round share: field '", field, "' ", what));
}

// The number at `key` of object `j` (any JSON number). Errors name the field.
absl::StatusOr<double> NumberAt(const json& j, const char* key) {
  if (!j.contains(key) || !j.at(key).is_number()) return FieldError(key, "must be a number");
  return j.at(key).get<double>();
}

// A candidate's build input: its steps replayed on `dag` and lowered for `target`, timed.
measure::BuildInput LowerSteps(const ir::ComputeDAG& dag, const Target& target,
                               const std::vector<schedule::Step>& steps) {
  const auto t = std::chrono::steady_clock::now();
  absl::StatusOr<schedule::State> state = schedule::ReplaySteps(dag, steps);
  absl::StatusOr<schedule::LoweredKernel> lowered =
      state.ok() ? schedule::Lower(dag, *state, target)
                 : absl::StatusOr<schedule::LoweredKernel>(state.status());
  return measure::BuildInput::FromLowering(std::move(lowered), SecondsSince(t) * 1e3);
}

}  // namespace

json RoundShareToJson(const RoundShare& share) {
  json steps = json::array();
  for (const auto& s : share.steps) steps.push_back(schedule::StepsToJson(s));
  return {{"workload", schedule::WorkloadToJson(share.workload)},
          {"target", TargetToRecordJson(share.target)},
          {"precision", measure::Fp32PrecisionName(share.precision)},
          {"round", share.round},
          {"indices", share.indices},
          {"steps", std::move(steps)},
          {"screen_above_ms", share.screen_above_ms},
          {"screen_factor", share.screen_factor},
          {"compile_timeout_ms", share.compile_timeout_ms},
          {"unroll_budget", share.unroll_budget}};
}

absl::StatusOr<RoundShare> RoundShareFromJson(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("round share: not a JSON object");
  RoundShare share;
  if (!j.contains("workload")) return FieldError("workload", "is missing");
  ASSIGN_OR_RETURN(share.workload, schedule::WorkloadFromJson(j.at("workload")));
  if (!j.contains("target")) return FieldError("target", "is missing");
  ASSIGN_OR_RETURN(share.target, TargetFromRecordJson(j.at("target")));
  if (!j.contains("precision") || !j.at("precision").is_string()) {
    return FieldError("precision", "must be a string");
  }
  ASSIGN_OR_RETURN(share.precision,
                   measure::ParseFp32Precision(j.at("precision").get<std::string>()));
  ASSIGN_OR_RETURN(const double round, NumberAt(j, "round"));
  share.round = static_cast<int64_t>(round);
  if (!j.contains("indices") || !j.at("indices").is_array()) {
    return FieldError("indices", "must be a list of integers");
  }
  if (!j.contains("steps") || !j.at("steps").is_array() ||
      j.at("steps").size() != j.at("indices").size()) {
    return FieldError("steps", "must be a list of step lists, one per index");
  }
  for (const json& i : j.at("indices")) {
    if (!i.is_number_integer()) return FieldError("indices", "must be a list of integers");
    share.indices.push_back(i.get<int64_t>());
  }
  for (const json& s : j.at("steps")) {
    ASSIGN_OR_RETURN(std::vector<schedule::Step> steps, schedule::StepsFromJson(s));
    share.steps.push_back(std::move(steps));
  }
  ASSIGN_OR_RETURN(share.screen_above_ms, NumberAt(j, "screen_above_ms"));
  ASSIGN_OR_RETURN(share.screen_factor, NumberAt(j, "screen_factor"));
  ASSIGN_OR_RETURN(share.compile_timeout_ms, NumberAt(j, "compile_timeout_ms"));
  ASSIGN_OR_RETURN(const double unroll, NumberAt(j, "unroll_budget"));
  share.unroll_budget = static_cast<int64_t>(unroll);
  return share;
}

RoundShare ShareOfRank(const RoundShare& share, int rank, int ranks) {
  RoundShare part = share;
  part.indices.clear();
  part.steps.clear();
  for (size_t i = static_cast<size_t>(rank); i < share.steps.size();
       i += static_cast<size_t>(ranks)) {
    part.indices.push_back(share.indices[i]);
    part.steps.push_back(share.steps[i]);
  }
  return part;
}

json MeasuredCandidateToJson(const MeasuredCandidate& m) {
  return {{"index", m.index},
          {"result", measure::MeasureResultToJson(m.result)},
          {"build_ms", m.build_ms}};
}

absl::StatusOr<MeasuredCandidate> MeasuredCandidateFromJson(const json& j) {
  if (!j.is_object() || !j.contains("index") || !j.at("index").is_number_integer() ||
      !j.contains("result")) {
    return absl::InvalidArgumentError("measured candidate: needs an integer index and a result");
  }
  MeasuredCandidate m;
  m.index = j.at("index").get<int64_t>();
  ASSIGN_OR_RETURN(m.result, measure::MeasureResultFromJson(j.at("result")));
  ASSIGN_OR_RETURN(m.build_ms, NumberAt(j, "build_ms"));
  return m;
}

void MeasureShare(const RoundShare& share, const ir::ComputeDAG& dag, measure::Runner& runner,
                  const std::function<void(const MeasuredCandidate&)>& on_result,
                  RankTiming* timing) {
  timing->trials = static_cast<int64_t>(share.steps.size());
  if (share.steps.empty()) return;
  const auto t_build = std::chrono::steady_clock::now();
  std::vector<measure::BuildInput> inputs;
  for (const auto& steps : share.steps) inputs.push_back(LowerSteps(dag, share.target, steps));
  measure::BuilderOptions build_options;
  build_options.parallel.timeout_ms = share.compile_timeout_ms;
  build_options.gpu.unroll_budget = share.unroll_budget;
  const std::vector<measure::BuildResult> built =
      measure::Builder(share.target, build_options).Build(inputs);
  timing->build_s += SecondsSince(t_build);
  MeasureBuilt(built, share.indices, share.screen_above_ms, dag, runner, on_result, timing);
}

void MeasureBuilt(const std::vector<measure::BuildResult>& built,
                  const std::vector<int64_t>& indices, double screen_above_ms,
                  const ir::ComputeDAG& dag, measure::Runner& runner,
                  const std::function<void(const MeasuredCandidate&)>& on_result,
                  RankTiming* timing) {
  const auto t_measure = std::chrono::steady_clock::now();
  runner.SetScreenAboveMs(screen_above_ms);
  runner.RunStreaming(dag, built, [&](size_t k, const measure::MeasureResult& result) {
    on_result(MeasuredCandidate{indices[k], result, built[k].compile_ms});
  });
  timing->measure_s += SecondsSince(t_measure);
  timing->split.Add(runner.last_run_usage());
}

}  // namespace tilesearch::search
