#include "tools/workload_options.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/lower.h"
#include "search/api.h"

namespace tilesearch::tools {

const search::TuneOptions& DefaultTuneOptions() {
  static const search::TuneOptions defaults;
  return defaults;
}

void AddWorkloadOptions(CLI::App& app, WorkloadOptions& options) {
  app.add_option("--schedule", options.schedule,
                 "schedule file (JSON: workload, target, steps; see examples/schedules/)");
  app.add_option("--op", options.op,
                 "operator name (see 'tilesearch ops'); overrides the schedule file's");
  app.add_option("--shape", options.shapes,
                 "input shape, e.g. 1x64x56x56 or 1,64,56,56; once per input, in order "
                 "(replaces all of the schedule file's)");
  app.add_option("--attr", options.attrs,
                 "operator attribute name=value, e.g. padding=1 (sets one of the file's)");
  app.add_option("--dtype", options.dtype,
                 "element type: float32, float16, bfloat16, ... (default float32 or the file's)");
  app.add_option(
      "--target", options.target,
      "auto, cuda, cuda -arch=sm_XX or cpu (default cpu or the schedule file's; auto: cuda "
      "when a CUDA device answers, else cpu)");
}

absl::StatusOr<Target> ResolveTargetOption(const std::string& text) {
  return TargetFromString(text);
}

absl::StatusOr<ir::OpArgs> ParseOpArgs(const WorkloadOptions& options) {
  ir::OpArgs args;
  for (const std::string& text : options.shapes) {
    ASSIGN_OR_RETURN(std::vector<int64_t> shape, ir::ParseShape(text));
    args.shapes.push_back(std::move(shape));
  }
  for (const std::string& text : options.attrs) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute '", text, "' is not of the form name=value"));
    }
    std::string name = text.substr(0, eq);
    if (!args.attrs.emplace(name, text.substr(eq + 1)).second) {
      return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' given twice"));
    }
  }
  if (!options.dtype.empty()) {
    ASSIGN_OR_RETURN(args.dtype, ir::ParseType(options.dtype));
  }
  return args;
}

absl::StatusOr<schedule::ScheduleFile> ScheduleFromOptions(const WorkloadOptions& options) {
  schedule::ScheduleFile file;
  if (!options.schedule.empty()) {
    ASSIGN_OR_RETURN(file, schedule::ScheduleFile::Load(options.schedule));
  } else if (options.op.empty()) {
    return absl::InvalidArgumentError("give --op NAME or --schedule FILE");
  } else {
    file.source = "<command line>";
    file.target = Target::HostCpu();
  }
  ASSIGN_OR_RETURN(ir::OpArgs args, ParseOpArgs(options));
  schedule::Workload& w = file.workload;
  if (options.op == schedule::kFusedWorkloadOp && !w.is_fused()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--op ", schedule::kFusedWorkloadOp,
        " needs its nodes: give a --schedule file whose workload is fused (or select logged "
        "fused workloads by --workload-key)"));
  }
  if (!options.op.empty()) {
    if (options.op != w.op) {
      w.args.attrs.clear();
      w.nodes.clear();
    }
    w.op = options.op;
  }
  if (!args.shapes.empty()) w.args.shapes = std::move(args.shapes);
  for (auto& [name, value] : args.attrs) w.args.attrs[name] = std::move(value);
  if (!options.dtype.empty()) w.args.dtype = args.dtype;
  if (!options.target.empty()) {
    ASSIGN_OR_RETURN(file.target, ResolveTargetOption(options.target));
  }
  return file;
}

absl::StatusOr<schedule::LoweredKernel> LowerScheduleFile(
    const schedule::ScheduleFile& file, const schedule::ResolvedSchedule& resolved) {
  absl::StatusOr<schedule::LoweredKernel> kernel =
      schedule::Lower(resolved.dag, resolved.state, file.target);
  if (!kernel.ok()) {
    return absl::Status(kernel.status().code(),
                        absl::StrCat(file.source, ": cannot lower for ", file.target.ToString(),
                                     ": ", kernel.status().message()));
  }
  return kernel;
}

void TimingOverrides::ApplyTo(runtime::TimingOptions& timing) const {
  if (min_runs >= 0) timing.min_runs = min_runs;
  if (min_time_ms >= 0) timing.min_total_ms = min_time_ms;
  if (warmup >= 0) timing.warmup_runs = warmup;
  if (timing.max_runs < timing.min_runs) timing.max_runs = timing.min_runs;
}

