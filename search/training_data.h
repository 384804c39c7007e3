// Cost-model training data from tuning logs of many workloads (TenSet, Zheng et al., NeurIPS'21
// datasets track: one dataset of measured programs over many tasks, labels normalized per task):
// every record of the chosen target is replayed (schedule::ReplaySteps), lowered and featurized
// (costmodel::ExtractLoweredFeatures) as the tuner does, and grouped by task (workload key).
// The throughput of a sample is 1 / its median time: within a task it orders programs as FLOP/s or
// bytes/s do, and labels are normalized per task (costmodel::NormalizedLabels), so the unit
// cancels.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "costmodel/cost_model.h"
#include "schedule/schedule_file.h"

namespace tilesearch::search {

/// One task's records, in log order (files in the order given, lines in file order).
struct TaskRecords {
  std::string workload_key;
  schedule::Workload workload;
  /// One per distinct schedule of the task (a schedule logged twice is kept once, the first
  /// time); task_id = the task's index in TrainingData::tasks; throughput 0 for failed trials; no
  /// features when the steps do not replay or the state does not lower.
  std::vector<costmodel::TrainingSample> samples;
  /// Median time (ms) of each sample's record; +inf for failed trials.
  std::vector<double> median_ms;
};

/// Records of many workloads on one target.
struct TrainingData {
  Target target;
  std::vector<TaskRecords> tasks;     // in order of first appearance
  std::vector<std::string> logs;      // the log files read
  int64_t records = 0;                // samples kept (over all tasks)
  int64_t duplicates = 0;             // records of an already kept schedule, dropped
  int64_t capped = 0;                 // records past max_records_per_task, dropped
  int64_t without_features = 0;       // kept samples whose steps did not replay or lower
  std::vector<std::string> warnings;  // the logs' skipped lines (ReadLog), foreign targets
};

struct TrainingDataOptions {
  /// Keep only records of this target (kind and arch); nullopt: the logs must hold exactly one.
  std::optional<Target> target;
  /// Keep at most this many samples per task, the first in log order (0 = all). Balances a
  /// dataset where one workload has thousands of trials.
  int64_t max_records_per_task = 0;
  /// Threads that replay and featurize records (0 = every usable core).
  int threads = 0;
};

/// Log files named by `paths`: a file is itself; a directory gives every regular file under it
/// (recursively) whose name ends in ".jsonl", sorted by path. Errors: kNotFound "log path 'x' does
/// not exist"; kInvalidArgument "directory 'x' holds no .jsonl file".
absl::StatusOr<std::vector<std::string>> ExpandLogPaths(const std::vector<std::string>& paths);

/// Reads every log (ReadLog; corrupt lines become warnings), keeps the records of the target and
/// builds the samples. Errors: ExpandLogPaths' and ReadLog's; kInvalidArgument "the logs hold
/// records of several targets (cpu: 12, cuda -arch=sm_90: 300); choose one with --target" when no
/// target is given and there are several, or "no record of <target> in the logs".
absl::StatusOr<TrainingData> LoadTrainingData(const std::vector<std::string>& paths,
                                              const TrainingDataOptions& options = {});

}  // namespace tilesearch::search
