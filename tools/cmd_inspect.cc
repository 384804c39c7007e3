// `tilesearch inspect`: per (workload, target) summaries of tuning logs (search/log_io.h): trials,
// best, errors, the trial reaching 90% of the best, the tuning curve, the cost model's quality per
// round; optionally an SVG plot of the tuning curves (search/curve_svg.h) and a JSON summary.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/compute_dag.h"
#include "nlohmann/json.hpp"
#include "schedule/schedule_file.h"
#include "search/curve_svg.h"
#include "search/log_io.h"
#include "search/measure_record.h"
#include "tools/commands.h"
#include "tools/number_text.h"
#include "tools/workload_options.h"

namespace tilesearch::tools {
namespace {

using nlohmann::json;

struct InspectCommandOptions {
  std::vector<std::string> logs;  // --log, once per log
  WorkloadOptions workload;       // --op/--shape/--attr/--dtype/--schedule filter, --target
  std::string workload_key;       // --workload-key
  int curve_points = 10;
  std::string plot;  // --plot FILE; "" = none
  std::string json;  // --json FILE; "" = none
};

struct InspectedLog {
  std::string path;
  search::LogContents contents;
  std::vector<search::WorkloadSummary> summaries;
};

// For rounds spread over MPI ranks, each rank's trials and wall seconds summed over them, one line
// per rank ("  rank 1: 96 trials, build 6.1 s, measure 4.0 s, idle 0.8 s"), so that imbalance
// shows. Empty when no round was spread.
std::string RankSplit(const search::WorkloadSummary& s) {
  std::map<int, search::RankTiming> sums;
  for (const search::RoundRecord& r : s.rounds) {
    for (const search::RankTiming& t : r.ranks) {
      search::RankTiming& sum = sums[t.rank];
      sum.trials += t.trials;
      sum.build_s += t.build_s;
      sum.measure_s += t.measure_s;
      sum.idle_s += t.idle_s;
    }
  }
  std::string out;
  for (const auto& [rank, t] : sums) {
    absl::StrAppend(&out, "  rank ", rank, ": ", t.trials, " trials, build ", Fixed(t.build_s, 1),
                    " s, measure ", Fixed(t.measure_s, 1), " s, idle ", Fixed(t.idle_s, 1), " s\n");
  }
  return out;
}

// The measure phase split, summed over the round lines that carry it (RoundRecord::
// measure_split): "  measure split over 3 rounds: worker setups 1 (2.1 s), candidates 30.2 s
// (0.236 s per trial), task data 0.4 s, other 0.3 s". Empty when no round carries it (older logs).
std::string MeasureSplitText(const search::WorkloadSummary& s) {
  search::MeasureSplit sum;
  double measure_s = 0;
  int64_t rounds = 0, trials = 0;
  for (const search::RoundRecord& r : s.rounds) {
    if (r.measure_split.empty()) continue;
    sum.Add(r.measure_split);
    measure_s += r.measure_s;
    trials += r.trials;
    ++rounds;
  }
  if (rounds == 0) return "";
  return absl::StrCat(
      "  measure split over ", rounds, rounds == 1 ? " round" : " rounds", ": worker setups ",
      sum.worker_setups, " (", Fixed(sum.setup_s, 1), " s), candidates ", Fixed(sum.items_s, 1),
      " s (", trials > 0 ? Fixed(sum.items_s / static_cast<double>(trials), 3) : "-",
      " s per trial), task data ", Fixed(sum.prepare_s, 1), " s, other ",
      Fixed(std::max(0.0, measure_s - sum.setup_s - sum.items_s - sum.prepare_s), 1), " s\n");
}

// Where the tuning time of a workload went, from its round lines (each carries its phases' wall
// seconds): "  time over 3 rounds: 12.4 s, 5.8 trials/s; train 0.1 s (1%), search 2.0 s (16%),
// build 3.3 s (27%), measure 7.0 s (56%)". Trials/s counts the rounds' trials over the sum of
// their phases (time between rounds, e.g. a resume, is not counted; phases that overlap, with
// overlapped rounds or streaming builds, each count in full, so it is below the wall-clock rate).
// Empty without round lines.
std::string PhaseSplit(const search::WorkloadSummary& s) {
  if (s.rounds.empty()) return "";
  double phase[4] = {0, 0, 0, 0};
  int64_t trials = 0;
  for (const search::RoundRecord& r : s.rounds) {
    phase[0] += r.train_s;
    phase[1] += r.search_s;
    phase[2] += r.build_s;
    phase[3] += r.measure_s;
    trials += r.trials;
  }
  const double total = phase[0] + phase[1] + phase[2] + phase[3];
  auto fixed = [](double v, int digits) {
    std::ostringstream out;
    out.setf(std::ios::fixed);
    out.precision(digits);
    out << v;
    return out.str();
  };
  std::string out = absl::StrCat(
      "  time over ", s.rounds.size(),
      s.rounds.size() == 1 ? " round: " : " rounds: ", fixed(total, 1), " s, ",
      total > 0 ? fixed(static_cast<double>(trials) / total, 2) : std::string("-"), " trials/s");
  const char* names[4] = {"train", "search", "build", "measure"};
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&out, i == 0 ? "; " : ", ", names[i], " ", fixed(phase[i], 1), " s (",
                    total > 0 ? fixed(100 * phase[i] / total, 0) : std::string("-"), "%)");
  }
  return out + "\n" + MeasureSplitText(s) + RankSplit(s);
}

json NumberOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json SummaryJson(const search::WorkloadSummary& s) {
  json curve = json::array();
  for (const search::CurvePoint& c : s.curve) {
    curve.push_back({{"trials", c.trials},
                     {"trial", c.trial},
                     {"best_median_ms", NumberOrNull(c.best_median_ms)},
                     {"best_throughput", search::SummaryThroughput(s, c.best_median_ms)}});
  }
  json rounds = json::array();
  for (const search::RoundRecord& r : s.rounds) rounds.push_back(search::RoundRecordToJson(r));
  return {{"workload_key", s.workload_key},
          {"workload", schedule::WorkloadToJson(s.workload)},
          {"target", s.target.ToString()},
          {"trials", s.trials},
          {"valid", s.valid},
          {"best_median_ms", NumberOrNull(s.best_median_ms)},
          {"best_trial", s.best_trial},
          {"flops", s.flops},
          {"bytes", s.bytes},
          {"unit", search::SummaryUnit(s)},
          {"best_throughput", search::SummaryThroughput(s, s.best_median_ms)},
          {"trials_to_90_percent", s.trials_to_90_percent},
          {"errors", s.errors},
          {"curve", std::move(curve)},
          {"rounds", std::move(rounds)}};
}

// One series per (log, workload): labelled by the log's file name when several logs are plotted,
// else by the workload and target; with the unit when the plot mixes GFLOP/s and GB/s.
search::CurveSeries SeriesOf(const InspectedLog& log, const search::WorkloadSummary& s,
                             bool several_logs, bool mixed_units) {
  search::CurveSeries series;
  const std::string workload = absl::StrCat(s.workload.ToString(), " (", s.target.ToString(), ")");
  if (several_logs) {
    series.label = std::filesystem::path(log.path).filename().string();
    if (log.summaries.size() > 1) absl::StrAppend(&series.label, ": ", workload);
  } else {
    series.label = workload;
  }
  if (mixed_units) absl::StrAppend(&series.label, " [", search::SummaryUnit(s), "]");
  for (const search::CurvePoint& c : s.curve) {
    if (!std::isfinite(c.best_median_ms)) continue;
    series.points.emplace_back(static_cast<double>(c.trials),
                               search::SummaryThroughput(s, c.best_median_ms));
  }
  return series;
}

absl::Status WriteFile(const std::string& path, const std::string& text, const char* what) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << text;
  out.close();
  if (!out) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", what, " file '", path, "'"));
  }
  return absl::OkStatus();
}

