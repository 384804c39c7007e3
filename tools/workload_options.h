// Command-line options shared by the commands: a workload given by --op/--shape/--attr/--dtype,
// optionally a schedule file (--schedule) whose workload they override, and the target (--target)
// (show, check, tune, ...); the timing overrides of measuring commands; the search overrides of
// tuning commands (tune, bench, tune-graph).
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "ir/ops/registry.h"
#include "runtime/timing.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "search/evolutionary_search.h"
#include "search/tuner.h"

namespace tilesearch::tools {

struct WorkloadOptions {
  std::string schedule;             // --schedule FILE; "" = none
  std::string op;                   // --op NAME; "" = not given
  std::vector<std::string> shapes;  // --shape, once per input
  std::vector<std::string> attrs;   // --attr name=value
  std::string dtype;                // --dtype; "" = not given
  std::string target;               // --target; "" = not given
};

/// Registers --schedule, --op, --shape, --attr, --dtype and --target on `app`, writing `options`
/// (which must outlive the parse).
void AddWorkloadOptions(CLI::App& app, WorkloadOptions& options);

/// The target a --target value names: "auto" is the CUDA target of device 0 (its arch and limits,
/// runtime::TargetFromDevice) when a CUDA driver and device answer, else the host cpu; anything
/// else goes to ParseTarget. Errors: those of ParseTarget ("unknown target ...").
absl::StatusOr<Target> ResolveTargetOption(const std::string& text);

/// Parses --shape / --attr / --dtype into OpArgs. Errors: a bad shape, an attribute not of the
/// form name=value or given twice, an unknown dtype.
absl::StatusOr<ir::OpArgs> ParseOpArgs(const WorkloadOptions& options);

/// The schedule the options describe: the --schedule file, or (without one) an empty schedule of
/// the --op workload, named "<command line>", for the cpu target unless --target says otherwise.
/// Overrides of a file: --op replaces the operator (and drops the file's attributes when it names
/// a different one), --shape replaces all input shapes, each --attr sets one attribute, --dtype
/// and --target replace the file's; a fused workload's nodes are kept unless --op names another
/// operator (--shape then replaces its placeholder shapes). Errors: neither --schedule nor --op
/// ("give --op NAME or --schedule FILE"), "--op fused needs its nodes: ..." without a fused
/// --schedule file, every error of ScheduleFile::Load and ParseOpArgs, an unknown target.
absl::StatusOr<schedule::ScheduleFile> ScheduleFromOptions(const WorkloadOptions& options);

/// Lowers a resolved schedule for the file's target. Errors: those of schedule::Lower, prefixed
/// "<source>: cannot lower for <target>: ".
absl::StatusOr<schedule::LoweredKernel> LowerScheduleFile(
    const schedule::ScheduleFile& file, const schedule::ResolvedSchedule& resolved);

/// A CLI11 transform for a number option, to run before its range check (Option::transform puts
/// it first): strips leading and trailing ASCII whitespace (" 4" and "4 " both read as 4) and
/// refuses text that is not a decimal integer (`integer`: "abc", "", "4.5", "0x10", "1e3") or not
/// a finite number (else: "abc", "", "nan", "inf", "0.5x") with "'<text>' is not an integer in
/// <range>" / "'<text>' is not a number in <range>" (`range` as written, e.g. "1..1000"). An
/// integer is rewritten in canonical decimal ("+010" → "10"; CLI11 alone would read "010" as
/// octal); integers beyond 64 bits are left to the range check.
CLI::Validator NumberText(bool integer, const std::string& range);

/// Adds option `name` writing `*value` (which must outlive the parse), help
/// "<what>, lo..hi (default <default_value>)", checked by NumberText and then CLI::Range(lo, hi):
/// "--states: 'abc' is not an integer in 1..1000", "--states: Value 0 not in range 1 to 1000".
void AddRangedOption(CLI::App& app, const std::string& name, int* value, const std::string& what,
                     int lo, int hi, int default_value);
void AddRangedOption(CLI::App& app, const std::string& name, double* value, const std::string& what,
                     double lo, double hi, double default_value);

/// Timing overrides of the commands that measure candidates or runs (tune, bench, tune-graph,
/// run-graph); a negative value keeps runtime::TimingOptions' default.
struct TimingOverrides {
  int min_runs = -1;
  double min_time_ms = -1;
  int warmup = -1;
  /// --screen-factor: search::TuneOptions::screen_factor when >= 0 (TuneOptionsFor applies it).
  double screen_factor = -1;
  /// Sets the overridden fields of `timing`, raising max_runs to min_runs when it is below.
  void ApplyTo(runtime::TimingOptions& timing) const;
};

/// Adds --min-runs (1..100000), --min-time-ms (0..60000 ms) and --warmup (0..10000) for measured
/// candidates, their help giving the tuner's candidate timing (search::CandidateMeasureOptions:
/// 5 runs, min time 5 ms, the rest runtime::TimingOptions'), and --screen-factor (0..1000,
/// staged timing; search::TuneOptions' default), writing into `t`.
void AddCandidateTimingOptions(CLI::App& app, TimingOverrides* t);

/// search::TuneOptions' defaults, built once (GCC 12 at -O3 warns of "maybe uninitialized"
/// members in a temporary TuneOptions built only to read one default).
const search::TuneOptions& DefaultTuneOptions();

/// The final selection's settings of the commands that tune (search::TuneOptions::
/// final_candidates, final_min_total_ms, final_soak_ms, final_budget_s, final_passes; their
/// defaults).
struct FinalSelectionOverrides {
  int candidates = -1;  // --final-candidates: -1 the target's choice, 0 off
  // --final-min-time-ms: summed run time of each final timing, ms
  double min_time_ms = DefaultTuneOptions().final_min_total_ms;
  // --final-soak-ms: untimed runs before each final timing, ms
  double soak_ms = DefaultTuneOptions().final_soak_ms;
  // --final-budget-s: the selection's estimated time at most, seconds
  double budget_s = DefaultTuneOptions().final_budget_s;
  // --final-passes: the final timing of each schedule in this many interleaved parts
  int passes = DefaultTuneOptions().final_passes;
  /// Writes them into `tune`.
  void ApplyTo(search::TuneOptions* tune) const;
};

/// --final-candidates N (-1..4096; -1 the target's choice, 0 off), --final-min-time-ms MS
/// (0..60000: at the power limit, a GEMM of milliseconds times slower held than in a 100 ms
/// burst, and kernels rank differently there), --final-soak-ms MS (0..60000: untimed runs first,
/// so each schedule is timed at its own steady state), --final-budget-s S (0..3600) and
/// --final-passes N (1..64: each final timing in N interleaved parts), writing
/// into `f`; `what` names whose schedules they time ("the" or "each task's").
void AddFinalSelectionOptions(CLI::App& app, FinalSelectionOverrides* f, const std::string& what);

/// Evolutionary-search overrides of the commands that tune (tune, bench, tune-graph); a negative
/// value keeps search::SearchOptions' default.
struct SearchOverrides {
  int population = -1;
  int generations = -1;
  double crossover_probability = -1;
  double max_family_fraction = -1;
  double local_search_fraction = -1;
  int local_search_states = -1;
  double family_dominance = -1;
  /// --precision (AddPrecisionOption): "ieee" (the default) or "tf32".
  std::string precision = "ieee";
  /// Sets the overridden fields of `search`.
  void ApplyTo(search::SearchOptions& search) const;
};

/// The search::TuneOptions every tuning command starts from: `log`, the search seed `seed` (the
/// measurement's check inputs get seed + 1), XGBoost or RandomModel, the search and timing
/// overrides, the cpu target's parallel-loop threads (0 = every usable core) and quiet mode. The
/// caller sets the budget (trials, per_round) and anything else.
search::TuneOptions TuneOptionsFor(const std::string& log, uint64_t seed, bool xgboost,
                                   const SearchOverrides& search, const TimingOverrides& timing,
                                   int host_threads, bool quiet);

/// Adds --population (1..100000), --generations (0..100), --crossover-probability,
/// --max-family-fraction and --local-search-fraction (0..1; "0.25abc" is "not a number", "nan"
/// too) and --local-search-states (1..1000), their help giving search::SearchOptions' defaults,
/// writing into `s`.
void AddSearchOptions(CLI::App& app, SearchOverrides* s);

/// Adds --precision ieee|tf32 (measure::Fp32Precision: how float32 problems may compute and are
/// judged; recorded in the workload key and every log record) writing `*precision` (which must
/// outlive the parse; CLI11 refuses other values).
void AddPrecisionOption(CLI::App& app, std::string* precision);

/// The measure::Fp32Precision of a --precision value ("ieee" for anything but "tf32": the option
/// only admits the two).
measure::Fp32Precision PrecisionOption(const std::string& text);

}  // namespace tilesearch::tools
