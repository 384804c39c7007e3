// Measurement results: names, JSON form, option validation, the device lock path.
#include "measure/measure.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"
#include "measure/reference.h"

namespace tilesearch::measure {

using runtime::KernelResources;
using runtime::TimingOptions;
using runtime::TimingStats;
namespace {

constexpr MeasureError kAllErrors[] = {
    MeasureError::kNone,           MeasureError::kInvalidSchedule, MeasureError::kCompileError,
    MeasureError::kCompileTimeout, MeasureError::kWrongAnswer,     MeasureError::kRuntimeError,
    MeasureError::kRunTimeout,     MeasureError::kNoDevice,        MeasureError::kUnknown,
};

// JSON has no inf / nan: they are written as the strings "inf", "-inf", "nan".
nlohmann::json NumberToJson(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// Reads field `key` of object `j` (a path prefix names it in errors); a missing field keeps the
// default already in `out`.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& j, std::string prefix) : j_(j), prefix_(std::move(prefix)) {}

  absl::Status Double(const char* key, double* out) const {
    if (!j_.contains(key)) return absl::OkStatus();
    return ToDouble(j_.at(key), Name(key), out);
  }

  template <typename Int>
  absl::Status Integer(const char* key, Int* out) const {
    if (!j_.contains(key)) return absl::OkStatus();
    const nlohmann::json& v = j_.at(key);
    if (!v.is_number_integer()) return Bad(key, "an integer");
    *out = v.get<Int>();
    return absl::OkStatus();
  }

  absl::Status String(const char* key, std::string* out) const {
    if (!j_.contains(key)) return absl::OkStatus();
    const nlohmann::json& v = j_.at(key);
    if (!v.is_string()) return Bad(key, "a string");
    *out = v.get<std::string>();
    return absl::OkStatus();
  }

  absl::Status DoubleArray(const char* key, std::vector<double>* out) const {
    if (!j_.contains(key)) return absl::OkStatus();
    const nlohmann::json& v = j_.at(key);
    if (!v.is_array()) return Bad(key, "an array");
    out->clear();
    for (size_t i = 0; i < v.size(); ++i) {
      double x = 0;
      RETURN_IF_ERROR(ToDouble(v[i], absl::StrCat(Name(key), "[", i, "]"), &x));
      out->push_back(x);
    }
    return absl::OkStatus();
  }

  // The sub-object `key`, or nullptr when absent. Errors when present but not an object.
  absl::StatusOr<const nlohmann::json*> Object(const char* key) const {
    if (!j_.contains(key)) return nullptr;
    const nlohmann::json& v = j_.at(key);
    if (!v.is_object()) return Bad(key, "an object");
    return &v;
  }

  std::string Name(const char* key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

  absl::Status Bad(const char* key, const char* what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("measure result field '", Name(key), "' is not ", what));
  }

 private:
  static absl::Status ToDouble(const nlohmann::json& v, const std::string& name, double* out) {
    if (v.is_number()) {
      *out = v.get<double>();
      return absl::OkStatus();
    }
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      if (s == "inf") {
        *out = std::numeric_limits<double>::infinity();
        return absl::OkStatus();
      }
      if (s == "-inf") {
        *out = -std::numeric_limits<double>::infinity();
        return absl::OkStatus();
      }
      if (s == "nan") {
        *out = std::numeric_limits<double>::quiet_NaN();
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("measure result field '", name, "' is not a number"));
  }

  const nlohmann::json& j_;
  std::string prefix_;
};

}  // namespace

const char* MeasureErrorName(MeasureError error) {
  switch (error) {
    case MeasureError::kNone:
      return "none";
    case MeasureError::kInvalidSchedule:
      return "invalid_schedule";
    case MeasureError::kCompileError:
      return "compile_error";
    case MeasureError::kCompileTimeout:
      return "compile_timeout";
    case MeasureError::kWrongAnswer:
      return "wrong_answer";
    case MeasureError::kRuntimeError:
      return "runtime_error";
    case MeasureError::kRunTimeout:
      return "run_timeout";
    case MeasureError::kNoDevice:
      return "no_device";
    case MeasureError::kUnknown:
      return "unknown_error";
  }
  return "unknown_error";
}

absl::StatusOr<MeasureError> ParseMeasureError(const std::string& name) {
  for (MeasureError e : kAllErrors) {
    if (name == MeasureErrorName(e)) return e;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown measure error '", name,
      "' (expected none, invalid_schedule, compile_error, compile_timeout, wrong_answer, "
      "runtime_error, run_timeout, no_device or unknown_error)"));
}