// "log: x.jsonl (130 lines: 128 records, 2 round lines, 1 line could not be used (...), ...)\n".
std::string LogLineText(const InspectedLog& log) {
  const search::LogContents& c = log.contents;
  std::string text =
      absl::StrCat("log: ", log.path, " (", c.lines, " lines: ", c.records.size(), " records, ",
                   c.rounds.size(), c.rounds.size() == 1 ? " round line" : " round lines");
  if (c.corrupt_lines > 0) {
    absl::StrAppend(&text, ", ", c.corrupt_lines,
                    c.corrupt_lines == 1 ? " line could not be used" : " lines could not be used",
                    " (corrupt, truncated",
                    c.long_lines > 0 ? absl::StrCat(", ", c.long_lines, " over the length limit")
                                     : std::string(),
                    ")");
  }
  if (c.duplicate_records > 0) {
    absl::StrAppend(&text, ", ", c.duplicate_records, " duplicate records counted once");
  }
  if (c.remeasured_records > 0) {
    absl::StrAppend(&text, ", ", c.remeasured_records,
                    " records re-measured (the newest measurement of each is used)");
  }
  if (c.unused_remeasures > 0) {
    absl::StrAppend(&text, ", ", c.unused_remeasures,
                    " failed re-measurements not used (timeouts, no device)");
  }
  if (!c.unknown_fields.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, n] : c.unknown_fields) names.push_back(name);
    absl::StrAppend(&text, ", unknown fields ignored: ", absl::StrJoin(names, ", "));
  }
  if (c.inconsistent_records > 0) {
    absl::StrAppend(&text, ", ", c.inconsistent_records,
                    " records skipped (workload key does not match the workload)");
  }
  if (c.foreign_target_records > 0) {
    absl::StrAppend(&text, ", ", c.foreign_target_records,
                    " records of other targets filtered out");
  }
  if (c.other_workload_records > 0) {
    absl::StrAppend(&text, ", ", c.other_workload_records,
                    " records of other workloads filtered out");
  }
  return text + ")\n";
}

