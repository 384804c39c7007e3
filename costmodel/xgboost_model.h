// XGBoostModel: Ansor's learned cost model (OSDI'20 §5.2; TVM python/tvm/auto_scheduler/
// cost_model/xgb_model.py) over the XGBoost C API (Debian libxgboost 1.7).
//
// One gradient-boosted tree ensemble scores single Store statements; a program's score is the sum
// of its stores' scores ("pack-sum"). Training follows Ansor exactly, with a custom objective over
// the programs rather than TVM's per-row shortcut: with S_p = sum of the current predictions of
// program p's rows, y_p = its normalized throughput (throughput / best throughput of its task) and
// w_p = y_p, the loss is sum_p w_p (S_p - y_p)^2 / 2, so every row r of p gets gradient
// w_p (S_p - y_p) and hessian w_p · n_p, n_p = p's number of rows (XGBoosterBoostOneIter with our
// own gradients). TVM's hessian is w_p per row; but a leaf holding all n_p rows of p then moves S_p
// by n_p · eta · (y_p − S_p), which overshoots and diverges once n_p > 2 / eta = 10 (a softmax of
// 15 stores trained to RMSE 1e12 on labels in [0, 1]); w_p · n_p makes the step a Newton step for
// S_p (bench/NOTES.md, "pack-sum hessian"). Why not give
// each row its program's label: that fits every store to the whole program's speed, so programs
// with more stores are over-scored; the grouped objective is what the paper describes and costs
// one cached prediction per round. As in Ansor, failed programs (y = 0) get weight 0 and do not
// shape the trees; base_score is 0 so an empty ensemble scores every program 0.
//
// Rounds: TVM boosts up to 10000 rounds with early stopping (50 rounds) on the *training* error,
// which rarely stops early. Here, when there are at least `min_programs_for_validation` programs, a
// seeded `validation_fraction` of them is held out and boosting stops 50 rounds after the
// held-out error last improved; the model is then refit on all programs for the best number of
// rounds. With fewer programs there is no split and the training error stops it (TVM's rule). The
// held-out error and ranking accuracy are reported (last_report()) for the tuning log.
//
// Every Update retrains a fresh ensemble on all samples received so far (XGBoost has no
// incremental training; Ansor does the same). Deterministic for a fixed seed, nthread and input.
//
// Warm start (SetInitialModel, `tune --model-init`): the pretrained ensemble stays frozen and each
// Update fits a small residual ensemble on top of it with the task's records (XGBoost's training
// continuation, i.e. the pretrained score S_pre as the base margin), with the initial model's
// objective (its scores' scale; a rank model's scores are logits, not throughputs). A program
// scores S_pre + w · clip(Δ) (WarmStartBlend): Δ the added trees' sum, clipped to its range on
// the task's records, w in [0, 1] their weight; and only programs whose S_pre lies within the
// records' S_pre range are moved, squashed back into that range, so the update never reorders a
// program against one the pretrained model ranks outside the records' range (e.g. a sketch family
// the round did not measure). The added rounds and w are chosen by k-fold cross-validation on the
// task's own records: w stays 0 (the pretrained model alone) unless the blend's out-of-fold
// pairwise ranking accuracy beats the pretrained model's on the same records by min_gain /
// sqrt(n), and w ≤ n / (n + prior_records). Below min_programs_for_validation programs none are
// added. Why: boosted freely on a round's records the update ranked half-precision matmuls far
// worse than the pretrained model alone (bench/NOTES.md, "the online update keeps the pretrained
// ranking"). Chosen over retraining on the pretraining records plus the new ones because tuning
// then needs neither the pretraining logs nor their feature extraction.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/target.h"
#include "costmodel/cost_model.h"

