// `tilesearch predict`: a schedule for a workload that was never tuned, chosen without measuring
// (search/predict.h): the fastest records of the nearest tuned shapes of the same operator in the
// given logs, transferred to the new extents, and fresh samples, ranked by a cost model; then
// rebuilt and checked like a replayed record, and written as a schedule file and / or artifacts.
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "base/write_file.h"
#include "costmodel/xgboost_model.h"
#include "schedule/schedule_file.h"
#include "search/api.h"
#include "search/log_io.h"
#include "search/predict.h"
#include "search/replay.h"
#include "tools/commands.h"
#include "tools/model_options.h"
#include "tools/number_text.h"
#include "tools/workload_options.h"

namespace tilesearch::tools {
namespace {

struct PredictCommandOptions {
  WorkloadOptions workload;  // op / shapes / attrs / dtype / target
  std::vector<std::string> logs;
  std::string model;
  search::PredictOptions predict;
  std::string precision = "ieee";  // --precision: records of that precision only
  std::string schedule_out;
  std::string out;
  std::string name;
  bool no_check = false;
};

// Every record of every log (their warnings on stderr).
absl::StatusOr<std::vector<search::MeasureRecord>> ReadRecords(
    const std::vector<std::string>& logs) {
  std::vector<search::MeasureRecord> records;
  for (const std::string& path : logs) {
    ASSIGN_OR_RETURN(search::LogContents contents, search::ReadLog(path));
    for (const std::string& w : contents.warnings) std::cerr << "warning: " << w << "\n";
    for (search::MeasureRecord& r : contents.records) records.push_back(std::move(r));
  }
  return records;
}

// Checks the predicted schedule's kernel and writes the artifacts when asked; 1 when the check
// fails.
absl::StatusOr<int> CheckAndWrite(const search::MeasureRecord& record,
                                  const PredictCommandOptions& options) {
  search::BuildOptions build;
  build.name = options.name;
  ASSIGN_OR_RETURN(search::KernelArtifact artifact, search::BuildKernel(record, build));
  std::unique_ptr<search::CheckOutcome> check;
  if (options.no_check) {
    std::cout << "check: skipped (--no-check)\n";
  } else {
    ASSIGN_OR_RETURN(search::CheckOutcome outcome, search::CheckKernel(artifact));
    check = std::make_unique<search::CheckOutcome>(std::move(outcome));
    if (!check->checked) {
      std::cout << "check: " << check->note << "\n";
    } else if (check->passed) {
      std::cout << "check: passed (" << check->result.check.trials
                << " trials on fresh inputs, max abs error "
                << Sci(check->result.check.max_abs_error) << ")\n";
    } else {
      std::cout << "check: FAILED: " << check->note << "\n";
      return 1;
    }
  }
  if (!options.out.empty()) {
    ASSIGN_OR_RETURN(std::vector<std::string> written,
                     search::WriteArtifacts(artifact, options.out, check.get()));
    for (const std::string& path : written) std::cout << "wrote: " << path << "\n";
  }
  return 0;
}

absl::StatusOr<int> Predict(const PredictCommandOptions& options) {
  if (options.workload.op.empty()) return absl::InvalidArgumentError("give --op NAME");
  if (!options.name.empty()) RETURN_IF_ERROR(search::ValidateArtifactName(options.name));
  if (!options.out.empty()) RETURN_IF_ERROR(search::ValidateArtifactDir(options.out));
  schedule::Workload workload;
  workload.op = options.workload.op;
  ASSIGN_OR_RETURN(workload.args, ParseOpArgs(options.workload));
  absl::StatusOr<ir::ComputeDAG> dag = workload.Build();
  if (!dag.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("workload ", workload.ToString(), ": ", dag.status().message()));
  }
  ASSIGN_OR_RETURN(const Target target,
                   TargetFromString(options.workload.target.empty() ? std::string("auto")
                                                                    : options.workload.target));
  ASSIGN_OR_RETURN(const std::vector<search::MeasureRecord> records, ReadRecords(options.logs));
  ASSIGN_OR_RETURN(std::unique_ptr<costmodel::XGBoostModel> model,
                   RankingModel(options.model, target));
  if (options.logs.empty() && model == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "give --log FILE (tuned shapes to transfer from) or --model FILE (to rank samples: ",
        target.ToString(), " has no default model)"));
  }
  search::PredictOptions predict = options.predict;
  predict.precision = PrecisionOption(options.precision);
  ASSIGN_OR_RETURN(search::PredictedSchedule p,
                   search::PredictSchedule(*dag, workload, target, records, model.get(), predict));
  std::cout << "workload: " << workload.ToString() << " (key " << dag->WorkloadKey() << ")\n"
            << "target: " << target.ToString() << "\n"
            << "candidates: " << p.transferred + p.variants << " transferred, " << p.sampled
            << " sampled"
            << (model ? ", ranked by the cost model" : ", no model (nearest fastest record)")
            << "\n";
  if (p.variants > 0 || p.related) {
    std::cout << "transferred: " << p.transferred << " records, " << p.variants
              << " adapted variants"
              << (p.related ? ", from relatives (no workload of this operator, dtype and "
                              "attributes transferred)"
                            : "")
              << "\n";
  }
  std::cout << "prediction: " << p.origin;
  if (!std::isnan(p.score)) std::cout << ", score " << Fixed(p.score, 4);
  std::cout << "\n";
  for (const std::string& note : p.notes) std::cout << "not transferred: " << note << "\n";
  for (const schedule::Step& s : p.state.steps()) {
    std::cout << "  " << schedule::StepToString(s) << "\n";
  }
  schedule::ScheduleFile file;
  file.comment = absl::StrCat("predicted without measuring: ", p.origin);
  file.workload = workload;
  file.target = target;
  file.steps = p.state.steps();
  if (!options.schedule_out.empty()) {
    RETURN_IF_ERROR(WriteFile(options.schedule_out, file.ToText() + "\n"));
    std::cout << "wrote: " << options.schedule_out << "\n";
  }
  search::MeasureRecord record;
  record.workload = workload;
  record.workload_key = dag->WorkloadKey();
  record.target = target;
  record.steps = p.state.steps();
  record.precision = predict.precision;
  record.workload_key = measure::PrecisionWorkloadKey(dag->WorkloadKey(), predict.precision);
  return CheckAndWrite(record, options);
}

}  // namespace