const char* CheckDistributionName(CheckDistribution d) {
  switch (d) {
    case CheckDistribution::kUniformSymmetric:
      return "uniform";
    case CheckDistribution::kUniformPositive:
      return "uniform01";
    case CheckDistribution::kNormalOffset:
      return "normal";
  }
  return "unknown";
}

absl::StatusOr<CheckDistribution> ParseCheckDistribution(const std::string& name) {
  for (CheckDistribution d :
       {CheckDistribution::kUniformSymmetric, CheckDistribution::kUniformPositive,
        CheckDistribution::kNormalOffset}) {
    if (name == CheckDistributionName(d)) return d;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown input distribution '", name,
                                                 "' (expected uniform, uniform01 or normal)"));
}

double MeasureResult::median_ms() const {
  return ok() ? timing.median_ms : std::numeric_limits<double>::infinity();
}

nlohmann::json MeasureResultToJson(const MeasureResult& result) {
  nlohmann::json j;
  j["error"] = MeasureErrorName(result.error);
  j["message"] = result.message;
  nlohmann::json costs = nlohmann::json::array();
  for (double c : result.costs_s) costs.push_back(NumberToJson(c));
  j["costs_s"] = costs;
  const TimingStats& t = result.timing;
  nlohmann::json samples = nlohmann::json::array();
  for (double s : t.samples_ms) samples.push_back(NumberToJson(s));
  j["timing"] = {{"samples_ms", samples},
                 {"runs", t.runs},
                 {"median_ms", NumberToJson(t.median_ms)},
                 {"mean_ms", NumberToJson(t.mean_ms)},
                 {"min_ms", NumberToJson(t.min_ms)},
                 {"max_ms", NumberToJson(t.max_ms)},
                 {"p10_ms", NumberToJson(t.p10_ms)},
                 {"p90_ms", NumberToJson(t.p90_ms)},
                 {"stddev_ms", NumberToJson(t.stddev_ms)}};
  if (t.soak_ms > 0) j["timing"]["soak_ms"] = NumberToJson(t.soak_ms);
  j["compile_ms"] = NumberToJson(result.compile_ms);
  j["load_ms"] = NumberToJson(result.load_ms);
  j["check_ms"] = NumberToJson(result.check_ms);
  j["run_wall_ms"] = NumberToJson(result.run_wall_ms);
  if (result.screened) j["screened"] = true;
  const CheckReport& c = result.check;
  j["check"] = {{"trials", c.trials},
                {"max_abs_error", NumberToJson(c.max_abs_error)},
                {"max_rel_error", NumberToJson(c.max_rel_error)},
                {"mismatches", c.mismatches},
                {"checked_elements", c.checked_elements},
                {"first_mismatch", c.first_mismatch},
                {"arbitrated", c.arbitrated},
                {"arbitration", c.arbitration}};
  if (c.f64_points > 0) {
    j["check"]["f64_points"] = c.f64_points;
    j["check"]["f64_max_ratio"] = NumberToJson(c.f64_max_ratio);
    j["check"]["f64_max_abs_error"] = NumberToJson(c.f64_max_abs_error);
    j["check"]["reference_f64_max_abs_error"] = NumberToJson(c.reference_f64_max_abs_error);
  }
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelResources& k : result.kernels) {
    kernels.push_back({{"name", k.name},
                       {"registers_per_thread", k.registers_per_thread},
                       {"static_shared_bytes", k.static_shared_bytes},
                       {"dynamic_shared_bytes", k.dynamic_shared_bytes},
                       {"local_bytes_per_thread", k.local_bytes_per_thread},
                       {"max_threads_per_block", k.max_threads_per_block}});
  }
  j["kernels"] = kernels;
  return j;
}

