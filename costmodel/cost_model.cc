#include "costmodel/cost_model.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "costmodel/features.h"

namespace tilesearch::costmodel {
namespace {

constexpr char kRandomMagic[] = "tilesearch-random-model";

absl::Status CheckRows(const ProgramFeatures& p, const std::string& what) {
  for (size_t s = 0; s < p.stores.size(); ++s) {
    if (p.stores[s].size() != static_cast<size_t>(kNumFeatures)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " store ", s, ": ", p.stores[s].size(),
                                                     " features, expected ", kNumFeatures));
    }
  }
  return absl::OkStatus();
}

// Indices 0..n-1 ordered by value descending, ties by lower index.
std::vector<size_t> OrderDescending(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] > v[b]; });
  return idx;
}

}  // namespace

absl::Status ValidateSamples(const std::vector<TrainingSample>& samples) {
  for (size_t i = 0; i < samples.size(); ++i) {
    const double t = samples[i].throughput;
    if (!std::isfinite(t)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample ", i, ": throughput ", t, " is not finite"));
    }
    if (t < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample ", i, ": throughput ", t, " is negative"));
    }
    auto st = CheckRows(samples[i].features, absl::StrCat("sample ", i));
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status ValidatePrograms(const std::vector<ProgramFeatures>& programs) {
  for (size_t i = 0; i < programs.size(); ++i) {
    auto st = CheckRows(programs[i], absl::StrCat("program ", i));
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

std::vector<double> NormalizedLabels(const std::vector<TrainingSample>& samples) {
  std::map<int, double> best;
  for (const TrainingSample& s : samples) {
    best[s.task_id] = std::max(best[s.task_id], s.throughput);
  }
  std::vector<double> labels(samples.size(), 0.0);
  for (size_t i = 0; i < samples.size(); ++i) {
    const double m = best[samples[i].task_id];
    labels[i] = m > 0 ? samples[i].throughput / m : 0.0;
  }
  return labels;
}

absl::StatusOr<double> PairwiseRankingAccuracy(const std::vector<double>& predicted,
                                               const std::vector<double>& actual) {
  if (predicted.size() != actual.size()) {
    return absl::InvalidArgumentError(absl::StrCat("pairwise ranking accuracy: ", predicted.size(),
                                                   " predictions for ", actual.size(),
                                                   " actual values"));
  }
  double agree = 0;
  int64_t pairs = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    for (size_t j = i + 1; j < actual.size(); ++j) {
      if (actual[i] == actual[j]) continue;
      ++pairs;
      if (predicted[i] == predicted[j]) {
        agree += 0.5;
      } else if ((predicted[i] < predicted[j]) == (actual[i] < actual[j])) {
        agree += 1;
      }
    }
  }
  if (pairs == 0) {
    return absl::InvalidArgumentError(absl::StrCat("pairwise ranking accuracy: no two of the ",
                                                   actual.size(), " actual values differ"));
  }
  return agree / static_cast<double>(pairs);
}

absl::StatusOr<double> TopKRecall(const std::vector<double>& predicted,
                                  const std::vector<double>& actual, int k) {
  if (predicted.size() != actual.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top-k recall: ", predicted.size(), " predictions for ", actual.size(), " actual values"));
  }
  if (actual.empty()) return absl::InvalidArgumentError("top-k recall: no programs");
  if (k < 1) return absl::InvalidArgumentError(absl::StrCat("top-k recall: k ", k, " < 1"));
  const size_t kk = std::min(static_cast<size_t>(k), actual.size());
  std::vector<size_t> p = OrderDescending(predicted), a = OrderDescending(actual);
  std::vector<bool> in_actual(actual.size(), false);
  for (size_t i = 0; i < kk; ++i) in_actual[a[i]] = true;
  size_t hits = 0;
  for (size_t i = 0; i < kk; ++i) hits += in_actual[p[i]] ? 1 : 0;
  return static_cast<double>(hits) / static_cast<double>(kk);
}

RandomModel::RandomModel(uint64_t seed) : seed_(seed), rng_(seed) {}

absl::Status RandomModel::Update(const std::vector<TrainingSample>& samples) {
  return ValidateSamples(samples);
}

absl::StatusOr<std::vector<double>> RandomModel::Predict(
    const std::vector<ProgramFeatures>& programs) {
  auto st = ValidatePrograms(programs);
  if (!st.ok()) return st;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> scores(programs.size());
  for (size_t i = 0; i < programs.size(); ++i) {
    const double u = uniform(rng_);
    scores[i] = programs[i].stores.empty() ? -std::numeric_limits<double>::infinity() : u;
  }
  return scores;
}

absl::Status RandomModel::Save(const std::string& path) const {
  std::ofstream out(path, std::ios::trunc);
  out << kRandomMagic << " 1 " << seed_ << "\n";
  out.close();
  if (!out) {
    return absl::InternalError(
        absl::StrCat("cannot write model file '", path, "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status RandomModel::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read model file '", path, "': ", std::strerror(errno)));
  }
  std::string magic;
  int version = 0;
  uint64_t seed = 0;
  if (!(in >> magic >> version >> seed) || magic != kRandomMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat("model file '", path, "' is not a random model"));
  }
  if (version != 1) {
    return absl::InvalidArgumentError(absl::StrCat("model file '", path, "': random model version ",
                                                   version, " (this build reads 1)"));
  }
  seed_ = seed;
  rng_.seed(seed);
  return absl::OkStatus();
}

namespace {

// 1-based ranks, ties given their average rank.
std::vector<double> AverageRanks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double r = 0.5 * static_cast<double>(i + j) + 1.0;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = r;
    i = j + 1;
  }
  return rank;
}

}  // namespace

absl::StatusOr<double> SpearmanCorrelation(const std::vector<double>& predicted,
                                           const std::vector<double>& actual) {
  if (predicted.size() != actual.size() || predicted.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat("spearman: sizes ", predicted.size(), " and ",
                                                   actual.size(), " (need equal sizes >= 2)"));
  }
  const std::vector<double> a = AverageRanks(predicted), b = AverageRanks(actual);
  const double n = static_cast<double>(a.size());
  const double mean = (n + 1) / 2;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (a[i] - mean) * (b[i] - mean);
    va += (a[i] - mean) * (a[i] - mean);
    vb += (b[i] - mean) * (b[i] - mean);
  }
  if (va == 0 || vb == 0) return absl::InvalidArgumentError("spearman: a constant vector");
  return cov / std::sqrt(va * vb);
}

}  // namespace tilesearch::costmodel
