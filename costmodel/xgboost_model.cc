#include "costmodel/xgboost_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
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

}  // namespace

XGBoostModel::XGBoostModel(XGBoostOptions options) : options_(std::move(options)) {}

XGBoostModel::~XGBoostModel() {
  if (booster_) XGBoosterFree(booster_);
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

  // Seeded split of the programs into training and held-out parts.
  std::vector<int> order = usable;
  std::mt19937_64 rng(options_.seed);
  std::shuffle(order.begin(), order.end(), rng);
  int num_valid = 0;
  if (static_cast<int>(order.size()) >= options_.min_programs_for_validation) {
    num_valid = static_cast<int>(options_.validation_fraction * static_cast<double>(order.size()));
  }
  auto make = [&](const std::vector<int>& ids, Dataset* d) -> absl::Status {
    std::vector<const ProgramFeatures*> progs;
    std::vector<double> ys;
    std::vector<int> groups;
    for (int i : ids) {
      progs.push_back(&samples_[i].features);
      ys.push_back(labels[i]);
      groups.push_back(samples_[i].task_id);
    }
    RETURN_IF_ERROR(MakeDataset(progs, ys, groups, d));
    std::mt19937_64 pair_rng(options_.seed + 1);
    d->monitor_pairs = SamplePairs(*d, options_.rank_pairs_per_program, pair_rng);
    return absl::OkStatus();
  };
  XGBoostTrainingReport report;
  report.num_programs = static_cast<int>(usable.size());
  report.num_validation = num_valid;
  TrainResult result;
  Dataset all;
  RETURN_IF_ERROR(make(usable, &all));
  report.num_rows = static_cast<int>(all.packed.rows());
  if (num_valid > 0) {
    Dataset train, valid;
    RETURN_IF_ERROR(make(std::vector<int>(order.begin() + num_valid, order.end()), &train));
    RETURN_IF_ERROR(make(std::vector<int>(order.begin(), order.begin() + num_valid), &valid));
    TrainResult split;
    RETURN_IF_ERROR(Train(options_, train, &valid, -1, init_booster_, &split));
    // Held-out quality of the training-part model cut to the chosen number of rounds.
    Booster chosen;
    RETURN_IF_ERROR(Slice(split.booster.h, init_rounds_ + split.best_rounds, &chosen));
    ASSIGN_OR_RETURN(std::vector<double> vs, PackSum(chosen.h, valid.matrix, valid.packed, false));
    report.validation_rmse = WeightedRmse(vs, valid.labels);
    auto acc = PairwiseRankingAccuracy(vs, valid.labels);
    if (acc.ok()) report.validation_pairwise_accuracy = *acc;
    if (options_.refit_on_all) {
      RETURN_IF_ERROR(Train(options_, all, nullptr, split.best_rounds, init_booster_, &result));
    } else {
      result.booster.h = chosen.release();
      result.best_rounds = split.best_rounds;
    }
  } else {
    TrainResult full;
    RETURN_IF_ERROR(Train(options_, all, &all, -1, init_booster_, &full));
    // The loop ran past the best round: keep exactly the best rounds.
    RETURN_IF_ERROR(Slice(full.booster.h, init_rounds_ + full.best_rounds, &result.booster));
    result.best_rounds = full.best_rounds;
  }
  ASSIGN_OR_RETURN(std::vector<double> ts,
                   PackSum(result.booster.h, all.matrix, all.packed, false));
  report.train_rmse = WeightedRmse(ts, all.labels);
  report.rounds = init_rounds_ + result.best_rounds;

  if (booster_) XGBoosterFree(booster_);
  booster_ = result.booster.release();
  rounds_ = report.rounds;
  report_ = report;
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
      ASSIGN_OR_RETURN(scores, PackSum(booster_, m, packed, false));
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
  nlohmann::json meta = {{"version", kXGBoostModelFileVersion},
                         {"feature_version", kFeatureVersion},
                         {"num_features", kNumFeatures},
                         {"target", info_.target},
                         {"provenance", provenance},
                         {"objective", XGBoostObjectiveName(options_.objective)},
                         {"trained", booster_ != nullptr},
                         {"rounds", rounds_},
                         {"booster_bytes", booster_bytes.size()},
                         {"booster_fnv1a64", BoosterChecksum(booster_bytes)}};
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

// A model file's contents, checked.
struct ModelFile {
  ModelInfo info;
  bool trained = false;
  int rounds = 0;
  std::string booster;   // UBJSON
  std::string checksum;  // BoosterChecksum of `booster` (version 2); empty in version 1
};

bool HasInt(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number_integer();
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
  return absl::OkStatus();
}

// Reads and checks a model file; `target` (when given) must match the file's (a file without one
// matches any).
absl::StatusOr<ModelFile> ReadModelFile(const std::string& path, const std::string* target) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read model file '", path, "': ", std::strerror(errno)));
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
  if (booster_) XGBoosterFree(booster_);
  booster_ = loaded.release();
  rounds_ = f.rounds;
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
  RETURN_IF_ERROR(Load(path));
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
