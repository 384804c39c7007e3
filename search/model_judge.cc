#include "search/model_judge.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tilesearch::search {

absl::StatusOr<double> TopPicksMerit(const std::vector<double>& scores,
                                     const std::vector<double>& merits, double top_fraction) {
  if (scores.size() != merits.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TopPicksMerit: ", scores.size(), " scores for ", merits.size(), " merits"));
  }
  if (scores.empty()) return absl::InvalidArgumentError("TopPicksMerit: no programs");
  if (!(top_fraction > 0 && top_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TopPicksMerit: top_fraction must be in (0, 1], got ", top_fraction));
  }
  double best = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    // -infinity is a model's score of a program without features: ranked last.
    if (std::isnan(scores[i]) || !std::isfinite(merits[i]) || merits[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("TopPicksMerit: program ", i, " has score ",
                                                     scores[i], " and merit ", merits[i]));
    }
    best = std::max(best, merits[i]);
  }
  if (best <= 0) return absl::FailedPreconditionError("TopPicksMerit: no program has a merit");
  const size_t n = scores.size();
  const size_t k = std::max<size_t>(
      1, std::min(n, static_cast<size_t>(std::ceil(top_fraction * static_cast<double>(n) - 1e-9))));
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  // Walk groups of equal scores; the group that straddles place k contributes its mean merit
  // for each place left.
  double sum = 0;
  size_t taken = 0;
  for (size_t g = 0; g < n && taken < k;) {
    size_t end = g;
    double group_sum = 0;
    while (end < n && scores[order[end]] == scores[order[g]]) group_sum += merits[order[end++]];
    const size_t group = end - g;
    const size_t use = std::min(group, k - taken);
    sum += group_sum * static_cast<double>(use) / static_cast<double>(group);
    taken += use;
    g = end;
  }
  return sum / static_cast<double>(k) / best;
}

absl::StatusOr<std::vector<double>> CrossValidatedScores(
    const std::function<std::unique_ptr<costmodel::CostModel>()>& make_model,
    const std::vector<costmodel::TrainingSample>& samples, int folds) {
  if (folds < 2 || samples.size() < static_cast<size_t>(folds)) {
    return absl::InvalidArgumentError(absl::StrCat("CrossValidatedScores: ", samples.size(),
                                                   " samples cannot make ", folds, " folds"));
  }
  std::vector<double> scores(samples.size(), 0);
  for (int f = 0; f < folds; ++f) {
    std::vector<costmodel::TrainingSample> train;
    std::vector<costmodel::ProgramFeatures> held;
    std::vector<size_t> held_index;
    for (size_t i = 0; i < samples.size(); ++i) {
      if (static_cast<int>(i % static_cast<size_t>(folds)) == f) {
        held.push_back(samples[i].features);
        held_index.push_back(i);
      } else {
        train.push_back(samples[i]);
      }
    }
    std::unique_ptr<costmodel::CostModel> model = make_model();
    RETURN_IF_ERROR(model->Update(train));
    ASSIGN_OR_RETURN(std::vector<double> predicted, model->Predict(held));
    if (predicted.size() != held.size()) {
      return absl::InternalError(absl::StrCat("CrossValidatedScores: the model scored ",
                                              predicted.size(), " of ", held.size(), " programs"));
    }
    for (size_t j = 0; j < held.size(); ++j) scores[held_index[j]] = predicted[j];
  }
  return scores;
}

absl::StatusOr<ModelJudge::RoundMerits> ModelJudge::AddRound(
    const std::vector<double>& pretrained_scores, const std::vector<double>& online_scores,
    const std::vector<double>& merits) {
  constexpr double kTopFraction = 0.25;
  ASSIGN_OR_RETURN(const double a, TopPicksMerit(pretrained_scores, merits, kTopFraction));
  ASSIGN_OR_RETURN(const double b, TopPicksMerit(online_scores, merits, kTopFraction));
  const double n = static_cast<double>(merits.size());
  summed_[0] += a * n;
  summed_[1] += b * n;
  programs_ += static_cast<int64_t>(merits.size());
  return RoundMerits{a, b};
}

}  // namespace tilesearch::search
