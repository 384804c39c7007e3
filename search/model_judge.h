// Judging two cost models on a task's measured rounds: the pretrained model a tune starts from
// (--model-init) and an online-only model that learns the same records. The search then uses the
// one whose top picks were better.
//
// Why the top picks and not pairwise accuracy: the search measures only what a model ranks
// first, so a model is as good as its top candidates. Pairwise accuracy over a round that mixes a
// model's own picks with random states (eps-greedy) rewards telling the two groups apart. On the
// H200's held-out workloads the shipped model scored 0.5–0.86 that way while it ranked its own
// picks at 0.2–0.5, and its picks were worse than the random states it was told apart from
// (bench/NOTES.md).
//
// Why cross-validation: an online-only model's scores of the first round are those of an
// untrained model (it has no records before that round is measured). Judging it on them would
// keep the pretrained model for the second round whatever its quality, and at small budgets
// (64 trials: rounds of 16 and 48) the second round is the whole search. So a round scored by an
// untrained online model is judged by the k-fold cross-validated scores of fresh online models
// trained on the round's other records: held out, as the pretrained model's scores are.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "costmodel/cost_model.h"

namespace tilesearch::search {

/// The mean merit, relative to the best merit of all programs, of the ceil(top_fraction · n)
/// programs `scores` ranks highest (n = scores.size()). Programs with equal scores share the
/// last places evenly (the expected value over random tie-breaking), so a model that scores
/// everything alike gets the mean merit. In [0, 1]. `merits`: a figure of merit per program
/// (FLOP/s or bytes/s, ≥ 0; 0 for failed programs). Errors: kInvalidArgument for sizes that
/// differ, no programs, a fraction outside (0, 1], a NaN score (-infinity, a model's score of a
/// program without features, ranks last), a negative or non-finite merit;
/// kFailedPrecondition when no merit is > 0 (nothing to judge by).
[[nodiscard]] absl::StatusOr<double> TopPicksMerit(const std::vector<double>& scores,
                                                   const std::vector<double>& merits,
                                                   double top_fraction);

/// Held-out scores of `samples` (one task's, in any order) by k-fold cross-validation: fold f
/// holds the samples with index % folds == f; each is scored by a fresh model from `make_model`
/// trained on the other folds. The models are regression models on per-task normalized labels,
/// so scores of different folds share a scale. Errors: kInvalidArgument for folds < 2 or fewer
/// samples than folds; the models' errors.
[[nodiscard]] absl::StatusOr<std::vector<double>> CrossValidatedScores(
    const std::function<std::unique_ptr<costmodel::CostModel>()>& make_model,
    const std::vector<costmodel::TrainingSample>& samples, int folds);

/// The running judgement of a tune's two models: each judged round adds, per model, its
/// TopPicksMerit times the round's programs.
class ModelJudge {
 public:
  /// Each model's TopPicksMerit of one judged round.
  struct RoundMerits {
    double pretrained = 0;
    double online = 0;
  };
  /// Adds one round: each model's held-out scores of the round's programs and their merits;
  /// returns the two models' TopPicksMerit of it. A round that cannot be judged (TopPicksMerit's
  /// errors, e.g. no valid program) adds nothing; the error is returned for the caller to ignore
  /// or report.
  absl::StatusOr<RoundMerits> AddRound(const std::vector<double>& pretrained_scores,
                                       const std::vector<double>& online_scores,
                                       const std::vector<double>& merits);
  /// Whether any round was judged.
  bool judged() const { return programs_ > 0; }
  /// Whether the online-only model's top picks were better over the judged rounds (false before
  /// any round was judged, and on a tie).
  bool prefers_online() const { return judged() && summed_[1] > summed_[0]; }
  /// Programs over the judged rounds.
  int64_t programs() const { return programs_; }

 private:
  double summed_[2] = {0, 0};  // TopPicksMerit × programs: pretrained, online-only
  int64_t programs_ = 0;
};

}  // namespace tilesearch::search