absl::StatusOr<MeasureResult> MeasureResultFromJson(const nlohmann::json& j) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError("measure result is not a json object");
  }
  MeasureResult r;
  const FieldReader top(j, "");
  if (!j.contains("error")) {
    return absl::InvalidArgumentError("measure result field 'error' is missing");
  }
  std::string error;
  RETURN_IF_ERROR(top.String("error", &error));
  absl::StatusOr<MeasureError> parsed = ParseMeasureError(error);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("measure result field 'error': ", parsed.status().message()));
  }
  r.error = *parsed;
  RETURN_IF_ERROR(top.String("message", &r.message));
  RETURN_IF_ERROR(top.DoubleArray("costs_s", &r.costs_s));
  ASSIGN_OR_RETURN(const nlohmann::json* timing, top.Object("timing"));
  if (timing != nullptr) {
    const FieldReader t(*timing, "timing");
    RETURN_IF_ERROR(t.DoubleArray("samples_ms", &r.timing.samples_ms));
    RETURN_IF_ERROR(t.Integer("runs", &r.timing.runs));
    RETURN_IF_ERROR(t.Double("median_ms", &r.timing.median_ms));
    RETURN_IF_ERROR(t.Double("mean_ms", &r.timing.mean_ms));
    RETURN_IF_ERROR(t.Double("min_ms", &r.timing.min_ms));
    RETURN_IF_ERROR(t.Double("max_ms", &r.timing.max_ms));
    RETURN_IF_ERROR(t.Double("p10_ms", &r.timing.p10_ms));
    RETURN_IF_ERROR(t.Double("p90_ms", &r.timing.p90_ms));
    RETURN_IF_ERROR(t.Double("stddev_ms", &r.timing.stddev_ms));
    // Written only for a soaked timing (and absent in logs from before the soak existed).
    RETURN_IF_ERROR(t.Double("soak_ms", &r.timing.soak_ms));
    // What the tuner ranks by must hang together: a run count the costs do not have, or a
    // negative soak, would let a damaged record pass for a held timing.
    if (r.timing.runs < 0) return t.Bad("runs", "a count >= 0");
    const bool has_costs = !r.costs_s.empty() || (r.ok() && r.timing.runs > 0);
    if (has_costs && r.timing.runs != static_cast<int>(r.costs_s.size())) {
      return absl::InvalidArgumentError(absl::StrCat("measure result field 'timing.runs' is ",
                                                     r.timing.runs, " but 'costs_s' has ",
                                                     r.costs_s.size(), " runs"));
    }
    if (!(r.timing.soak_ms >= 0)) return t.Bad("soak_ms", "ms >= 0");
  }
  for (double c : r.costs_s) {
    if (!(c >= 0)) return top.Bad("costs_s", "run times >= 0 s");
  }
  RETURN_IF_ERROR(top.Double("compile_ms", &r.compile_ms));
  RETURN_IF_ERROR(top.Double("load_ms", &r.load_ms));
  RETURN_IF_ERROR(top.Double("check_ms", &r.check_ms));
  RETURN_IF_ERROR(top.Double("run_wall_ms", &r.run_wall_ms));
  if (j.contains("screened")) {
    if (!j.at("screened").is_boolean()) return top.Bad("screened", "a boolean");
    r.screened = j.at("screened").get<bool>();
  }
  ASSIGN_OR_RETURN(const nlohmann::json* check, top.Object("check"));
  if (check != nullptr) {
    const FieldReader c(*check, "check");
    RETURN_IF_ERROR(c.Integer("trials", &r.check.trials));
    RETURN_IF_ERROR(c.Double("max_abs_error", &r.check.max_abs_error));
    RETURN_IF_ERROR(c.Double("max_rel_error", &r.check.max_rel_error));
    RETURN_IF_ERROR(c.Integer("mismatches", &r.check.mismatches));
    RETURN_IF_ERROR(c.Integer("checked_elements", &r.check.checked_elements));
    RETURN_IF_ERROR(c.String("first_mismatch", &r.check.first_mismatch));
    // Absent in logs written before float64 arbitration existed.
    RETURN_IF_ERROR(c.Integer("arbitrated", &r.check.arbitrated));
    RETURN_IF_ERROR(c.String("arbitration", &r.check.arbitration));
    // Absent in logs written before the float64 error on sampled points was recorded.
    RETURN_IF_ERROR(c.Integer("f64_points", &r.check.f64_points));
    RETURN_IF_ERROR(c.Double("f64_max_ratio", &r.check.f64_max_ratio));
    RETURN_IF_ERROR(c.Double("f64_max_abs_error", &r.check.f64_max_abs_error));
    RETURN_IF_ERROR(c.Double("reference_f64_max_abs_error", &r.check.reference_f64_max_abs_error));
  }
  if (j.contains("kernels")) {
    const nlohmann::json& ks = j.at("kernels");
    if (!ks.is_array()) return top.Bad("kernels", "an array");
    for (size_t i = 0; i < ks.size(); ++i) {
      const std::string prefix = absl::StrCat("kernels[", i, "]");
      if (!ks[i].is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat("measure result field '", prefix, "' is not an object"));
      }
      const FieldReader k(ks[i], prefix);
      KernelResources res;
      RETURN_IF_ERROR(k.String("name", &res.name));
      RETURN_IF_ERROR(k.Integer("registers_per_thread", &res.registers_per_thread));
      RETURN_IF_ERROR(k.Integer("static_shared_bytes", &res.static_shared_bytes));
      RETURN_IF_ERROR(k.Integer("dynamic_shared_bytes", &res.dynamic_shared_bytes));
      RETURN_IF_ERROR(k.Integer("local_bytes_per_thread", &res.local_bytes_per_thread));
      RETURN_IF_ERROR(k.Integer("max_threads_per_block", &res.max_threads_per_block));
      r.kernels.push_back(std::move(res));
    }
  }
  return r;
}

