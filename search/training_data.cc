#include "search/training_data.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "base/cpu_count.h"
#include "base/status.h"
#include "costmodel/features.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "search/log_io.h"
#include "search/measure_record.h"

namespace tilesearch::search {
namespace {

// The features of a record's schedule, or none when its steps do not replay or it does not lower.
std::vector<std::vector<float>> FeaturesOf(const ir::ComputeDAG& dag, const MeasureRecord& r) {
  absl::StatusOr<schedule::State> state = schedule::ReplaySteps(dag, r.steps);
  if (!state.ok()) return {};
  absl::StatusOr<schedule::LoweredKernel> kernel = schedule::Lower(dag, *state, r.target);
  if (!kernel.ok()) return {};
  absl::StatusOr<costmodel::StoreFeatures> f =
      costmodel::ExtractLoweredFeatures(*state, *kernel, r.target);
  if (!f.ok()) return {};
  return *std::move(f);
}

// The one target of `records` when `wanted` is not given. Errors as LoadTrainingData.
absl::StatusOr<Target> ChooseTarget(const std::vector<MeasureRecord>& records,
                                    const std::optional<Target>& wanted) {
  if (wanted) return *wanted;
  std::map<std::string, int64_t> counts;
  for (const MeasureRecord& r : records) ++counts[r.target.ToString()];
  if (counts.empty()) return absl::InvalidArgumentError("the logs hold no record");
  if (counts.size() > 1) {
    std::string list;
    for (const auto& [name, n] : counts) {
      absl::StrAppend(&list, list.empty() ? "" : ", ", name, ": ", n);
    }
    return absl::InvalidArgumentError(absl::StrCat("the logs hold records of several targets (",
                                                   list, "); choose one with --target"));
  }
  return records.front().target;
}

// A task being built: its DAG (null when the workload does not build) and its records.
struct PendingTask {
  std::unique_ptr<ir::ComputeDAG> dag;
  std::vector<MeasureRecord> records;
  std::unordered_set<uint64_t> seen;
};

// Groups the records of `target` by task, dropping repeated schedules and those past the cap.
std::vector<PendingTask> GroupByTask(std::vector<MeasureRecord> records, const Target& target,
                                     const TrainingDataOptions& options, TrainingData* data) {
  std::vector<PendingTask> tasks;
  std::unordered_map<std::string, size_t> index;
  for (MeasureRecord& r : records) {
    if (!SameTarget(r.target, target)) continue;
    auto [it, inserted] = index.emplace(r.workload_key, tasks.size());
    if (inserted) {
      tasks.emplace_back();
      TaskRecords t;
      t.workload_key = r.workload_key;
      t.workload = r.workload;
      data->tasks.push_back(std::move(t));
      absl::StatusOr<ir::ComputeDAG> dag = r.workload.Build();
      if (dag.ok()) tasks.back().dag = std::make_unique<ir::ComputeDAG>(*std::move(dag));
    }
    PendingTask& task = tasks[it->second];
    if (!task.seen.insert(RecordStateHash(r)).second) {
      ++data->duplicates;
      continue;
    }
    if (options.max_records_per_task > 0 &&
        static_cast<int64_t>(task.records.size()) >= options.max_records_per_task) {
      ++data->capped;
      continue;
    }
    task.records.push_back(std::move(r));
  }
  return tasks;
}

// Fills every task's samples, featurizing records on `threads` threads.
void Featurize(std::vector<PendingTask>& pending, int threads, TrainingData* data) {
  std::vector<std::pair<size_t, size_t>> work;  // (task, record)
  for (size_t t = 0; t < pending.size(); ++t) {
    TaskRecords& task = data->tasks[t];
    task.samples.resize(pending[t].records.size());
    task.median_ms.resize(pending[t].records.size());
    for (size_t i = 0; i < pending[t].records.size(); ++i) {
      const MeasureRecord& r = pending[t].records[i];
      task.samples[i].task_id = static_cast<int>(t);
      task.samples[i].throughput = r.valid() ? 1.0 / r.median_ms() : 0.0;
      task.median_ms[i] = r.median_ms();
      if (pending[t].dag) work.emplace_back(t, i);
    }
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t w = next++; w < work.size(); w = next++) {
      const auto [t, i] = work[w];
      data->tasks[t].samples[i].features.stores =
          FeaturesOf(*pending[t].dag, pending[t].records[i]);
    }
  };
  std::vector<std::thread> pool;
  for (int k = 1; k < threads; ++k) pool.emplace_back(worker);
  worker();
  for (std::thread& th : pool) th.join();
  for (const TaskRecords& task : data->tasks) {
    data->records += static_cast<int64_t>(task.samples.size());
    for (const auto& s : task.samples) data->without_features += s.features.stores.empty() ? 1 : 0;
  }
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandLogPaths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!std::filesystem::exists(p, ec)) {
      return absl::NotFoundError(absl::StrCat("log path '", p, "' does not exist"));
    }
    if (!std::filesystem::is_directory(p, ec)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : std::filesystem::recursive_directory_iterator(p, ec)) {
      if (e.is_regular_file() && e.path().extension() == ".jsonl") found.push_back(e.path());
    }
    if (found.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("directory '", p, "' holds no .jsonl file"));
    }
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

absl::StatusOr<TrainingData> LoadTrainingData(const std::vector<std::string>& paths,
                                              const TrainingDataOptions& options) {
  TrainingData data;
  ASSIGN_OR_RETURN(data.logs, ExpandLogPaths(paths));
  std::vector<MeasureRecord> records;
  for (const std::string& log : data.logs) {
    ReadOptions read;
    read.target = options.target;
    read.warn_other_targets = false;
    ASSIGN_OR_RETURN(LogContents contents, ReadLog(log, read));
    for (std::string& w : contents.warnings) data.warnings.push_back(std::move(w));
    for (MeasureRecord& r : contents.records) records.push_back(std::move(r));
  }
  ASSIGN_OR_RETURN(data.target, ChooseTarget(records, options.target));
  std::vector<PendingTask> pending = GroupByTask(std::move(records), data.target, options, &data);
  if (pending.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no record of ", data.target.ToString(), " in the logs"));
  }
  Featurize(pending, options.threads > 0 ? options.threads : UsableCores(), &data);
  return data;
}

}  // namespace tilesearch::search
