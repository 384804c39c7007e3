#include "costmodel/xgboost_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/cpu_count.h"
#include "base/status.h"
#include "costmodel/features.h"
#include "ir/compute_dag.h"
#include "nlohmann/json.hpp"

namespace tilesearch::costmodel {
namespace {

constexpr char kMagic[] = "tilesearch-xgboost-model";

absl::Status XgbError(const char* what) {
  return absl::InternalError(absl::StrCat("xgboost ", what, ": ", XGBGetLastError()));
}

#define TS_XGB(call)                         \
  do {                                       \
    if ((call) != 0) return XgbError(#call); \
  } while (0)

struct DMatrix {
  DMatrixHandle h = nullptr;
  ~DMatrix() {
    if (h) XGDMatrixFree(h);
  }
};

struct Booster {
  BoosterHandle h = nullptr;
  ~Booster() {
    if (h) XGBoosterFree(h);
  }
  BoosterHandle release() {
    BoosterHandle out = h;
    h = nullptr;
    return out;
  }
};

// Rows of a set of programs, with the program each row belongs to.
struct Packed {
  std::vector<float> data;  // row-major, kNumFeatures per row
  std::vector<int> pack;    // program index (within the set) of each row
  int num_programs = 0;
  bst_ulong rows() const { return pack.size(); }
};

Packed Pack(const std::vector<const ProgramFeatures*>& programs) {
  Packed p;
  p.num_programs = static_cast<int>(programs.size());
  for (size_t i = 0; i < programs.size(); ++i) {
    for (const auto& row : programs[i]->stores) {
      p.data.insert(p.data.end(), row.begin(), row.end());
      p.pack.push_back(static_cast<int>(i));
    }
  }
  return p;
}

absl::Status MakeDMatrix(const Packed& p, DMatrix* m) {
  TS_XGB(XGDMatrixCreateFromMat(p.data.data(), p.rows(), kNumFeatures,
                                std::numeric_limits<float>::quiet_NaN(), &m->h));
  return absl::OkStatus();
}

// Per-program sums of per-row margins.
absl::StatusOr<std::vector<double>> PackSum(BoosterHandle b, const DMatrix& m, const Packed& p,
                                            bool training) {
  std::vector<double> sums(p.num_programs, 0.0);
  if (p.rows() == 0) return sums;
  bst_ulong len = 0;
  const float* out = nullptr;
  TS_XGB(
      XGBoosterPredict(b, m.h, /*option_mask=*/1, /*ntree_limit=*/0, training ? 1 : 0, &len, &out));
  if (len != p.rows()) {
    return absl::InternalError(absl::StrCat("xgboost predicted ", len, " rows for ", p.rows()));
  }
  for (bst_ulong r = 0; r < len; ++r) sums[p.pack[r]] += out[r];
  return sums;
}

// sqrt(sum w (s - y)^2 / sum w); unweighted when all weights are 0.
double WeightedRmse(const std::vector<double>& s, const std::vector<double>& y) {
  double num = 0, den = 0, plain = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const double e = (s[i] - y[i]) * (s[i] - y[i]);
    num += y[i] * e;
    den += y[i];
    plain += e;
  }
  if (den > 0) return std::sqrt(num / den);
  return s.empty() ? 0 : std::sqrt(plain / static_cast<double>(s.size()));
}

int NumThreads(const XGBoostOptions& o) {
  return o.nthread > 0 ? o.nthread : std::max(1, UsableCores());
}

absl::Status SetParams(BoosterHandle b, const XGBoostOptions& o) {
  const int nthread = NumThreads(o);
  const std::vector<std::pair<std::string, std::string>> params = {
      {"booster", "gbtree"},
      {"objective", "reg:squarederror"},  // unused by BoostOneIter; fixes the prediction transform
      {"base_score", "0"},
      {"max_depth", std::to_string(o.max_depth)},
      {"eta", absl::StrCat(o.eta)},
      {"gamma", absl::StrCat(o.gamma)},
      {"min_child_weight", absl::StrCat(o.min_child_weight)},
      {"nthread", std::to_string(nthread)},
      {"seed", std::to_string(o.seed)},
      {"tree_method", o.tree_method},
      {"disable_default_eval_metric", "1"},
      {"verbosity", "0"},
  };
  for (const auto& [k, v] : params) TS_XGB(XGBoosterSetParam(b, k.c_str(), v.c_str()));
  return absl::OkStatus();
}

struct Dataset {
  Packed packed;
  DMatrix matrix;
  std::vector<double> labels;  // per program
  std::vector<int> groups;     // per program: its task
  // Per task, its programs with a positive label (the ranking objective's candidates).
  std::vector<std::vector<int>> ranked;
  // The ranking objective's monitor pairs (better, worse), sampled once.
  std::vector<std::pair<int, int>> monitor_pairs;
};

// Up to `per_program` pairs (better, worse) per program with a positive label, each with a random
// partner of its task whose positive label differs.
std::vector<std::pair<int, int>> SamplePairs(const Dataset& d, int per_program,
                                             std::mt19937_64& rng) {
  std::vector<std::pair<int, int>> pairs;
  for (const std::vector<int>& members : d.ranked) {
    if (members.size() < 2) continue;
    std::uniform_int_distribution<size_t> pick(0, members.size() - 1);
    for (int i : members) {
      for (int k = 0; k < per_program; ++k) {
        const int j = members[pick(rng)];
        if (d.labels[i] == d.labels[j]) continue;
        pairs.emplace_back(d.labels[i] > d.labels[j] ? i : j, d.labels[i] > d.labels[j] ? j : i);
      }
    }
  }
  return pairs;
}

absl::Status MakeDataset(const std::vector<const ProgramFeatures*>& programs,
                         std::vector<double> labels, std::vector<int> groups, Dataset* d) {
  d->packed = Pack(programs);
  d->labels = std::move(labels);
  d->groups = std::move(groups);
  std::map<int, int> index;
  for (size_t p = 0; p < d->labels.size(); ++p) {
    if (d->labels[p] <= 0) continue;
    auto [it, inserted] = index.emplace(d->groups[p], static_cast<int>(d->ranked.size()));
    if (inserted) d->ranked.emplace_back();
    d->ranked[it->second].push_back(static_cast<int>(p));
  }
  return MakeDMatrix(d->packed, &d->matrix);
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Mean pairwise logistic loss of `s` over `pairs`; 0 without pairs.
double PairLoss(const std::vector<double>& s, const std::vector<std::pair<int, int>>& pairs) {
  if (pairs.empty()) return 0;
  double sum = 0;
  for (const auto& [hi, lo] : pairs) sum += std::log1p(std::exp(-(s[hi] - s[lo])));
  return sum / static_cast<double>(pairs.size());
}

// The monitored error: the objective's loss on `d`.
double MonitorError(const XGBoostOptions& o, const std::vector<double>& s, const Dataset& d) {
  if (o.objective == XGBoostObjective::kPairwiseRank) return PairLoss(s, d.monitor_pairs);
  return WeightedRmse(s, d.labels);
}

// Per-program gradient and hessian of the objective with respect to S_p.
void ProgramGradients(const XGBoostOptions& o, const Dataset& train, const std::vector<double>& s,
                      std::mt19937_64& rng, std::vector<double>* g, std::vector<double>* h) {
  g->assign(s.size(), 0.0);
  h->assign(s.size(), 0.0);
  if (o.objective == XGBoostObjective::kPairwiseRank) {
    for (const auto& [hi, lo] : SamplePairs(train, o.rank_pairs_per_program, rng)) {
      const double p = Sigmoid(-(s[hi] - s[lo]));  // d loss / d S_lo; minus that for S_hi
      (*g)[hi] -= p;
      (*g)[lo] += p;
      (*h)[hi] += p * (1 - p);
      (*h)[lo] += p * (1 - p);
    }
    return;
  }
  for (size_t p = 0; p < s.size(); ++p) {
    const double w = train.labels[p];
    (*g)[p] = w * (s[p] - train.labels[p]);
    (*h)[p] = w;
  }
}

// One boosting round of the objective over pack-sum program scores.
absl::Status BoostOnce(const XGBoostOptions& o, BoosterHandle b, const Dataset& train,
                       std::mt19937_64& rng) {
  ASSIGN_OR_RETURN(std::vector<double> sums, PackSum(b, train.matrix, train.packed, true));
  std::vector<double> g, h;
  ProgramGradients(o, train, sums, rng, &g, &h);
  const bst_ulong n = train.packed.rows();
  std::vector<float> grad(n), hess(n);
  // Rows (stores) per program: the hessian of S_p = sum of p's rows' scores (see the header).
  std::vector<double> rows_of(train.labels.size(), 0.0);
  for (bst_ulong r = 0; r < n; ++r) rows_of[train.packed.pack[r]] += 1.0;
  for (bst_ulong r = 0; r < n; ++r) {
    const int p = train.packed.pack[r];
    grad[r] = static_cast<float>(g[p]);
    hess[r] = static_cast<float>(h[p] * rows_of[p]);
  }
  TS_XGB(XGBoosterBoostOneIter(b, train.matrix.h, grad.data(), hess.data(), n));
  return absl::OkStatus();
}

// The first `rounds` boosting rounds of `b` as a new booster.
absl::Status Slice(BoosterHandle b, int rounds, Booster* out) {
  TS_XGB(XGBoosterSlice(b, 0, rounds, 1, &out->h));
  return absl::OkStatus();
}

struct TrainResult {
  Booster booster;
  int best_rounds = 0;  // new rounds, on top of the initial ensemble
  double best_error = 0;
};

// Early stopping: every round's monitored error; Done once early_stopping_rounds passed without
// improvement. The initial ensemble's own error counts as round -1 (zero new rounds).
struct EarlyStop {
  double min_improvement = 0;  // relative (XGBoostOptions::early_stopping_min_improvement)
  double best = std::numeric_limits<double>::infinity();
  int best_round = -1;
  bool Done(double err, int r, int patience) {
    if (err < best * (1 - min_improvement) || (std::isinf(best) && err < best)) {
      best = err;
      best_round = r;
      return false;
    }
    return r - best_round >= patience;
  }
};

// Trains a booster on `train`, starting from `init` (UBJSON of an ensemble kept as is; empty:
// from nothing): exactly `fixed_rounds` new rounds when >= 0, else up to max_rounds, stopping
// early_stopping_rounds after the error on `monitor` (possibly `train` itself) last improved;
// best_rounds is then the new-round count with the lowest error.
absl::Status Train(const XGBoostOptions& o, const Dataset& train, const Dataset* monitor,
                   int fixed_rounds, const std::string& init, TrainResult* out) {
  std::vector<DMatrixHandle> cache = {train.matrix.h};
  if (monitor && monitor != &train) cache.push_back(monitor->matrix.h);
  TS_XGB(XGBoosterCreate(cache.data(), cache.size(), &out->booster.h));
  if (!init.empty()) TS_XGB(XGBoosterLoadModelFromBuffer(out->booster.h, init.data(), init.size()));
  RETURN_IF_ERROR(SetParams(out->booster.h, o));
  std::mt19937_64 rng(o.seed);
  if (fixed_rounds >= 0) {
    for (int r = 0; r < fixed_rounds; ++r)
      RETURN_IF_ERROR(BoostOnce(o, out->booster.h, train, rng));
    out->best_rounds = fixed_rounds;
    return absl::OkStatus();
  }
  EarlyStop stop;
  stop.min_improvement = o.early_stopping_min_improvement;
  auto error = [&]() -> absl::StatusOr<double> {
    ASSIGN_OR_RETURN(std::vector<double> s,
                     PackSum(out->booster.h, monitor->matrix, monitor->packed, monitor == &train));
    return MonitorError(o, s, *monitor);
  };
  if (!init.empty()) {
    ASSIGN_OR_RETURN(const double err, error());
    stop.Done(err, -1, o.early_stopping_rounds);
  }
  for (int r = 0; r < o.max_rounds; ++r) {
    RETURN_IF_ERROR(BoostOnce(o, out->booster.h, train, rng));
    ASSIGN_OR_RETURN(const double err, error());
    if (stop.Done(err, r, o.early_stopping_rounds)) break;
  }
  // Without an initial ensemble at least one round (a NaN error never improves).
  out->best_rounds = std::max(stop.best_round + 1, init.empty() ? 1 : 0);
  out->best_error = stop.best;
  return absl::OkStatus();
}

// The training set of the samples `ids`, with the ranking objective's monitor pairs.
absl::Status MakeProgramSet(const XGBoostOptions& o, const std::vector<TrainingSample>& samples,
                            const std::vector<double>& labels, const std::vector<int>& ids,
                            Dataset* d) {
  std::vector<const ProgramFeatures*> progs;
  std::vector<double> ys;
  std::vector<int> groups;
  for (int i : ids) {
    progs.push_back(&samples[i].features);
    ys.push_back(labels[i]);
    groups.push_back(samples[i].task_id);
  }
  RETURN_IF_ERROR(MakeDataset(progs, ys, groups, d));
  std::mt19937_64 pair_rng(o.seed + 1);
  d->monitor_pairs = SamplePairs(*d, o.rank_pairs_per_program, pair_rng);
  return absl::OkStatus();
}

// Trains on the programs `usable` (indices into samples/labels) on top of `init` (UBJSON of
// `init_rounds` rounds; empty: from nothing): with enough programs a seeded held-out split
// chooses the number of rounds and the model is refit on all of them (see the header comment).
absl::Status TrainWithSplit(const XGBoostOptions& o, const std::vector<TrainingSample>& samples,
                            const std::vector<double>& labels, const std::vector<int>& usable,
                            const std::string& init, int init_rounds, XGBoostTrainingReport* report,
                            TrainResult* result) {
  std::vector<int> order = usable;
  std::mt19937_64 rng(o.seed);
  std::shuffle(order.begin(), order.end(), rng);
  int num_valid = 0;
  if (static_cast<int>(order.size()) >= o.min_programs_for_validation) {
    num_valid = static_cast<int>(o.validation_fraction * static_cast<double>(order.size()));
  }
  report->num_validation = num_valid;
  Dataset all;
  RETURN_IF_ERROR(MakeProgramSet(o, samples, labels, usable, &all));
  report->num_rows = static_cast<int>(all.packed.rows());
  if (num_valid > 0) {
    Dataset train, valid;
    RETURN_IF_ERROR(MakeProgramSet(
        o, samples, labels, std::vector<int>(order.begin() + num_valid, order.end()), &train));
    RETURN_IF_ERROR(MakeProgramSet(
        o, samples, labels, std::vector<int>(order.begin(), order.begin() + num_valid), &valid));
    TrainResult split;
    RETURN_IF_ERROR(Train(o, train, &valid, -1, init, &split));
    // Held-out quality of the training-part model cut to the chosen number of rounds.
    Booster chosen;
    RETURN_IF_ERROR(Slice(split.booster.h, init_rounds + split.best_rounds, &chosen));
    ASSIGN_OR_RETURN(std::vector<double> vs, PackSum(chosen.h, valid.matrix, valid.packed, false));
    report->validation_rmse = WeightedRmse(vs, valid.labels);
    auto acc = PairwiseRankingAccuracy(vs, valid.labels);
    if (acc.ok()) report->validation_pairwise_accuracy = *acc;
    if (o.refit_on_all) {
      RETURN_IF_ERROR(Train(o, all, nullptr, split.best_rounds, init, result));
    } else {
      result->booster.h = chosen.release();
      result->best_rounds = split.best_rounds;
    }
  } else {
    TrainResult full;
    RETURN_IF_ERROR(Train(o, all, &all, -1, init, &full));
    // The loop ran past the best round: keep exactly the best rounds.
    RETURN_IF_ERROR(Slice(full.booster.h, init_rounds + full.best_rounds, &result->booster));
    result->best_rounds = full.best_rounds;
  }
  ASSIGN_OR_RETURN(std::vector<double> ts,
                   PackSum(result->booster.h, all.matrix, all.packed, false));
  report->train_rmse = WeightedRmse(ts, all.labels);
  return absl::OkStatus();
}

// The options of a warm start's added trees: XGBoostWarmStartOptions's depth, rate, rounds and
// objective (default: the initial model's).
XGBoostOptions AddedTreeOptions(const XGBoostOptions& o, XGBoostObjective init_objective) {
  XGBoostOptions a = o;
  a.max_depth = o.warm.max_depth;
  a.eta = o.warm.eta;
  a.max_rounds = o.warm.max_rounds;
  a.objective = o.warm.objective.value_or(init_objective);
  return a;
}

// Added-round counts the cross-validation compares: 5, 10, 20, ... up to max_rounds (included).
std::vector<int> Checkpoints(int max_rounds) {
  std::vector<int> out;
  for (int r = 5; r < max_rounds; r *= 2) out.push_back(r);
  if (max_rounds >= 1) out.push_back(max_rounds);
  return out;
}

// Out-of-fold scores of a warm start: for each fold, trees boosted on the other folds on top of
// `init`; base[p] is program p's initial score, added[c][p] its added trees' sum after
// Checkpoints(a.max_rounds)[c] rounds and blends[c][p] the blend (weight 1) of its fold's
// training part. p indexes `usable`.
struct OutOfFold {
  std::vector<int> rounds;  // Checkpoints(a.max_rounds)
  std::vector<double> base;
  std::vector<std::vector<double>> added;
  std::vector<std::vector<WarmStartBlend>> blends;
};

// The blend of added trees whose sums on the task's records are `added`, the records' initial
// scores `base`.
WarmStartBlend BlendOf(const XGBoostWarmStartOptions& w, double weight,
                       const std::vector<double>& base, const std::vector<double>& added) {
  WarmStartBlend b;
  b.weight = weight;
  if (w.clip && !added.empty()) {
    b.lo = *std::min_element(added.begin(), added.end());
    b.hi = *std::max_element(added.begin(), added.end());
  }
  if (w.band && !base.empty()) {
    b.band_lo = *std::min_element(base.begin(), base.end());
    b.band_hi = *std::max_element(base.begin(), base.end());
  }
  return b;
}

absl::Status CrossValidateAdded(const XGBoostOptions& a, const std::vector<TrainingSample>& samples,
                                const std::vector<double>& labels, const std::vector<int>& usable,
                                const std::string& init, OutOfFold* out) {
  const int n = static_cast<int>(usable.size());
  const int folds = std::min(a.warm.folds, n);
  const std::vector<int> checkpoints = Checkpoints(a.max_rounds);
  out->rounds = checkpoints;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 shuffle_rng(a.seed);
  std::shuffle(order.begin(), order.end(), shuffle_rng);
  out->base.assign(n, 0.0);
  out->added.assign(checkpoints.size(), std::vector<double>(n, 0.0));
  out->blends.assign(checkpoints.size(), std::vector<WarmStartBlend>(n));
  for (int f = 0; f < folds; ++f) {
    std::vector<int> train_ids, fold_pos;  // sample indices; positions in `usable`
    for (int k = 0; k < n; ++k) {
      if (k % folds == f) {
        fold_pos.push_back(order[k]);
      } else {
        train_ids.push_back(usable[order[k]]);
      }
    }
    std::vector<int> fold_ids;
    for (int q : fold_pos) fold_ids.push_back(usable[q]);
    Dataset train, fold;
    RETURN_IF_ERROR(MakeProgramSet(a, samples, labels, train_ids, &train));
    RETURN_IF_ERROR(MakeProgramSet(a, samples, labels, fold_ids, &fold));
    Booster b;
    std::vector<DMatrixHandle> cache = {train.matrix.h, fold.matrix.h};
    TS_XGB(XGBoosterCreate(cache.data(), cache.size(), &b.h));
    TS_XGB(XGBoosterLoadModelFromBuffer(b.h, init.data(), init.size()));
    RETURN_IF_ERROR(SetParams(b.h, a));
    ASSIGN_OR_RETURN(const std::vector<double> train_base,
                     PackSum(b.h, train.matrix, train.packed, false));
    ASSIGN_OR_RETURN(const std::vector<double> fold_base,
                     PackSum(b.h, fold.matrix, fold.packed, false));
    for (size_t i = 0; i < fold_pos.size(); ++i) out->base[fold_pos[i]] = fold_base[i];
    std::mt19937_64 rng(a.seed);
    size_t c = 0;
    for (int r = 1; r <= a.max_rounds && c < checkpoints.size(); ++r) {
      RETURN_IF_ERROR(BoostOnce(a, b.h, train, rng));
      if (r != checkpoints[c]) continue;
      ASSIGN_OR_RETURN(const std::vector<double> ts,
                       PackSum(b.h, train.matrix, train.packed, false));
      ASSIGN_OR_RETURN(const std::vector<double> fs, PackSum(b.h, fold.matrix, fold.packed, false));
      std::vector<double> d(ts.size());
      for (size_t i = 0; i < ts.size(); ++i) d[i] = ts[i] - train_base[i];
      const WarmStartBlend blend = BlendOf(a.warm, 1.0, train_base, d);
      for (size_t i = 0; i < fold_pos.size(); ++i) {
        out->added[c][fold_pos[i]] = fs[i] - fold_base[i];
        out->blends[c][fold_pos[i]] = blend;
      }
      ++c;
    }
  }
  return absl::OkStatus();
}

// The warm start's choice: added rounds (0: none) and weight, with the cross-validated pairwise
// accuracy of the initial model alone and of the choice.
struct WarmChoice {
  int rounds = 0;
  double weight = 0;
  double initial_accuracy = std::numeric_limits<double>::quiet_NaN();
  double accuracy = std::numeric_limits<double>::quiet_NaN();
};

// Picks the (rounds, weight) whose out-of-fold blended scores rank the programs with a positive
// label best; the initial model alone unless one beats it by warm.min_gain / sqrt(valid ones).
// Weights are capped at n / (n + warm.prior_records).
WarmChoice ChooseWarmStart(const XGBoostWarmStartOptions& w, const OutOfFold& oof,
                           const std::vector<double>& labels) {
  std::vector<int> valid;
  for (size_t p = 0; p < labels.size(); ++p) {
    if (labels[p] > 0) valid.push_back(static_cast<int>(p));
  }
  auto accuracy = [&](int c, double weight) -> absl::StatusOr<double> {
    std::vector<double> s, y;
    for (int p : valid) {
      if (c < 0) {
        s.push_back(oof.base[p]);
      } else {
        WarmStartBlend b = oof.blends[c][p];
        b.weight = weight;
        s.push_back(BlendedScore(oof.base[p], oof.added[c][p], b));
      }
      y.push_back(labels[p]);
    }
    return PairwiseRankingAccuracy(s, y);
  };
  WarmChoice choice;
  absl::StatusOr<double> initial = accuracy(-1, 0);
  if (!initial.ok()) return choice;  // no pair of valid programs to judge by
  choice.initial_accuracy = choice.accuracy = *initial;
  const double n = static_cast<double>(labels.size());
  const double min_gain = w.min_gain / std::sqrt(static_cast<double>(valid.size()));
  const double cap = n / (n + std::max(0.0, w.prior_records));
  std::vector<double> weights;
  for (double x : w.weights) weights.push_back(std::min(x, cap));
  std::sort(weights.begin(), weights.end());
  weights.erase(std::unique(weights.begin(), weights.end()), weights.end());
  for (size_t c = 0; c < oof.added.size(); ++c) {
    for (double weight : weights) {
      if (weight <= 0) continue;
      absl::StatusOr<double> acc = accuracy(static_cast<int>(c), weight);
      const double bar = choice.weight == 0 ? choice.accuracy + min_gain : choice.accuracy;
      if (acc.ok() && *acc > bar) {
        choice.accuracy = *acc;
        choice.rounds = oof.rounds[c];
        choice.weight = weight;
      }
    }
  }
  return choice;
}

// Pack-sum scores of an ensemble: `full` alone, or with `added` set, the blend of `base` and
// `added` (XGBoostModel's warm start).
absl::StatusOr<std::vector<double>> EnsembleScores(BoosterHandle full, BoosterHandle base,
                                                   BoosterHandle added, const WarmStartBlend& blend,
                                                   const DMatrix& m, const Packed& p) {
  if (added == nullptr) return PackSum(full, m, p, false);
  ASSIGN_OR_RETURN(std::vector<double> scores, PackSum(base, m, p, false));
  ASSIGN_OR_RETURN(const std::vector<double> d, PackSum(added, m, p, false));
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = BlendedScore(scores[i], d[i], blend);
  return scores;
}

}  // namespace

XGBoostModel::XGBoostModel(XGBoostOptions options) : options_(std::move(options)) {}

XGBoostModel::~XGBoostModel() { FreeEnsemble(); }

void XGBoostModel::FreeEnsemble() {
  for (void* h : {booster_, base_, added_}) {
    if (h) XGBoosterFree(h);
  }
  booster_ = base_ = added_ = nullptr;
  base_rounds_ = 0;
  blend_ = WarmStartBlend{};
}

absl::Status XGBoostModel::SetEnsemble(void* full, int rounds, int base_rounds,
                                       const WarmStartBlend& blend) {
  Booster owned;
  owned.h = full;
  Booster base, added;
  if (full != nullptr && base_rounds > 0 && base_rounds < rounds) {
    RETURN_IF_ERROR(Slice(full, base_rounds, &base));
    TS_XGB(XGBoosterSlice(full, base_rounds, rounds, 1, &added.h));
    const std::string nthread = std::to_string(NumThreads(options_));
    TS_XGB(XGBoosterSetParam(base.h, "nthread", nthread.c_str()));
    TS_XGB(XGBoosterSetParam(added.h, "nthread", nthread.c_str()));
  }
  FreeEnsemble();
  booster_ = owned.release();
  rounds_ = rounds;
  if (added.h != nullptr) {
    base_ = base.release();
    added_ = added.release();
    base_rounds_ = base_rounds;
    blend_ = blend;
  }
  return absl::OkStatus();
}

absl::Status XGBoostModel::Update(const std::vector<TrainingSample>& samples) {
  RETURN_IF_ERROR(ValidateSamples(samples));
  samples_.insert(samples_.end(), samples.begin(), samples.end());
  const std::vector<double> labels = NormalizedLabels(samples_);

  std::vector<int> usable;
  bool any_positive = false;
  for (size_t i = 0; i < samples_.size(); ++i) {
    if (samples_[i].features.stores.empty()) continue;
    usable.push_back(static_cast<int>(i));
    any_positive |= labels[i] > 0;
  }
  if (!any_positive) return absl::OkStatus();
  // A warm-started model adds trees only when held-out records can show they help: boosted on a
  // handful of records with the training error as the stopping rule, the new trees overfit them
  // (leave-one-workload-out on the H200 logs, 16 records: median Spearman 0.72 -> 0.54).
  if (!init_booster_.empty() &&
      static_cast<int>(usable.size()) < options_.min_programs_for_validation) {
    report_ = XGBoostTrainingReport{};
    report_.num_programs = static_cast<int>(usable.size());
    report_.rounds = init_rounds_;
    return absl::OkStatus();
  }
  if (!init_booster_.empty() && options_.warm.folds >= 2) return UpdateWarm(usable, labels);

  const XGBoostOptions o =
      init_booster_.empty() ? options_ : AddedTreeOptions(options_, init_objective_);
  XGBoostTrainingReport report;
  report.num_programs = static_cast<int>(usable.size());
  TrainResult result;
  RETURN_IF_ERROR(
      TrainWithSplit(o, samples_, labels, usable, init_booster_, init_rounds_, &report, &result));
  report.rounds = init_rounds_ + result.best_rounds;
  report.added_weight = init_booster_.empty() ? 0.0 : 1.0;
  RETURN_IF_ERROR(SetEnsemble(result.booster.release(), report.rounds, 0, WarmStartBlend{}));
  report_ = report;
  return absl::OkStatus();
}

absl::Status XGBoostModel::UpdateWarm(const std::vector<int>& usable,
                                      const std::vector<double>& labels) {
  const XGBoostOptions a = AddedTreeOptions(options_, init_objective_);
  OutOfFold oof;
  RETURN_IF_ERROR(CrossValidateAdded(a, samples_, labels, usable, init_booster_, &oof));
  std::vector<double> usable_labels;
  for (int i : usable) usable_labels.push_back(labels[i]);
  const WarmChoice choice = ChooseWarmStart(a.warm, oof, usable_labels);

  Dataset all;
  RETURN_IF_ERROR(MakeProgramSet(a, samples_, labels, usable, &all));
  TrainResult result;
  RETURN_IF_ERROR(Train(a, all, nullptr, choice.rounds, init_booster_, &result));
  // The added trees' range on the task's records bounds what they add to any other program, and
  // the records' initial scores bound which programs they reorder.
  WarmStartBlend blend;
  if (choice.rounds > 0) {
    Booster base, added;
    RETURN_IF_ERROR(Slice(result.booster.h, init_rounds_, &base));
    TS_XGB(
        XGBoosterSlice(result.booster.h, init_rounds_, init_rounds_ + choice.rounds, 1, &added.h));
    ASSIGN_OR_RETURN(const std::vector<double> b, PackSum(base.h, all.matrix, all.packed, false));
    ASSIGN_OR_RETURN(const std::vector<double> d, PackSum(added.h, all.matrix, all.packed, false));
    blend = BlendOf(a.warm, choice.weight, b, d);
  }
  XGBoostTrainingReport report;
  report.num_programs = static_cast<int>(usable.size());
  report.num_rows = static_cast<int>(all.packed.rows());
  report.num_validation = static_cast<int>(usable.size());
  report.rounds = init_rounds_ + choice.rounds;
  report.validation_pairwise_accuracy = choice.accuracy;
  report.initial_pairwise_accuracy = choice.initial_accuracy;
  report.added_weight = choice.rounds > 0 ? choice.weight : 0.0;
  RETURN_IF_ERROR(SetEnsemble(result.booster.release(), report.rounds, init_rounds_, blend));
  report_ = report;
  ASSIGN_OR_RETURN(const std::vector<double> scores,
                   EnsembleScores(booster_, base_, added_, blend_, all.matrix, all.packed));
  report_.train_rmse = WeightedRmse(scores, all.labels);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> XGBoostModel::Predict(
    const std::vector<ProgramFeatures>& programs) {
  RETURN_IF_ERROR(ValidatePrograms(programs));
  std::vector<double> scores(programs.size(), 0.0);
  if (booster_) {
    std::vector<const ProgramFeatures*> progs;
    for (const auto& p : programs) progs.push_back(&p);
    Packed packed = Pack(progs);
    if (packed.rows() > 0) {
      DMatrix m;
      RETURN_IF_ERROR(MakeDMatrix(packed, &m));
      ASSIGN_OR_RETURN(scores, EnsembleScores(booster_, base_, added_, blend_, m, packed));
    }
  }
  for (size_t i = 0; i < programs.size(); ++i) {
    if (programs[i].stores.empty()) scores[i] = -std::numeric_limits<double>::infinity();
  }
  return scores;
}

namespace {

// XGBoost's UBJSON reader crashes on some corrupted inputs (seen: a segfault in
// UBJReader::ParseArray after one flipped byte), so the file carries a checksum of the booster
// and Load verifies it before XGBoost sees the bytes.
std::string BoosterChecksum(const std::string& bytes) {
  return absl::StrCat(absl::Hex(ir::Fnv1a64(bytes), absl::kZeroPad16));
}

}  // namespace

absl::Status XGBoostModel::Save(const std::string& path) const {
  std::string booster_bytes;
  if (booster_) {
    bst_ulong len = 0;
    const char* data = nullptr;
    TS_XGB(XGBoosterSaveModelToBuffer(booster_, R"({"format": "ubj"})", &len, &data));
    booster_bytes.assign(data, len);
  }
  nlohmann::json provenance =
      nlohmann::json::parse(info_.provenance, nullptr, /*allow_exceptions=*/false);
  if (!provenance.is_object()) provenance = nlohmann::json::object();
  nlohmann::json meta = {
      {"version", kXGBoostModelFileVersion},
      {"feature_version", kFeatureVersion},
      {"num_features", kNumFeatures},
      {"target", info_.target},
      {"provenance", provenance},
      {"objective",
       XGBoostObjectiveName(init_booster_.empty() ? options_.objective : init_objective_)},
      {"trained", booster_ != nullptr},
      {"rounds", rounds_},
      {"booster_bytes", booster_bytes.size()},
      {"booster_fnv1a64", BoosterChecksum(booster_bytes)}};
  if (added_ != nullptr) {
    // JSON has no infinity: an unclipped side is null.
    auto bound = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
    meta["added"] = {{"base_rounds", base_rounds_},      {"weight", blend_.weight},
                     {"lo", bound(blend_.lo)},           {"hi", bound(blend_.hi)},
                     {"band_lo", bound(blend_.band_lo)}, {"band_hi", bound(blend_.band_hi)}};
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << kMagic << "\n" << meta.dump() << "\n" << booster_bytes;
  out.close();
  if (!out) {
    return absl::InternalError(
        absl::StrCat("cannot write model file '", path, "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

namespace {

bool HasInt(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number_integer();
}

// A model file's contents, checked.
struct ModelFile {
  ModelInfo info;
  bool trained = false;
  int rounds = 0;
  std::string booster;   // UBJSON
  std::string checksum;  // BoosterChecksum of `booster` (version 2); empty in version 1
  XGBoostObjective objective = XGBoostObjective::kRegression;
  // A warm start's weighted added trees (version 3): the rounds after base_rounds (0: none).
  int base_rounds = 0;
  WarmStartBlend blend;
};

// The "added" object of a version-3 metadata line. Errors: "corrupt metadata line".
absl::Status ReadAdded(const nlohmann::json& meta, const absl::Status& corrupt, ModelFile* f) {
  if (!meta.contains("added")) return absl::OkStatus();
  const nlohmann::json& a = meta["added"];
  auto bound = [&](const char* key, double* x) {
    if (!a.contains(key) || (!a[key].is_null() && !a[key].is_number())) return false;
    if (a[key].is_number()) *x = a[key].get<double>();
    return true;
  };
  WarmStartBlend& b = f->blend;
  if (!a.is_object() || !HasInt(a, "base_rounds") || !a.contains("weight") ||
      !a["weight"].is_number() || !bound("lo", &b.lo) || !bound("hi", &b.hi) ||
      !bound("band_lo", &b.band_lo) || !bound("band_hi", &b.band_hi)) {
    return corrupt;
  }
  f->base_rounds = a["base_rounds"].get<int>();
  b.weight = a["weight"].get<double>();
  if (f->base_rounds < 0 || f->base_rounds > f->rounds) return corrupt;
  return absl::OkStatus();
}

// The metadata line's fields (version 1 or 2). Errors: "corrupt metadata line".
absl::Status ReadMeta(const nlohmann::json& meta, const std::string& where, ModelFile* f,
                      int* feature_version, int* num_features, uint64_t* nbytes) {
  const auto corrupt = absl::InvalidArgumentError(absl::StrCat(where, ": corrupt metadata line"));
  if (!meta.is_object() || !HasInt(meta, "version") || !HasInt(meta, "feature_version") ||
      !HasInt(meta, "num_features") || !meta.contains("trained") || !meta["trained"].is_boolean() ||
      !HasInt(meta, "rounds") || !meta.contains("booster_bytes") ||
      !meta["booster_bytes"].is_number_unsigned()) {
    return corrupt;
  }
  const int version = meta["version"].get<int>();
  if (version > kXGBoostModelFileVersion || version < 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": version ", version,
                                                   " is newer than this build reads (",
                                                   kXGBoostModelFileVersion, ")"));
  }
  if (version >= 2) {
    if (!meta.contains("target") || !meta["target"].is_string() || !meta.contains("provenance") ||
        !meta["provenance"].is_object()) {
      return corrupt;
    }
    if (!meta.contains("booster_fnv1a64") || !meta["booster_fnv1a64"].is_string()) return corrupt;
    f->checksum = meta["booster_fnv1a64"].get<std::string>();
    f->info.target = meta["target"].get<std::string>();
    f->info.provenance = meta["provenance"].dump();
  }
  *feature_version = meta["feature_version"].get<int>();
  *num_features = meta["num_features"].get<int>();
  f->trained = meta["trained"].get<bool>();
  f->rounds = meta["rounds"].get<int>();
  *nbytes = meta["booster_bytes"].get<uint64_t>();
  if (meta.contains("objective") && meta["objective"].is_string() &&
      meta["objective"].get<std::string>() ==
          XGBoostObjectiveName(XGBoostObjective::kPairwiseRank)) {
    f->objective = XGBoostObjective::kPairwiseRank;
  }
  return ReadAdded(meta, corrupt, f);
}

// Reads and checks a model file; `target` (when given) must match the file's (a file without one
// matches any).
absl::StatusOr<ModelFile> ReadModelFile(const std::string& path, const std::string* target) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read model file '", path, "': ", std::strerror(errno)));
  }
  std::error_code dir_error;
  if (std::filesystem::is_directory(path, dir_error)) {  // opens, but reads nothing
    return absl::InvalidArgumentError(
        absl::StrCat("model file '", path, "' is a directory, not a model file"));
  }
  std::string magic, meta_line;
  if (!std::getline(in, magic) || magic != kMagic || !std::getline(in, meta_line)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model file '", path, "' is not a tilesearch xgboost model"));
  }
  const std::string where = absl::StrCat("model file '", path, "'");
  ModelFile f;
  int feature_version = 0, num_features = 0;
  uint64_t nbytes = 0;
  RETURN_IF_ERROR(ReadMeta(nlohmann::json::parse(meta_line, nullptr, /*allow_exceptions=*/false),
                           where, &f, &feature_version, &num_features, &nbytes));
  const std::string file_target = f.info.target.empty() ? "any target" : f.info.target;
  if (target != nullptr && !f.info.target.empty() &&
      (f.info.target != *target || feature_version != kFeatureVersion)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " is for ", file_target, " (feature version ", feature_version,
                     "); this run needs ", *target, " (feature version ", kFeatureVersion, ")"));
  }
  if (feature_version != kFeatureVersion) {
    return absl::InvalidArgumentError(absl::StrCat(where, " (", file_target,
                                                   ") has feature version ", feature_version,
                                                   ", this build extracts ", kFeatureVersion));
  }
  if (num_features != kNumFeatures) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", num_features, " features, expected ", kNumFeatures));
  }
  f.booster.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (f.booster.size() != nbytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " truncated: booster of ", f.booster.size(), " bytes, header says ", nbytes));
  }
  if (!f.checksum.empty() && BoosterChecksum(f.booster) != f.checksum) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": corrupt booster: checksum ",
                                                   BoosterChecksum(f.booster),
                                                   " differs from the header's ", f.checksum));
  }
  if (f.trained && nbytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": empty booster"));
  }
  return f;
}

