// Options shared by `tilesearch train-model` and `tilesearch eval-model`: the logs to read, the
// target, the per-task record cap and the XGBoost training knobs.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "base/target.h"
#include "costmodel/xgboost_model.h"
#include "search/training_data.h"

namespace tilesearch::tools {

struct ModelDataOptions {
  std::vector<std::string> logs;
  std::string target;  // "" = the one target of the logs
  int64_t max_records_per_task = 512;
  std::string objective = "regression";
  int max_rounds = 10000;
  int max_depth = 10;
  int threads = 0;
  uint64_t seed = 43;
};

/// Registers --logs, --target, --max-records-per-task, --objective, --max-rounds, --threads,
/// --seed.
inline void AddModelDataOptions(CLI::App& app, ModelDataOptions& o) {
  app.add_option("--logs", o.logs, "tuning logs (.jsonl files, or directories searched for them)")
      ->required();
  app.add_option("--target", o.target,
                 "only records of this target (cuda -arch=sm_90, cpu); default: the logs' one");
  app.add_option("--max-records-per-task", o.max_records_per_task,
                 "keep at most this many records per workload, the first ones (0 = all)")
      ->default_val(512);
  app.add_option("--objective", o.objective,
                 "regression (Ansor's pack-sum squared error) or rank (pairwise, per task)")
      ->default_val("regression");
  app.add_option("--max-rounds", o.max_rounds, "upper bound on XGBoost boosting rounds")
      ->default_val(10000);
  app.add_option("--max-depth", o.max_depth, "XGBoost tree depth, 1..20 (TVM: 10)")
      ->default_val(10);
  app.add_option("--threads", o.threads, "threads for featurizing and XGBoost (0 = all cores)")
      ->default_val(0);
  app.add_option("--seed", o.seed, "XGBoost's seed")->default_val(43);
}

/// The XGBoost options of `o`. Errors: kInvalidArgument for an unknown objective or bad numbers.
inline absl::StatusOr<costmodel::XGBoostOptions> XGBoostOptionsOf(const ModelDataOptions& o) {
  costmodel::XGBoostOptions x;
  if (o.objective == "regression") {
    x.objective = costmodel::XGBoostObjective::kRegression;
  } else if (o.objective == "rank") {
    x.objective = costmodel::XGBoostObjective::kPairwiseRank;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--objective must be regression or rank, got '", o.objective, "'"));
  }
  if (o.max_rounds < 1 || o.max_depth < 1 || o.max_depth > 20 || o.threads < 0 ||
      o.max_records_per_task < 0) {
    return absl::InvalidArgumentError(
        "--max-rounds must be >= 1, --max-depth in 1..20, --threads and --max-records-per-task "
        ">= 0");
  }
  x.max_rounds = o.max_rounds;
  x.max_depth = o.max_depth;
  x.nthread = o.threads;
  x.seed = o.seed;
  return x;
}

/// Reads the logs into training data (search::LoadTrainingData), printing its warnings' count.
inline absl::StatusOr<search::TrainingData> LoadModelData(const ModelDataOptions& o) {
  search::TrainingDataOptions d;
  if (!o.target.empty()) {
    ASSIGN_OR_RETURN(Target t, ParseTarget(o.target));
    d.target = t;
  }
  d.max_records_per_task = o.max_records_per_task;
  d.threads = o.threads;
  return search::LoadTrainingData(o.logs, d);
}

/// The shipped default model of a cuda target (trained from the committed H200 logs by
/// bench/scripts/train_default_model.sh): <models dir>/default-cuda-<arch>.model, the models dir
/// being $TILESEARCH_MODELS_DIR or the source tree's models/. "" when there is none (cpu targets,
/// other archs).
std::string DefaultModelPath(const Target& target);

/// The cost model that ranks predicted schedules (`predict`, `export-dispatch`): `path` ("none":
/// no model; "": the target's default model, DefaultModelPath, if there is one) loaded for
/// `target` (XGBoostModel::LoadForTarget). Null for no model. Errors: LoadForTarget's (another
/// target or feature version, a corrupt file).
inline absl::StatusOr<std::unique_ptr<costmodel::XGBoostModel>> RankingModel(
    const std::string& path, const Target& target) {
  const std::string file = path.empty() ? DefaultModelPath(target) : path == "none" ? "" : path;
  if (file.empty()) return std::unique_ptr<costmodel::XGBoostModel>();
  auto model = std::make_unique<costmodel::XGBoostModel>();
  RETURN_IF_ERROR(model->LoadForTarget(file, target));
  return model;
}

}  // namespace tilesearch::tools