namespace tilesearch::costmodel {

/// Version of the model file format this build writes and the newest it reads. Version 2 adds
/// the target and the provenance; version-1 files read as models of no particular target.
/// Version 3 adds the warm start's added-tree weight and clip range.
inline constexpr int kXGBoostModelFileVersion = 3;

/// The training objective over programs (pack-sum scores S_p, see the header comment).
enum class XGBoostObjective {
  /// Ansor's label-weighted squared error of S_p against the normalized throughput.
  kRegression,
  /// Pairwise logistic (RankNet) loss log(1 + exp(-(S_i - S_j))) over pairs of valid programs of
  /// one task with y_i > y_j: XGBoost's rank:pairwise with the task as the query group, but on
  /// program scores. Each boosting round samples `rank_pairs_per_program` partners per program
  /// (XGBoost's num_pairsample); early stopping watches the same loss over fixed sampled pairs.
  kPairwiseRank,
};

/// "regression" / "rank".
const char* XGBoostObjectiveName(XGBoostObjective objective);

/// The name a model file gives its target: "cuda sm_90" (kind and arch: features depend on the
/// GPU's limits), "cpu" for every host.
std::string ModelTargetName(const Target& target);

/// What a model was trained for and from, saved in its file.
struct ModelInfo {
  /// ModelTargetName of the target the training records were measured on; empty: any target
  /// (version-1 files, models never told).
  std::string target;
  /// A JSON object (as text) describing the training data: logs, record and task counts, date,
  /// commit, objective. "{}" when unknown.
  std::string provenance = "{}";
};

/// How a warm-started model (SetInitialModel) adds trees for the task's records.
struct XGBoostWarmStartOptions {
  /// Depth, learning rate and round limit of the added trees.
  int max_depth = 3;
  double eta = 0.1;
  int max_rounds = 40;
  /// Folds of the cross-validation that chooses the added rounds and their weight (>= 2). 0: one
  /// held-out split with early stopping (XGBoostOptions's rule) and weight 1, without clipping
  /// (the warm start before cross-validation, kept for comparisons).
  int folds = 4;
  /// Weights of the added trees tried (besides 0, the pretrained model alone).
  std::vector<double> weights = {0.25, 0.5, 1.0};
  /// The weight is at most n / (n + prior_records) for n programs: the pretrained model counts
  /// as this many records of the task.
  double prior_records = 32;
  /// A weight other than 0 must beat the pretrained model's cross-validated pairwise accuracy by
  /// at least min_gain / sqrt(n) for n records with a valid measurement (about the spread of an
  /// accuracy measured on n programs).
  double min_gain = 0.25;
  /// Clip the added trees' sum to the range it takes on the task's records.
  bool clip = true;
  /// Apply the added trees only within the band of the records' initial scores
  /// (WarmStartBlend); false: to every program.
  bool band = true;
  /// Objective of the added trees; unset: the initial model's (its score scale).
  std::optional<XGBoostObjective> objective;
};

/// Training parameters. Defaults are TVM v0.19's (xgb_model.py: max_depth 10, eta 0.2, gamma
/// 0.001, min_child_weight 0, seed 43, 10000 rounds, 50-round early stopping) except nthread
/// (TVM: cores / 2) and the held-out split (see the header comment).
struct XGBoostOptions {
  int max_depth = 10;
  double eta = 0.2;
  double gamma = 0.001;
  double min_child_weight = 0;
  /// Upper bound on boosting rounds.
  int max_rounds = 10000;
  /// Stop after this many rounds without improvement of the monitored error.
  int early_stopping_rounds = 50;
  /// An improvement counts only when the monitored error falls below (1 − this) × the best so far.
  /// Seen on the H200: with 6 held-out programs the error kept creeping down, and one round of a
  /// warm-started model boosted all 10000 rounds (5.5 s of a 34 s tune); 0 is TVM's rule.
  double early_stopping_min_improvement = 1e-3;
  /// Fraction of programs held out to choose the number of rounds, when there are at least
  /// `min_programs_for_validation` programs with features.
  double validation_fraction = 0.2;
  int min_programs_for_validation = 20;
  /// Refit on all programs with the chosen number of rounds (false: keep the model trained on the
  /// training part only, faster).
  bool refit_on_all = true;
  /// Worker threads; 0 = all usable cores (UsableCores). XGBoost's OpenMP threads spin while
  /// idle unless OMP_WAIT_POLICY=passive is in the environment when the process starts (the
  /// tilesearch CLI sets it); on a busy host the spinning made training 20-200x slower
  /// (bench/NOTES.md).
  int nthread = 0;
  /// Seeds XGBoost and the held-out split.
  uint64_t seed = 43;
  /// XGBoost tree_method: "hist" (fast, deterministic) or "exact" (TVM's "auto" on small data).
  std::string tree_method = "hist";
  XGBoostObjective objective = XGBoostObjective::kRegression;
  /// kPairwiseRank: partners sampled per program and boosting round (>= 1).
  int rank_pairs_per_program = 4;
  /// The added trees of a warm-started model.
  XGBoostWarmStartOptions warm;
};

/// The options of the model a tuning run trains online (`tune`, and `eval-model`'s
/// pretrained+online model, so that the evaluation measures the tuner's warm start): the defaults
/// with `seed` and `nthread` (0: every usable core).
XGBoostOptions OnlineModelOptions(uint64_t seed, int nthread);

/// How a warm start's added trees combine with the initial ensemble: a program whose initial score
/// b lies in [band_lo, band_hi] (the range of the initial scores of the task's records) scores
/// b + weight · clamp(d, lo, hi), d the added trees' sum, squashed back into (band_lo, band_hi);
/// any other program scores b. So the update reorders only programs whose initial scores lie
/// among the records' and never moves one past a program outside that band.
struct WarmStartBlend {
  double weight = 1;
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  double band_lo = -std::numeric_limits<double>::infinity();
  double band_hi = std::numeric_limits<double>::infinity();
};

/// A program's score under `blend` from its initial score and its added trees' sum.
double BlendedScore(double initial, double added, const WarmStartBlend& blend);

/// What the last Update did.
struct XGBoostTrainingReport {
  int num_programs = 0;    // programs with features used (train + held out)
  int num_rows = 0;        // store rows
  int num_validation = 0;  // programs held out (0: no split)
  int rounds = 0;          // boosting rounds of the final model
  double train_rmse = 0;   // label-weighted pack-sum RMSE on the training part
  /// On the held-out programs (NaN without a split): label-weighted pack-sum RMSE and pairwise
  /// ranking accuracy of the model trained without them.
  double validation_rmse = std::numeric_limits<double>::quiet_NaN();
  double validation_pairwise_accuracy = std::numeric_limits<double>::quiet_NaN();
  /// Warm start: the weight of the added trees (0: the initial model alone) and the
  /// cross-validated pairwise accuracy of the initial model alone (NaN without cross-validation).
  double added_weight = 0;
  double initial_pairwise_accuracy = std::numeric_limits<double>::quiet_NaN();
};

class XGBoostModel : public CostModel {
 public:
  explicit XGBoostModel(XGBoostOptions options = {});
  ~XGBoostModel() override;
  XGBoostModel(const XGBoostModel&) = delete;
  XGBoostModel& operator=(const XGBoostModel&) = delete;

