#include "schedule/step_json.h"

#include <variant>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "nlohmann/json.hpp"
#include "schedule/schedule_file.h"

namespace tilesearch::schedule {
namespace {

template <typename T>
absl::StatusOr<Step> Parse(const nlohmann::json& j) {
  absl::StatusOr<T> s = T::FromJson(j);
  if (!s.ok()) return s.status();
  return Step(*std::move(s));
}

}  // namespace

nlohmann::json StepToJson(const Step& step) {
  return std::visit([](const auto& s) { return s.ToJson(); }, step);
}

absl::StatusOr<Step> StepFromJson(const nlohmann::json& j) {
  if (!j.is_array() || j.empty() || !j[0].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a step is an array led by its prefix, got ", ShortJson(j)));
  }
  const std::string prefix = j[0].get<std::string>();
  if (prefix == "SP") return Parse<SplitStep>(j);
  if (prefix == "FSP") return Parse<FollowSplitStep>(j);
  if (prefix == "FFSP") return Parse<FollowFusedSplitStep>(j);
  if (prefix == "FU") return Parse<FuseStep>(j);
  if (prefix == "RE") return Parse<ReorderStep>(j);
  if (prefix == "CA") return Parse<ComputeAtStep>(j);
  if (prefix == "CI") return Parse<ComputeInlineStep>(j);
  if (prefix == "CR") return Parse<ComputeRootStep>(j);
  if (prefix == "CHR") return Parse<CacheReadStep>(j);
  if (prefix == "CHW") return Parse<CacheWriteStep>(j);
  if (prefix == "AN") return Parse<AnnotationStep>(j);
  if (prefix == "PR") return Parse<PragmaStep>(j);
  if (prefix == "RF") return Parse<RfactorStep>(j);
  if (prefix == "SA") return Parse<StorageAlignStep>(j);
  if (prefix == "TC") return Parse<TensorCoreStep>(j);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown step prefix '", prefix,
      "' (expected SP, FSP, FFSP, FU, RE, CA, CI, CR, CHR, CHW, AN, PR, RF, SA or TC)"));
}

nlohmann::json StepsToJson(const std::vector<Step>& steps) {
  nlohmann::json list = nlohmann::json::array();
  for (const Step& s : steps) list.push_back(StepToJson(s));
  return {{"version", kStepFormatVersion}, {"steps", std::move(list)}};
}

absl::StatusOr<std::vector<Step>> StepsFromJson(const nlohmann::json& j) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a step list is an object {\"version\", \"steps\"}, got ", ShortJson(j)));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "version" && it.key() != "steps") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown field '", it.key(), "' in step list (expected version, steps)"));
    }
  }
  if (!j.contains("version") || !j["version"].is_number_integer()) {
    return absl::InvalidArgumentError("step list has no integer 'version'");
  }
  const int64_t version = j["version"].get<int64_t>();
  if (version > kStepFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat("step list version ", version,
                                                   " is newer than this build reads (",
                                                   kStepFormatVersion, ")"));
  }
  if (version < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("step list version ", version, " is not valid (versions start at 1)"));
  }
  if (!j.contains("steps") || !j["steps"].is_array()) {
    return absl::InvalidArgumentError("step list has no array 'steps'");
  }
  std::vector<Step> steps;
  const nlohmann::json& list = j["steps"];
  for (size_t i = 0; i < list.size(); ++i) {
    absl::StatusOr<Step> s = StepFromJson(list[i]);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("step ", i, ": ", s.status().message()));
    }
    steps.push_back(*std::move(s));
  }
  return steps;
}

std::string StepsToText(const std::vector<Step>& steps) { return StepsToJson(steps).dump(); }

absl::StatusOr<std::vector<Step>> StepsFromText(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat("step list is not valid JSON: ", text.substr(0, 200)));
  }
  return StepsFromJson(j);
}

}  // namespace tilesearch::schedule
