#include "costmodel/xgboost_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/cpu_count.h"
#include "base/status.h"
#include "costmodel/features.h"
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
};

absl::Status MakeDataset(const std::vector<const ProgramFeatures*>& programs,
                         std::vector<double> labels, Dataset* d) {
  d->packed = Pack(programs);
  d->labels = std::move(labels);
  return MakeDMatrix(d->packed, &d->matrix);
}

// One boosting round with the pack-sum weighted squared error (Ansor's objective).
absl::Status BoostOnce(BoosterHandle b, const Dataset& train) {
  ASSIGN_OR_RETURN(std::vector<double> sums, PackSum(b, train.matrix, train.packed, true));
  const bst_ulong n = train.packed.rows();
  std::vector<float> grad(n), hess(n);
  // Rows (stores) per program: the hessian of S_p = sum of p's rows' scores (see the header).
  std::vector<double> rows_of(train.labels.size(), 0.0);
  for (bst_ulong r = 0; r < n; ++r) rows_of[train.packed.pack[r]] += 1.0;
  for (bst_ulong r = 0; r < n; ++r) {
    const int p = train.packed.pack[r];
    const double w = train.labels[p];
    grad[r] = static_cast<float>(w * (sums[p] - train.labels[p]));
    hess[r] = static_cast<float>(w * rows_of[p]);
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
  int best_rounds = 0;
  double best_error = 0;
};

// Trains a fresh booster on `train`: exactly `fixed_rounds` rounds when > 0, else up to
// max_rounds, stopping early_stopping_rounds after the error on `monitor` (possibly `train`
// itself) last improved; best_rounds is then the round count with the lowest error.
absl::Status Train(const XGBoostOptions& o, const Dataset& train, const Dataset* monitor,
                   int fixed_rounds, TrainResult* out) {
  std::vector<DMatrixHandle> cache = {train.matrix.h};
  if (monitor && monitor != &train) cache.push_back(monitor->matrix.h);
  TS_XGB(XGBoosterCreate(cache.data(), cache.size(), &out->booster.h));
  RETURN_IF_ERROR(SetParams(out->booster.h, o));
  if (fixed_rounds > 0) {
    for (int r = 0; r < fixed_rounds; ++r) RETURN_IF_ERROR(BoostOnce(out->booster.h, train));
    out->best_rounds = fixed_rounds;
    return absl::OkStatus();
  }
  double best = std::numeric_limits<double>::infinity();
  int best_round = 0;
  for (int r = 0; r < o.max_rounds; ++r) {
    RETURN_IF_ERROR(BoostOnce(out->booster.h, train));
    ASSIGN_OR_RETURN(std::vector<double> s,
                     PackSum(out->booster.h, monitor->matrix, monitor->packed, monitor == &train));
    const double err = WeightedRmse(s, monitor->labels);
    if (err < best) {
      best = err;
      best_round = r;
    } else if (r - best_round >= o.early_stopping_rounds) {
      break;
    }
  }
  out->best_rounds = best_round + 1;
  out->best_error = best;
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

  // Seeded split of the programs into training and held-out parts.
  std::vector<int> order = usable;
  std::mt19937_64 rng(options_.seed);
  std::shuffle(order.begin(), order.end(), rng);
  int num_valid = 0;
  if (static_cast<int>(order.size()) >= options_.min_programs_for_validation) {
    num_valid = static_cast<int>(options_.validation_fraction * static_cast<double>(order.size()));
  }
  auto make = [&](const std::vector<int>& ids, Dataset* d) {
    std::vector<const ProgramFeatures*> progs;
    std::vector<double> ys;
    for (int i : ids) {
      progs.push_back(&samples_[i].features);
      ys.push_back(labels[i]);
    }
    return MakeDataset(progs, ys, d);
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
    RETURN_IF_ERROR(Train(options_, train, &valid, 0, &split));
    // Held-out quality of the training-part model cut to the chosen number of rounds.
    Booster chosen;
    RETURN_IF_ERROR(Slice(split.booster.h, split.best_rounds, &chosen));
    ASSIGN_OR_RETURN(std::vector<double> vs, PackSum(chosen.h, valid.matrix, valid.packed, false));
    report.validation_rmse = WeightedRmse(vs, valid.labels);
    auto acc = PairwiseRankingAccuracy(vs, valid.labels);
    if (acc.ok()) report.validation_pairwise_accuracy = *acc;
    if (options_.refit_on_all) {
      RETURN_IF_ERROR(Train(options_, all, nullptr, split.best_rounds, &result));
    } else {
      result.booster.h = chosen.release();
      result.best_rounds = split.best_rounds;
    }
  } else {
    TrainResult full;
    RETURN_IF_ERROR(Train(options_, all, &all, 0, &full));
    // The loop ran past the best round: keep exactly the best rounds.
    RETURN_IF_ERROR(Slice(full.booster.h, full.best_rounds, &result.booster));
    result.best_rounds = full.best_rounds;
  }
  ASSIGN_OR_RETURN(std::vector<double> ts,
                   PackSum(result.booster.h, all.matrix, all.packed, false));
  report.train_rmse = WeightedRmse(ts, all.labels);
  report.rounds = result.best_rounds;

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

absl::Status XGBoostModel::Save(const std::string& path) const {
  std::string booster_bytes;
  if (booster_) {
    bst_ulong len = 0;
    const char* data = nullptr;
    TS_XGB(XGBoosterSaveModelToBuffer(booster_, R"({"format": "ubj"})", &len, &data));
    booster_bytes.assign(data, len);
  }
  nlohmann::json meta = {{"version", kXGBoostModelFileVersion},
                         {"feature_version", kFeatureVersion},
                         {"num_features", kNumFeatures},
                         {"trained", booster_ != nullptr},
                         {"rounds", rounds_},
                         {"booster_bytes", booster_bytes.size()}};
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << kMagic << "\n" << meta.dump() << "\n" << booster_bytes;
  out.close();
  if (!out) {
    return absl::InternalError(
        absl::StrCat("cannot write model file '", path, "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status XGBoostModel::Load(const std::string& path) {
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
  const std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string where = absl::StrCat("model file '", path, "'");
  nlohmann::json meta = nlohmann::json::parse(meta_line, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object() || !meta.contains("version") || !meta["version"].is_number_integer() ||
      !meta.contains("feature_version") || !meta.contains("num_features") ||
      !meta.contains("trained") || !meta.contains("rounds") || !meta.contains("booster_bytes") ||
      !meta["feature_version"].is_number_integer() || !meta["num_features"].is_number_integer() ||
      !meta["trained"].is_boolean() || !meta["rounds"].is_number_integer() ||
      !meta["booster_bytes"].is_number_unsigned()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": corrupt metadata line"));
  }
  const int version = meta["version"].get<int>();
  if (version > kXGBoostModelFileVersion || version < 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": version ", version,
                                                   " is newer than this build reads (",
                                                   kXGBoostModelFileVersion, ")"));
  }
  if (meta["feature_version"].get<int>() != kFeatureVersion) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has feature version ",
                                                   meta["feature_version"].get<int>(),
                                                   ", this build extracts ", kFeatureVersion));
  }
  if (meta["num_features"].get<int>() != kNumFeatures) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", meta["num_features"].get<int>(),
                                                   " features, expected ", kNumFeatures));
  }
  const uint64_t nbytes = meta["booster_bytes"].get<uint64_t>();
  if (rest.size() != nbytes) {
    return absl::InvalidArgumentError(absl::StrCat(where, " truncated: booster of ", rest.size(),
                                                   " bytes, header says ", nbytes));
  }
  Booster loaded;
  if (meta["trained"].get<bool>()) {
    if (nbytes == 0) return absl::InvalidArgumentError(absl::StrCat(where, ": empty booster"));
    if (XGBoosterCreate(nullptr, 0, &loaded.h) != 0 ||
        XGBoosterLoadModelFromBuffer(loaded.h, rest.data(), rest.size()) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": corrupt booster: ", XGBGetLastError()));
    }
    bst_ulong nfeat = 0;
    if (XGBoosterGetNumFeature(loaded.h, &nfeat) != 0 ||
        nfeat != static_cast<bst_ulong>(kNumFeatures)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": booster has ", nfeat, " features, expected ", kNumFeatures));
    }
    TS_XGB(XGBoosterSetParam(loaded.h, "nthread", std::to_string(NumThreads(options_)).c_str()));
  }
  if (booster_) XGBoosterFree(booster_);
  booster_ = loaded.release();
  rounds_ = meta["rounds"].get<int>();
  return absl::OkStatus();
}

}  // namespace tilesearch::costmodel