absl::StatusOr<int> Inspect(const InspectCommandOptions& options) {
  const bool by_workload = !options.workload.op.empty() || !options.workload.schedule.empty();
  if (by_workload && !options.workload_key.empty()) {
    return absl::InvalidArgumentError("give either --op/--schedule or --workload-key, not both");
  }
  search::ReadOptions read;
  read.verify_workload_keys = true;  // a record whose key does not match its workload is skipped
  std::string filter_text;
  if (by_workload) {
    WorkloadOptions w = options.workload;
    w.target.clear();  // the target filter is resolved below, only when given
    ASSIGN_OR_RETURN(schedule::ScheduleFile file, ScheduleFromOptions(w));
    ASSIGN_OR_RETURN(ir::ComputeDAG dag, file.workload.Build());
    read.workload_key = dag.WorkloadKey();
    filter_text =
        absl::StrCat("of workload ", file.workload.ToString(), " (key ", read.workload_key, ")");
  } else if (!options.workload_key.empty()) {
    read.workload_key = options.workload_key;
    filter_text = absl::StrCat("of workload key ", read.workload_key);
  }
  if (!options.workload.target.empty()) {
    ASSIGN_OR_RETURN(read.target, ResolveTargetOption(options.workload.target));
    // The user asked for one target: records of others are expected, counted on the "log:" line.
    read.warn_other_targets = false;
    absl::StrAppend(&filter_text, filter_text.empty() ? "" : " ", "on ", read.target->ToString());
  }
  // --plot / --json must never overwrite a log being inspected.
  for (const std::string* out : {&options.plot, &options.json}) {
    if (out->empty()) continue;
    for (const std::string& path : options.logs) {
      std::error_code ec;
      if (*out == path || std::filesystem::equivalent(*out, path, ec)) {
        return absl::InvalidArgumentError(
            absl::StrCat("output '", *out, "' is the log being inspected; give another file name"));
      }
    }
  }
  // Read everything before printing: a missing log is a user error with nothing on stdout.
  std::vector<InspectedLog> logs;
  for (const std::string& path : options.logs) {
    InspectedLog log;
    log.path = path;
    ASSIGN_OR_RETURN(log.contents, search::ReadLog(path, read));
    log.summaries = search::SummarizeLog(log.contents.records, log.contents.rounds);
    logs.push_back(std::move(log));
  }
  size_t total = 0;
  for (const InspectedLog& log : logs) total += log.summaries.size();
  if (!filter_text.empty() && total == 0) {
    // Say what the logs do hold: a wrong shape or dtype is the usual reason.
    std::string others;
    for (const InspectedLog& log : logs) {
      const std::string text = search::OtherWorkloadsText(log.contents, options.workload.op);
      if (!text.empty()) absl::StrAppend(&others, "; ", log.path, ": ", text);
    }
    return absl::NotFoundError(
        absl::StrCat("no record ", filter_text, " in ", absl::StrJoin(options.logs, ", "), others));
  }

  for (const InspectedLog& log : logs) {
    for (const std::string& w : log.contents.warnings) {
      std::cerr << "tilesearch: warning: " << w << "\n";
    }
    std::cout << LogLineText(log);
    if (log.summaries.empty()) {
      std::cout << "  no records\n";
      continue;
    }
    for (const search::WorkloadSummary& s : log.summaries) {
      std::cout << search::FormatSummary({s}, options.curve_points) << PhaseSplit(s);
    }
  }

  if (!options.plot.empty()) {
    bool all_memory = true, any_memory = false;
    for (const InspectedLog& log : logs) {
      for (const search::WorkloadSummary& s : log.summaries) {
        all_memory = all_memory && s.memory_bound;
        any_memory = any_memory || s.memory_bound;
      }
    }
    const bool mixed = any_memory && !all_memory;
    std::vector<search::CurveSeries> series;
    for (const InspectedLog& log : logs) {
      for (const search::WorkloadSummary& s : log.summaries) {
        series.push_back(SeriesOf(log, s, logs.size() > 1, mixed));
      }
    }
    search::PlotOptions plot;
    plot.title = logs.size() == 1
                     ? absl::StrCat("tuning curve: ",
                                    std::filesystem::path(logs[0].path).filename().string())
                     : "tuning curves";
    plot.y_label = all_memory ? "best GB/s so far"
                   : mixed    ? "best so far (GFLOP/s or GB/s, see legend)"
                              : "best GFLOP/s so far";
    ASSIGN_OR_RETURN(std::string svg, search::CurveSvg(series, plot));
    RETURN_IF_ERROR(WriteFile(options.plot, svg, "--plot"));
    std::cout << "plot: " << options.plot << " (" << series.size() << " curves)\n";
  }
  if (!options.json.empty()) {
    json j = {{"logs", json::array()}};
    for (const InspectedLog& log : logs) {
      json workloads = json::array();
      for (const search::WorkloadSummary& s : log.summaries) workloads.push_back(SummaryJson(s));
      j["logs"].push_back({{"path", log.path},
                           {"lines", log.contents.lines},
                           {"records", log.contents.records.size()},
                           {"round_lines", log.contents.rounds.size()},
                           {"corrupt_lines", log.contents.corrupt_lines},
                           {"long_lines", log.contents.long_lines},
                           {"duplicate_records", log.contents.duplicate_records},
                           {"remeasured_records", log.contents.remeasured_records},
                           {"unused_remeasures", log.contents.unused_remeasures},
                           {"unknown_fields", log.contents.unknown_fields},
                           {"inconsistent_records", log.contents.inconsistent_records},
                           {"warnings", log.contents.warnings},
                           {"workloads", std::move(workloads)}});
    }
    RETURN_IF_ERROR(WriteFile(
        options.json, j.dump(2, ' ', false, json::error_handler_t::replace) + "\n", "--json"));
  }
  return 0;
}

}  // namespace

ExitCodeAction AddInspectCommand(CLI::App& app) {
  auto options = std::make_shared<InspectCommandOptions>();
  app.add_option("--log", options->logs,
                 "tuning log (JSON Lines); repeat to compare logs (e.g. XGBoost vs random model)")
      ->required();
  AddWorkloadOptions(app, options->workload);
  // Here --target filters; it has no default.
  app.get_option("--target")
      ->description(
          "only records of this target: cpu, cuda, cuda -arch=sm_XX or auto (cuda when a "
          "CUDA device answers, else cpu); default: every target");
  app.get_option("--schedule")
      ->description("only records of this schedule file's workload (its steps are ignored)");
  app.add_option("--workload-key", options->workload_key,
                 "only this workload key (16 hex digits, as printed by show / inspect)");
  app.add_option("--curve-points", options->curve_points,
                 "tuning-curve lines per workload, 1..100000")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000))
      ->transform(NumberText(true, "1..100000"));  // runs before the range check
  app.add_option("--plot", options->plot,
                 "write an SVG of best-so-far throughput vs trials (one curve per workload and "
                 "log)");
  app.add_option("--json", options->json, "write the summaries as JSON");
  return [options]() { return Inspect(*options); };
}

}  // namespace tilesearch::tools