// A booster from UBJSON bytes, checked to take kNumFeatures features.
absl::Status LoadBooster(const std::string& bytes, const std::string& where, int nthread,
                         Booster* out) {
  if (XGBoosterCreate(nullptr, 0, &out->h) != 0 ||
      XGBoosterLoadModelFromBuffer(out->h, bytes.data(), bytes.size()) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": corrupt booster: ", XGBGetLastError()));
  }
  bst_ulong nfeat = 0;
  if (XGBoosterGetNumFeature(out->h, &nfeat) != 0 ||
      nfeat != static_cast<bst_ulong>(kNumFeatures)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": booster has ", nfeat, " features, expected ", kNumFeatures));
  }
  TS_XGB(XGBoosterSetParam(out->h, "nthread", std::to_string(nthread).c_str()));
  return absl::OkStatus();
}

}  // namespace

double BlendedScore(double initial, double added, const WarmStartBlend& blend) {
  if (initial < blend.band_lo || initial > blend.band_hi) return initial;
  const double x = initial + blend.weight * std::clamp(added, blend.lo, blend.hi);
  const double width = blend.band_hi - blend.band_lo;
  if (!std::isfinite(width)) return x;
  if (width <= 0) return initial;
  // Identity in the band's middle; the outer 5 % on each side take every score beyond, squashed
  // (strictly increasing, never reaching the band's ends).
  const double edge = 0.05 * width;
  const double low = blend.band_lo + edge, high = blend.band_hi - edge;
  if (x < low) return blend.band_lo + edge * std::exp((x - low) / edge);
  if (x > high) return blend.band_hi - edge * std::exp(-(x - high) / edge);
  return x;
}

