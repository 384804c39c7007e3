// The cost model interface the search uses to rank candidate programs without measuring them
// (Ansor, OSDI'20 §5.2; TVM auto_scheduler CostModel: update with measured records, batched
// predict). A program is given by its per-store features (costmodel/features.h); a score is
// "higher = predicted faster" and only its order matters. Also: the shared training-sample type,
// the RandomModel baseline (the ablation that shows what a learned model earns) and the ranking
// metrics used to report a model's quality on held-out records.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tilesearch::costmodel {

/// One program's features: one row of kNumFeatures floats per Store (ExtractFeatures). No rows
/// means the program has no features (an invalid state): models score it -infinity.
struct ProgramFeatures {
  std::vector<std::vector<float>> stores;
};

/// A measured program.
struct TrainingSample {
  /// Which task (workload key + target) it belongs to: labels are normalized per task.
  int task_id = 0;
  ProgramFeatures features;
  /// FLOP/s, or bytes/s for memory-bound tasks; any unit consistent within a task. 0 for failed
  /// trials (compile error, wrong answer, timeout). Must be finite and >= 0.
  double throughput = 0;
};

/// Predicts a relative speed for programs. Not thread-safe: one caller at a time.
class CostModel {
 public:
  virtual ~CostModel() = default;
  /// Adds measured samples and retrains. Errors: kInvalidArgument for a negative or non-finite
  /// throughput, or feature rows of the wrong length.
  [[nodiscard]] virtual absl::Status Update(const std::vector<TrainingSample>& samples) = 0;
  /// One score per program, same order (higher = predicted faster; -infinity for programs without
  /// features). Errors: kInvalidArgument for feature rows of the wrong length.
  [[nodiscard]] virtual absl::StatusOr<std::vector<double>> Predict(
      const std::vector<ProgramFeatures>& programs) = 0;
  /// Writes the model to `path` (overwritten). Errors: kInternal "cannot write model file 'x':
  /// <reason>".
  [[nodiscard]] virtual absl::Status Save(const std::string& path) const = 0;
  /// Replaces this model by the one saved at `path`. Errors: kNotFound when the file cannot be
  /// read, kInvalidArgument when it is not a model of this kind, of another version, or corrupt.
  /// On error the model is unchanged.
  [[nodiscard]] virtual absl::Status Load(const std::string& path) = 0;
  /// Short name for logs: "xgboost", "random".
  virtual std::string Name() const = 0;
};

/// Uniform random scores in [0, 1) from a seeded generator (Ansor's RandomModel): the baseline
/// that shows how much a learned model helps. Update only validates; Predict draws one score per
/// program (-infinity for programs without features), so two models with one seed predict the
/// same sequence. Save/Load store the seed (the generator restarts from it).
class RandomModel : public CostModel {
 public:
  explicit RandomModel(uint64_t seed = 0);
  absl::Status Update(const std::vector<TrainingSample>& samples) override;
  absl::StatusOr<std::vector<double>> Predict(
      const std::vector<ProgramFeatures>& programs) override;
  absl::Status Save(const std::string& path) const override;
  absl::Status Load(const std::string& path) override;
  std::string Name() const override { return "random"; }

 private:
  uint64_t seed_;
  std::mt19937_64 rng_;
};

/// Checks samples before training: throughput finite and >= 0, every row kNumFeatures long.
/// Errors: kInvalidArgument naming the sample index, e.g. "sample 3: throughput -1 is negative".
absl::Status ValidateSamples(const std::vector<TrainingSample>& samples);
/// Checks every row of every program is kNumFeatures long. Errors: kInvalidArgument
/// "program 2 store 0: 12 features, expected 159".
absl::Status ValidatePrograms(const std::vector<ProgramFeatures>& programs);

/// Ansor's labels (§5.2; TVM feature.cc): each sample's throughput divided by the largest
/// throughput of its task, in [0, 1]; all 0 for a task with no successful sample.
std::vector<double> NormalizedLabels(const std::vector<TrainingSample>& samples);

/// Pairwise ranking accuracy: over all pairs (i, j) whose actual values differ, the fraction the
/// prediction orders the same way; a pair predicted equal counts one half. 1 is perfect, 0.5 is
/// chance (as in TenSet's metric.py / Ansor §7.5 "pairwise comparison accuracy"). O(n^2) time.
/// Errors: kInvalidArgument when the sizes differ or no pair of actual values differs.
absl::StatusOr<double> PairwiseRankingAccuracy(const std::vector<double>& predicted,
                                               const std::vector<double>& actual);

/// Top-k recall: |top-k by prediction ∩ top-k by actual| / k, the fraction of the truly best k
/// programs the model would pick among its k best (Ansor §7.5 "recall@30"). Ties are broken by
/// lower index. k larger than the number of programs is clipped to it. Errors: kInvalidArgument
/// when the sizes differ, the vectors are empty, or k < 1.
absl::StatusOr<double> TopKRecall(const std::vector<double>& predicted,
                                  const std::vector<double>& actual, int k);

/// Spearman's rank correlation: the Pearson correlation of the two vectors' ranks, ties given
/// their average rank; in [-1, 1], 1 when the orders agree. Errors: kInvalidArgument when the sizes
/// differ, there are fewer than 2 values, or either vector is constant (no ranking to compare).
absl::StatusOr<double> SpearmanCorrelation(const std::vector<double>& predicted,
                                           const std::vector<double>& actual);

}  // namespace tilesearch::costmodel