double ScreenFor(const MeasureOptions& options, double batch_best_ms) {
  double screen = options.screen_above_ms > 0 ? options.screen_above_ms : 0;
  if (options.screen_factor > 0 && batch_best_ms > 0) {
    const double own = options.screen_factor * batch_best_ms;
    screen = screen > 0 ? std::min(screen, own) : own;
  }
  return screen;
}

absl::Status ValidateMeasureOptions(const MeasureOptions& options) {
  auto bad = [](auto... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  const TimingOptions& t = options.timing;
  if (t.min_runs < 1) return bad("timing min_runs must be at least 1, got ", t.min_runs);
  if (t.max_runs < t.min_runs) {
    return bad("timing max_runs ", t.max_runs, " is below min_runs ", t.min_runs);
  }
  if (t.warmup_runs < 0) return bad("timing warmup_runs must not be negative, got ", t.warmup_runs);
  if (!(t.min_total_ms >= 0)) {
    return bad("timing min_total_ms must not be negative, got ", t.min_total_ms);
  }
  if (!(options.screen_above_ms >= 0)) {
    return bad("screen_above_ms must not be negative, got ", options.screen_above_ms);
  }
  if (!(options.screen_factor >= 0)) {
    return bad("screen_factor must not be negative, got ", options.screen_factor);
  }
  if (options.check_trials < 0) {
    return bad("check_trials must not be negative, got ", options.check_trials);
  }
  if (options.check && options.check_trials > 0 && options.distributions.empty()) {
    return bad("check_trials is ", options.check_trials, " but no input distributions are given");
  }
  if (!(options.atol >= 0) || !(options.rtol >= 0)) {
    return bad("tolerances must not be negative, got atol ", options.atol, " and rtol ",
               options.rtol);
  }
  if (options.generated_inputs_min_elements < 0) {
    return bad("generated_inputs_min_elements must not be negative, got ",
               options.generated_inputs_min_elements);
  }
  if (!(options.interpreter_reference_max_ops >= 0)) {
    return bad("interpreter_reference_max_ops must not be negative, got ",
               options.interpreter_reference_max_ops);
  }
  if (options.reference_point_samples < 0) {
    return bad("reference_point_samples must not be negative, got ",
               options.reference_point_samples);
  }
  if (options.arbitration_max_elements < 0) {
    return bad("arbitration_max_elements must not be negative, got ",
               options.arbitration_max_elements);
  }
  if (options.precision_samples < 0) {
    return bad("precision_samples must not be negative, got ", options.precision_samples);
  }
  if (options.arbitration_max_steps < 0) {
    return bad("arbitration_max_steps must not be negative, got ", options.arbitration_max_steps);
  }
  if (!(options.run_timeout_ms > 0)) {
    return bad("run_timeout_ms must be positive, got ", options.run_timeout_ms);
  }
  if (!(options.setup_timeout_ms > 0)) {
    return bad("setup_timeout_ms must be positive, got ", options.setup_timeout_ms);
  }
  if (options.device < 0) return bad("device ordinal must not be negative, got ", options.device);
  if (options.host_threads < 0) {
    return bad("host_threads must not be negative, got ", options.host_threads);
  }
  return absl::OkStatus();
}

std::string DeviceLockPath(const MeasureOptions& options) {
  if (!options.device_lock_path.empty()) return options.device_lock_path;
  const char* env = std::getenv("TILESEARCH_DEVICE_LOCK");
  return env != nullptr ? env : "";
}

namespace {

double InputElements(const ir::ComputeDAG& dag) {
  double elements = 0;
  for (int id : dag.input_ids()) elements += static_cast<double>(dag.stage(id).NumElements());
  return elements;
}

}  // namespace

bool CheckInputsOnDemand(const ir::ComputeDAG& dag, const MeasureOptions& options,
                         const Target& target) {
  return target.is_gpu() &&
         InputElements(dag) >= static_cast<double>(options.generated_inputs_min_elements) &&
         (!options.check || NaiveOps(dag) > options.interpreter_reference_max_ops);
}

double EstimateMeasureHostBytes(const ir::ComputeDAG& dag, const MeasureOptions& options,
                                const Target& target) {
  double outputs = 0;
  for (int id : dag.output_ids()) outputs += static_cast<double>(dag.stage(id).NumElements());
  const int trials = options.check ? std::max(options.check_trials, 1) : 0;
  const double inputs = CheckInputsOnDemand(dag, options, target)
                            ? static_cast<double>(kGeneratedInputChunkElements) * 16
                            : InputElements(dag) * 8.0 * (trials + 3);
  return inputs + outputs * 8.0 * (trials + 3);
}

double AvailableHostBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
}

absl::Status CheckMeasureHostMemory(const ir::ComputeDAG& dag, const MeasureOptions& options,
                                    const Target& target, double fraction) {
  const double need = EstimateMeasureHostBytes(dag, options, target);
  const double available = AvailableHostBytes();
  if (available <= 0 || need <= fraction * available) return absl::OkStatus();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "measuring needs about %.1f GiB of host memory (inputs and outputs held as 8-byte values "
      "per check trial, timing inputs, worker copies), more than the %.0f%% of the %.1f GiB "
      "available that a measurement may take (the rest is left to the system and the compile "
      "workers); use smaller shapes",
      need / kGiB, 100 * fraction, available / kGiB));
}

}  // namespace tilesearch::measure