XGBoostOptions OnlineModelOptions(uint64_t seed, int nthread) {
  XGBoostOptions o;
  o.seed = seed;
  o.nthread = nthread;
  return o;
}

const char* XGBoostObjectiveName(XGBoostObjective objective) {
  return objective == XGBoostObjective::kPairwiseRank ? "rank" : "regression";
}

std::string ModelTargetName(const Target& target) {
  return target.is_gpu() ? absl::StrCat("cuda ", target.arch) : std::string("cpu");
}

absl::Status XGBoostModel::Load(const std::string& path) {
  ASSIGN_OR_RETURN(ModelFile f, ReadModelFile(path, nullptr));
  Booster loaded;
  if (f.trained) {
    RETURN_IF_ERROR(LoadBooster(f.booster, absl::StrCat("model file '", path, "'"),
                                NumThreads(options_), &loaded));
  }
  RETURN_IF_ERROR(SetEnsemble(loaded.release(), f.rounds, f.base_rounds, f.blend));
  info_ = std::move(f.info);
  return absl::OkStatus();
}

absl::Status XGBoostModel::LoadForTarget(const std::string& path, const Target& target) {
  const std::string name = ModelTargetName(target);
  RETURN_IF_ERROR(ReadModelFile(path, &name).status());
  return Load(path);
}

absl::Status XGBoostModel::SetInitialModel(const std::string& path, const Target& target) {
  const std::string name = ModelTargetName(target);
  ASSIGN_OR_RETURN(ModelFile f, ReadModelFile(path, &name));
  if (!f.trained) {
    return absl::InvalidArgumentError(
        absl::StrCat("model file '", path, "' holds no trained model to start from"));
  }
  if (f.base_rounds > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model file '", path,
                     "' holds a warm-started model with weighted added trees; start from the "
                     "model it was warm-started from"));
  }
  RETURN_IF_ERROR(Load(path));
  init_objective_ = f.objective;
  bst_ulong len = 0;
  const char* data = nullptr;
  TS_XGB(XGBoosterSaveModelToBuffer(booster_, R"({"format": "ubj"})", &len, &data));
  init_booster_.assign(data, len);
  int boosted = 0;
  TS_XGB(XGBoosterBoostedRounds(booster_, &boosted));
  init_rounds_ = boosted;
  rounds_ = boosted;
  return absl::OkStatus();
}

}  // namespace tilesearch::costmodel
