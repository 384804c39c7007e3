// JSON form of step lists, the payload tuning logs store. Format (versioned):
//   {"version": 1, "steps": [["SP", 2, 0, 64, [8, 4], 1], ["FU", 2, [0, 1]], ...]}
// Each step is an array led by Ansor's prefix (SP FSP FFSP FU RE CA CI CR CHR CHW AN PR RF SA).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "schedule/step.h"

namespace tilesearch::schedule {

inline constexpr int kStepFormatVersion = 1;

nlohmann::json StepToJson(const Step& step);
/// Errors: unknown prefix, wrong arity or field types, with the offending text.
absl::StatusOr<Step> StepFromJson(const nlohmann::json& j);

/// {"version": kStepFormatVersion, "steps": [...]}.
nlohmann::json StepsToJson(const std::vector<Step>& steps);
/// Errors: missing/newer version ("step list version 2 is newer than this build reads (1)"),
/// unknown top-level fields, malformed steps (message gives the step index).
absl::StatusOr<std::vector<Step>> StepsFromJson(const nlohmann::json& j);

/// Round-trips through text (nlohmann::json::parse errors become kInvalidArgument).
std::string StepsToText(const std::vector<Step>& steps);
absl::StatusOr<std::vector<Step>> StepsFromText(const std::string& text);

}  // namespace tilesearch::schedule