  /// Appends `samples` to those received before and retrains on all of them. Programs without
  /// features are ignored. While no sample has a positive throughput there is nothing to learn and
  /// the model stays untrained. Errors: ValidateSamples's; kInternal with XGBoost's message if the
  /// library fails (the previous ensemble is then kept).
  absl::Status Update(const std::vector<TrainingSample>& samples) override;
  /// Pack-sum scores. Before any successful training (and before Load) every program scores 0
  /// (use RandomModel for random exploration); programs without features score -infinity.
  absl::StatusOr<std::vector<double>> Predict(
      const std::vector<ProgramFeatures>& programs) override;
  /// File: a magic line, a JSON line {"version", "feature_version", "num_features", "target",
  /// "provenance", "objective", "trained", "rounds", "booster_bytes", "booster_fnv1a64"} and the
  /// booster in XGBoost's UBJSON format (the checksum is verified before XGBoost parses it).
  /// Training samples are not saved: to continue from an old log, feed its records to Update. The
  /// initial model (SetInitialModel) is part of the saved booster.
  absl::Status Save(const std::string& path) const override;
  /// Errors: kNotFound (unreadable), kInvalidArgument "... is not a tilesearch xgboost model",
  /// "... version 3 is newer than this build reads (2)", "... has feature version 0, this build
  /// extracts 2", "... 174 features, expected 173", "... truncated", "... corrupt booster:
  /// checksum ..." or "... corrupt booster: <xgboost message>". On error the model is unchanged.
  absl::Status Load(const std::string& path) override;
  /// Load, refusing a model trained for another target: kInvalidArgument "model file 'm' is for
  /// cuda sm_80 (feature version 1); this run needs cuda sm_90 (feature version 1)". A file
  /// without a target (version 1) is accepted. On error the model is unchanged.
  absl::Status LoadForTarget(const std::string& path, const Target& target);
  /// Warm start: LoadForTarget, then every later Update boosts new trees on top of the loaded
  /// ensemble (kept frozen) instead of from nothing, fitting what it gets wrong on the records
  /// received; early stopping on held-out records may keep zero new trees, and below
  /// min_programs_for_validation programs none are added. Before the first Update the loaded model
  /// scores alone. Errors: LoadForTarget's; kInvalidArgument for an untrained model file.
  absl::Status SetInitialModel(const std::string& path, const Target& target);

  /// The model's target and provenance (saved by Save, read by Load).
  const ModelInfo& info() const { return info_; }
  void set_info(ModelInfo info) { info_ = std::move(info); }
  /// Boosting rounds of the initial model (SetInitialModel); 0 without one.
  int initial_rounds() const { return init_rounds_; }
  std::string Name() const override { return "xgboost"; }

  /// True once a training or a Load produced an ensemble.
  bool trained() const { return booster_ != nullptr; }
  /// Samples received by Update so far.
  int num_samples() const { return static_cast<int>(samples_.size()); }
  const XGBoostTrainingReport& last_report() const { return report_; }

 private:
  // Replaces the ensemble by `full` (a BoosterHandle, owned from now on) whose rounds after the
  // first `base_rounds` are added trees combined by `blend`; base_rounds 0: `full` scores alone.
  absl::Status SetEnsemble(void* full, int rounds, int base_rounds, const WarmStartBlend& blend);
  void FreeEnsemble();
  // Update of a warm-started model with cross-validation (XGBoostWarmStartOptions::folds >= 2):
  // `usable` indexes samples_ with features, `labels` every sample's normalized label.
  absl::Status UpdateWarm(const std::vector<int>& usable, const std::vector<double>& labels);

  XGBoostOptions options_;
  std::vector<TrainingSample> samples_;
  void* booster_ = nullptr;  // BoosterHandle; the C API header stays inside the .cc
  int rounds_ = 0;
  // Warm start, when added trees are blended: booster_'s first base_rounds_ rounds and the rest.
  void* base_ = nullptr;
  void* added_ = nullptr;
  int base_rounds_ = 0;
  WarmStartBlend blend_;
  XGBoostTrainingReport report_;
  ModelInfo info_;
  std::string init_booster_;  // UBJSON of the initial ensemble; empty without one
  int init_rounds_ = 0;
  XGBoostObjective init_objective_ = XGBoostObjective::kRegression;  // the initial model's
};

}  // namespace tilesearch::costmodel