namespace {

// Whether `text` is an optional sign and one or more decimal digits.
bool IsDecimalInteger(const std::string& text) {
  size_t i = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  if (i == text.size()) return false;
  for (; i < text.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return true;
}

}  // namespace

CLI::Validator NumberText(bool integer, const std::string& range) {
  return CLI::Validator(
      [integer, range](std::string& text) -> std::string {
        const std::string given = text;
        text = std::string(absl::StripAsciiWhitespace(text));
        if (integer) {
          if (!IsDecimalInteger(text)) {
            return absl::StrCat("'", given, "' is not an integer in ", range);
          }
          // Decimal, as written: CLI11 would read "010" as octal. Beyond 64 bits the text stays
          // for the range check to refuse.
          int64_t v = 0;
          if (absl::SimpleAtoi(text, &v)) text = absl::StrCat(v);
          return std::string();
        }
        double x = 0;
        // Decimal only: SimpleAtod (like CLI11) would read "0x2" as 2.
        if (absl::StrContains(text, 'x') || absl::StrContains(text, 'X') ||
            !absl::SimpleAtod(text, &x) || !std::isfinite(x)) {
          return absl::StrCat("'", given, "' is not a number in ", range);
        }
        return std::string();
      },
      "", "NUMBER_TEXT");
}

namespace {

// Adds `name` writing `value`, checked to lo..hi, its help "<what>, lo..hi (default d)": first
// NumberText ("abc", "" and, for an integer, "4.5" are not numbers / integers), then CLI::Range.
template <typename T>
void AddRangedOptionImpl(CLI::App& app, const std::string& name, T* value, const std::string& what,
                         T lo, T hi, T default_value) {
  const std::string range = absl::StrCat(lo, "..", hi);
  app.add_option(name, *value, absl::StrCat(what, ", ", range, " (default ", default_value, ")"))
      ->check(CLI::Range(lo, hi))
      ->transform(NumberText(std::is_integral_v<T>, range));  // runs first
}

}  // namespace

void AddRangedOption(CLI::App& app, const std::string& name, int* value, const std::string& what,
                     int lo, int hi, int default_value) {
  AddRangedOptionImpl(app, name, value, what, lo, hi, default_value);
}

void AddRangedOption(CLI::App& app, const std::string& name, double* value, const std::string& what,
                     double lo, double hi, double default_value) {
  AddRangedOptionImpl(app, name, value, what, lo, hi, default_value);
}

void FinalSelectionOverrides::ApplyTo(search::TuneOptions* tune) const {
  tune->final_candidates = candidates;
  tune->final_min_total_ms = min_time_ms;
  tune->final_soak_ms = soak_ms;
  tune->final_budget_s = budget_s;
  tune->final_passes = passes;
}

void AddFinalSelectionOptions(CLI::App& app, FinalSelectionOverrides* f, const std::string& what) {
  app.add_option("--final-candidates", f->candidates,
                 "after the last round, time " + what +
                     " N fastest schedules again in full (20+ runs, --final-min-time-ms) and "
                     "pick the best by that; -1 = the target's choice (8 on cuda, 0 on cpu), "
                     "0 = off")
      ->capture_default_str()
      ->check(CLI::Range(-1, 4096))
      ->transform(NumberText(true, "-1..4096"));  // runs before the range check
  AddRangedOption(app, "--final-min-time-ms", &f->min_time_ms,
                  "summed run time of each final timing at least, ms (held timings, e.g. 1000, "
                  "rank long GPU kernels as they run at the power limit)",
                  0.0, 60000.0, f->min_time_ms);
  AddRangedOption(app, "--final-soak-ms", &f->soak_ms,
                  "untimed runs before each final timing, ms of wall time (e.g. 500: each "
                  "schedule is timed at the steady state it brings the device to, on a GPU the "
                  "power limit for long GEMMs, not at the temperature the previous one left; "
                  "the run timeout grows by it; a log's final timings taken with less than half "
                  "of it are taken again)",
                  0.0, 60000.0, f->soak_ms);
  AddRangedOption(app, "--final-budget-s", &f->budget_s,
                  "estimated time of the final selection at most, s (per schedule: its build, "
                  "check per pass, soak and run, plus twice the final timing)",
                  0.0, 3600.0, f->budget_s);
  AddRangedOption(app, "--final-passes", &f->passes,
                  "time each schedule of the final selection in N parts, the schedules in turn "
                  "and the order reversed each pass, the last one fastest first (2 passes: "
                  "C B A, A B C), each part with 1/N of the runs (rounded up), run time and soak "
                  "(the batch's first part the whole soak; each part loads and checks the "
                  "schedule again), so that with an even N a clock drift linear in time weighs "
                  "on all alike; 1 = one schedule after another",
                  1, 64, f->passes);
}

void AddCandidateTimingOptions(CLI::App& app, TimingOverrides* t) {
  const runtime::TimingOptions defaults = search::CandidateMeasureOptions().timing;
  AddRangedOption(app, "--min-runs", &t->min_runs, "timed runs per candidate at least", 1, 100000,
                  defaults.min_runs);
  AddRangedOption(app, "--min-time-ms", &t->min_time_ms,
                  "summed time of a candidate's timed runs at least, ms", 0.0, 60000.0,
                  defaults.min_total_ms);
  AddRangedOption(app, "--warmup", &t->warmup, "untimed runs per candidate before timing", 0, 10000,
                  defaults.warmup_runs);
  AddRangedOption(app, "--screen-factor", &t->screen_factor,
                  "staged timing: a candidate slower than this factor times the best so far "
                  "keeps its first short timing (cuda: its two check runs; cpu: 1 warm-up + 3 "
                  "runs) instead of the full timing; below 1 (e.g. 0) times every candidate "
                  "fully",
                  0.0, 1000.0, DefaultTuneOptions().screen_factor);
}

void SearchOverrides::ApplyTo(search::SearchOptions& search) const {
  if (population > 0) search.population = population;
  if (generations >= 0) search.generations = generations;
  if (crossover_probability >= 0) search.crossover_probability = crossover_probability;
  if (max_family_fraction >= 0) search.max_family_fraction = max_family_fraction;
  if (local_search_fraction >= 0) search.local_search_fraction = local_search_fraction;
  if (local_search_states > 0) search.local_search_states = local_search_states;
  if (family_dominance >= 0) search.family_dominance = family_dominance;
  search.precision = PrecisionOption(precision);
}

void AddPrecisionOption(CLI::App& app, std::string* precision) {
  app.add_option("--precision", *precision,
                 "float32 arithmetic: ieee (float32, or 3xTF32 tensor-core kernels no less "
                 "accurate than float32) or tf32 (one-pass TF32 kernels too, judged with TF32's "
                 "unit roundoff; opt-in, as PyTorch's allow_tf32); part of the workload key "
                 "(default ieee)")
      ->check(CLI::IsMember({"ieee", "tf32"}));
}

measure::Fp32Precision PrecisionOption(const std::string& text) {
  return text == "tf32" ? measure::Fp32Precision::kTf32 : measure::Fp32Precision::kIeee;
}

search::TuneOptions TuneOptionsFor(const std::string& log, uint64_t seed, bool xgboost,
                                   const SearchOverrides& search, const TimingOverrides& timing,
                                   int host_threads, bool quiet) {
  search::TuneOptions tune;
  tune.log_path = log;
  tune.seed = seed;
  tune.use_xgboost = xgboost;
  search.ApplyTo(tune.search);
  tune.measure.seed = seed + 1;
  timing.ApplyTo(tune.measure.timing);
  if (timing.screen_factor >= 0) tune.screen_factor = timing.screen_factor;
  tune.measure.host_threads = host_threads;
  tune.quiet = quiet;
  return tune;
}

void AddSearchOptions(CLI::App& app, SearchOverrides* s) {
  const search::SearchOptions defaults;
  AddRangedOption(app, "--population", &s->population, "evolutionary search population", 1, 100000,
                  defaults.population);
  AddRangedOption(app, "--generations", &s->generations, "evolutionary search generations", 0, 100,
                  defaults.generations);
  // A fraction in 0..1; CLI::Range lets "nan" through, hence the number check (first: "0.25abc"
  // is not a number rather than out of range; " 0.5" and "0.5 " are 0.5).
  const auto add_fraction = [&app](const std::string& name, double* value,
                                   const std::string& help) {
    app.add_option(name, *value, help)
        ->check(CLI::Range(0.0, 1.0))
        ->transform(NumberText(false, "0..1"));  // runs first
  };
  add_fraction("--crossover-probability", &s->crossover_probability,
               absl::StrCat("chance that a child of the evolutionary search is a crossover of "
                            "two parents' decisions instead of a mutation, 0..1 (default ",
                            defaults.crossover_probability, "; 0 disables)"));
  add_fraction("--max-family-fraction", &s->max_family_fraction,
               absl::StrCat("largest share of a round's model-ranked picks from one tile family "
                            "(cuda: block tile and threads per dimension; cpu: tile span and "
                            "innermost length), 0..1, at least one pick per family; exceeded "
                            "only when too few families exist (default ",
                            defaults.max_family_fraction, "; 1 disables)"));
  add_fraction("--local-search-fraction", &s->local_search_fraction,
               "share of each tuning round that starts with measured schedules "
               "(not the first of a new log) taken from the model's best unmeasured "
               "one-decision neighbors of the best measured schedules, the rest "
               "from the evolutionary search, 0..1 (default: 0.25 for cuda, 0 for cpu; "
               "0 disables)");
  app.add_option("--family-dominance", s->family_dominance,
                 absl::StrCat("when the best tensor-core schedule measured so far is this many "
                              "times faster than the best SIMT one (or the other way round), "
                              "the slower family gets only ",
                              defaults.family_floor,
                              " of each round's fresh states; 0 disables, else >= 1 (default ",
                              defaults.family_dominance, ")"))
      ->transform(NumberText(false, "0 or 1..1000"))
      ->check(CLI::Validator(
          [](const std::string& text) {
            // A positive value that underflows to 0 (1e-400) is not "off".
            errno = 0;
            const double v = std::strtod(text.c_str(), nullptr);
            return (v == 0 && errno != ERANGE) || (v >= 1 && v <= 1000)
                       ? std::string()
                       : absl::StrCat("'", text, "' is not 0 or in 1..1000");
          },
          "0 or 1..1000", "FAMILY_DOMINANCE"));
  AddRangedOption(app, "--local-search-states", &s->local_search_states,
                  "best measured schedules whose neighbors local search ranks", 1, 1000,
                  defaults.local_search_states);
}

}  // namespace tilesearch::tools