ExitCodeAction AddPredictCommand(CLI::App& app) {
  auto options = std::make_shared<PredictCommandOptions>();
  app.add_option("--op", options->workload.op, "operator name (see 'tilesearch ops')")->required();
  app.add_option("--shape", options->workload.shapes, "input shape, e.g. 512x512; once per input");
  app.add_option("--attr", options->workload.attrs, "operator attribute name=value");
  app.add_option("--dtype", options->workload.dtype, "element type (default float32)");
  app.add_option("--target", options->workload.target, "auto (default), cpu, cuda -arch=sm_XX");
  app.add_option("--log", options->logs,
                 "tuning log to transfer tuned shapes from (repeatable); its records of the same "
                 "operator, dtype, attributes and target are candidates");
  app.add_option("--model", options->model,
                 "cost model file that ranks the transferred and sampled candidates (default: the "
                 "target's shipped model, when there is one; none: the nearest shape's fastest "
                 "record, transferred)");
  app.add_option("--nearest", options->predict.nearest_workloads,
                 "tuned workloads to transfer from, nearest first")
      ->check(CLI::Range(1, 1000));
  app.add_option("--records", options->predict.records_per_workload,
                 "fastest distinct records transferred per workload")
      ->check(CLI::Range(1, 1000));
  app.add_option("--fresh-samples", options->predict.fresh_samples,
                 "states sampled from the sketches beside them (with --model)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--seed", options->predict.seed, "seed of the fresh samples");
  AddPrecisionOption(app, &options->precision);
  app.add_option("--schedule-out", options->schedule_out, "write the schedule file here");
  app.add_option("--out", options->out, "write the kernel artifacts here (as replay does)");
  app.add_option("--name", options->name, "artifact base name (default <op>_<key prefix>)");
  app.add_flag("--no-check", options->no_check,
               "do not check the kernel against the unscheduled program");
  return [options]() { return Predict(*options); };
}

}  // namespace tilesearch::tools
