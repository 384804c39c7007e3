// `tilesearch eval-model`: leave-one-workload-out evaluation of cost models on tuning logs
// (TenSet's transfer evaluation): how well a model that never saw a workload ranks its measured
// schedules, against a model trained online on the workload's first records and the random model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "costmodel/xgboost_model.h"
#include "ir/compute_dag.h"
#include "search/measure_record.h"
#include "tools/commands.h"
#include "tools/model_options.h"

namespace tilesearch::tools {
namespace {

struct EvalModelOptions {
  ModelDataOptions data;
  std::vector<int> online_records = {16};  // one table per count
  int min_eval_records = 8;
  // --max-eval-records-per-task: a held-out workload's records considered (online and evaluated),
  // its first ones; 0 = as --max-records-per-task. Lets the training cap vary over one evaluation
  // set.
  int64_t max_eval_records = 0;
  std::vector<std::string> holdout;  // --holdout TEXT: only workloads whose name contains one
  // --summary-holdout TEXT: a second summary over the evaluated workloads whose name contains one
  std::vector<std::string> summary_holdout;
  std::string pretrained_cache;  // --pretrained-cache DIR: pretrained models kept across runs
  // --warm-*: the pretrained+online model's warm start (XGBoostWarmStartOptions); the rest of its
  // options are the tuner's (costmodel::OnlineModelOptions).
  costmodel::XGBoostWarmStartOptions warm;
  std::string warm_objective = "initial";
  std::string out;
  std::string command_line;
};

constexpr int kModels = 4;
const char* const kModelNames[kModels] = {"pretrained", "online-only", "pretrained+online",
                                          "random"};

struct Metrics {
  double spearman = 0;
  double top1 = 0;
  double top5 = 0;
  double pick = 0;  // measured time of the top pick / best time of the evaluation set
};

struct WorkloadRow {
  std::string name;
  int64_t records = 0;
  int64_t eval = 0;
  Metrics m[kModels];
  double warm_weight = 0;  // the pretrained+online model's added-tree weight
  int warm_rounds = 0;     // and its added rounds
};

std::string Fixed(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

double Median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A model's metrics on the evaluation set. A constant prediction (an untrained model) has no
// ranking: Spearman 0.
Metrics Score(const std::vector<double>& predicted, const std::vector<double>& throughput,
              const std::vector<double>& ms) {
  Metrics m;
  absl::StatusOr<double> rho = costmodel::SpearmanCorrelation(predicted, throughput);
  m.spearman = rho.ok() ? *rho : 0.0;
  m.top1 = *costmodel::TopKRecall(predicted, throughput, 1);
  m.top5 = *costmodel::TopKRecall(predicted, throughput, 5);
  const size_t pick = std::max_element(predicted.begin(), predicted.end()) - predicted.begin();
  m.pick = ms[pick] / *std::min_element(ms.begin(), ms.end());
  return m;
}

// Trains a model of `xo` on `samples`; with `init` (a saved model file), warm-started from it.
absl::StatusOr<std::unique_ptr<costmodel::XGBoostModel>> TrainModel(
    const costmodel::XGBoostOptions& xo, const std::vector<costmodel::TrainingSample>& samples,
    const std::string& init, const Target& target) {
  auto model = std::make_unique<costmodel::XGBoostModel>(xo);
  if (!init.empty()) RETURN_IF_ERROR(model->SetInitialModel(init, target));
  RETURN_IF_ERROR(model->Update(samples));
  return model;
}

// The pretrained model of held-out task `h` (trained on every other task) saved at a path: in
// --pretrained-cache under a name that hashes what it was trained on and how, trained only when
// absent; else at `scratch`.
absl::StatusOr<std::string> PretrainedModel(const EvalModelOptions& o,
                                            const costmodel::XGBoostOptions& xo,
                                            const search::TrainingData& data, size_t h,
                                            const std::string& scratch) {
  std::string path = scratch;
  if (!o.pretrained_cache.empty()) {
    const std::string key = absl::StrCat(
        data.tasks[h].workload.ToString(), "|", data.target.ToString(), "|", data.records, "|",
        data.tasks.size(), "|", o.data.objective, "|", xo.max_depth, "|", xo.max_rounds, "|",
        xo.seed, "|", o.data.max_records_per_task, "|", costmodel::kFeatureVersion);
    std::filesystem::create_directories(o.pretrained_cache);
    path = (std::filesystem::path(o.pretrained_cache) /
            absl::StrCat("pretrained-", absl::Hex(ir::Fnv1a64(key), absl::kZeroPad16), ".model"))
               .string();
    if (std::filesystem::exists(path)) return path;
  }
  std::vector<costmodel::TrainingSample> others;
  for (size_t t = 0; t < data.tasks.size(); ++t) {
    if (t == h) continue;
    others.insert(others.end(), data.tasks[t].samples.begin(), data.tasks[t].samples.end());
  }
  ASSIGN_OR_RETURN(auto pretrained, TrainModel(xo, others, "", data.target));
  pretrained->set_info({costmodel::ModelTargetName(data.target), "{}"});
  // Written under another name first: an interrupted run leaves no partial file in the cache.
  RETURN_IF_ERROR(pretrained->Save(path + ".tmp"));
  std::filesystem::rename(path + ".tmp", path);
  return path;
}

// How many of held-out `task`'s records are considered: its first ones, up to
// --max-eval-records-per-task.
size_t EvalLimit(const EvalModelOptions& o, const search::TaskRecords& task) {
  return o.max_eval_records > 0 ? std::min<size_t>(task.samples.size(), o.max_eval_records)
                                : task.samples.size();
}

// The valid records of `task` after its first `n_online` and before `limit` (the evaluation set).
struct EvalSet {
  std::vector<costmodel::ProgramFeatures> programs;
  std::vector<double> throughput, ms;
};

EvalSet EvalRecords(const search::TaskRecords& task, size_t n_online, size_t limit) {
  EvalSet e;
  for (size_t i = n_online; i < limit; ++i) {
    const costmodel::TrainingSample& s = task.samples[i];
    if (s.throughput <= 0 || s.features.stores.empty()) continue;
    e.programs.push_back(s.features);
    e.throughput.push_back(s.throughput);
    e.ms.push_back(task.median_ms[i]);
  }
  return e;
}

// Whether `name` contains one of `texts`.
bool ContainsAny(const std::string& name, const std::vector<std::string>& texts) {
  return std::any_of(texts.begin(), texts.end(),
                     [&](const std::string& text) { return name.find(text) != std::string::npos; });
}

// Whether held-out task `h` is evaluated: chosen by --holdout and with enough valid records
// after the online ones at every count.
bool Evaluated(const EvalModelOptions& o, const search::TaskRecords& task) {
  if (!o.holdout.empty() && !ContainsAny(task.workload.ToString(), o.holdout)) return false;
  return std::any_of(o.online_records.begin(), o.online_records.end(), [&](int n) {
    const size_t limit = EvalLimit(o, task);
    const size_t n_online = std::min<size_t>(n, limit);
    return static_cast<int>(EvalRecords(task, n_online, limit).programs.size()) >=
           o.min_eval_records;
  });
}

// The pretrained+online model's options: the tuner's, with --warm-*.
absl::StatusOr<costmodel::XGBoostOptions> WarmOptions(const EvalModelOptions& o) {
  costmodel::XGBoostOptions x = costmodel::OnlineModelOptions(o.data.seed, o.data.threads);
  x.warm = o.warm;
  if (o.warm_objective == "rank") {
    x.warm.objective = costmodel::XGBoostObjective::kPairwiseRank;
  } else if (o.warm_objective == "regression") {
    x.warm.objective = costmodel::XGBoostObjective::kRegression;
  } else if (o.warm_objective != "initial") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--warm-objective must be initial, rank or regression, got '", o.warm_objective, "'"));
  }
  if (x.warm.folds == 1 || x.warm.folds < 0 || x.warm.max_rounds < 1 || x.warm.max_depth < 1 ||
      !(x.warm.eta > 0)) {
    return absl::InvalidArgumentError(
        "--warm-folds must be 0 or >= 2, --warm-rounds and --warm-depth >= 1, --warm-eta > 0");
  }
  return x;
}

// Evaluates held-out task `h` with its first `n` records online; false when it has too few
// valid records after them.
absl::StatusOr<bool> EvaluateTask(const EvalModelOptions& o, const costmodel::XGBoostOptions& xo,
                                  const search::TrainingData& data, size_t h, int n,
                                  const std::string& pretrained_path, WorkloadRow* row) {
  const search::TaskRecords& task = data.tasks[h];
  const size_t limit = EvalLimit(o, task);
  const size_t n_online = std::min<size_t>(n, limit);
  const EvalSet eval = EvalRecords(task, n_online, limit);
  if (static_cast<int>(eval.programs.size()) < o.min_eval_records) return false;
  row->name = task.workload.ToString();
  row->records = static_cast<int64_t>(limit);
  row->eval = static_cast<int64_t>(eval.programs.size());
  const std::vector<costmodel::TrainingSample> online(task.samples.begin(),
                                                      task.samples.begin() + n_online);
  costmodel::XGBoostModel pretrained(xo);
  RETURN_IF_ERROR(pretrained.LoadForTarget(pretrained_path, data.target));
  ASSIGN_OR_RETURN(auto online_only, TrainModel(xo, online, "", data.target));
  ASSIGN_OR_RETURN(const costmodel::XGBoostOptions xw, WarmOptions(o));
  ASSIGN_OR_RETURN(auto warm, TrainModel(xw, online, pretrained_path, data.target));
  row->warm_weight = warm->last_report().added_weight;
  row->warm_rounds = std::max(0, warm->last_report().rounds - warm->initial_rounds());
  costmodel::RandomModel random(o.data.seed);
  costmodel::CostModel* models[kModels] = {&pretrained, online_only.get(), warm.get(), &random};
  for (int k = 0; k < kModels; ++k) {
    ASSIGN_OR_RETURN(std::vector<double> predicted, models[k]->Predict(eval.programs));
    row->m[k] = Score(predicted, eval.throughput, eval.ms);
  }
  return true;
}

// The medians over `rows`, one line per model.
void Summary(const std::vector<WorkloadRow>& rows, std::ostringstream& out) {
  out << "| model | Spearman | top-1 recall | top-5 recall | top pick / best "
         "|\n|---|---|---|---|---|"
      << "\n";
  for (int k = 0; k < kModels; ++k) {
    std::vector<double> rho, t1, t5, pick;
    for (const WorkloadRow& r : rows) {
      rho.push_back(r.m[k].spearman);
      t1.push_back(r.m[k].top1);
      t5.push_back(r.m[k].top5);
      pick.push_back(r.m[k].pick);
    }
    out << "| " << kModelNames[k] << " | " << Fixed(Median(rho), 3) << " | " << Fixed(Median(t1), 3)
        << " | " << Fixed(Median(t5), 3) << " | " << Fixed(Median(pick), 3) << " |\n";
  }
}

std::string Table(const EvalModelOptions& o, const search::TrainingData& data, int n,
                  const std::vector<WorkloadRow>& rows) {
  std::ostringstream out;
  out << "Summary (median over " << rows.size() << " held-out workloads; " << data.target.ToString()
      << ", objective " << o.data.objective << ", online records " << n << "):\n\n";
  Summary(rows, out);
  if (!o.summary_holdout.empty()) {
    std::vector<WorkloadRow> some;
    for (const WorkloadRow& r : rows) {
      if (ContainsAny(r.name, o.summary_holdout)) some.push_back(r);
    }
    out << "\nSummary over the " << some.size() << " of them whose name contains '"
        << absl::StrJoin(o.summary_holdout, "' or '") << "' (online records " << n << "):\n\n";
    Summary(some, out);
  }
  out << "\nPer workload (models: pre = pretrained, onl = online-only, warm = pretrained+online, "
         "rnd = random; warm w / r: the weight and rounds of the trees the warm start "
         "added):\n\n| workload | records | eval | Spearman pre / onl / warm / rnd | top-5 "
         "pre / onl / warm / rnd | pick/best pre / onl / warm / rnd | warm w / r "
         "|\n|---|---|---|---|---|---|---|\n";
  for (const WorkloadRow& r : rows) {
    std::vector<std::string> rho, t5, pick;
    for (int k = 0; k < kModels; ++k) {
      rho.push_back(Fixed(r.m[k].spearman, 2));
      t5.push_back(Fixed(r.m[k].top5, 2));
      pick.push_back(Fixed(r.m[k].pick, 2));
    }
    out << "| " << r.name << " | " << r.records << " | " << r.eval << " | "
        << absl::StrJoin(rho, " / ") << " | " << absl::StrJoin(t5, " / ") << " | "
        << absl::StrJoin(pick, " / ") << " | " << Fixed(r.warm_weight, 2) << " / " << r.warm_rounds
        << " |\n";
  }
  return out.str();
}

absl::Status RunEvalModel(const EvalModelOptions& o) {
  if (o.online_records.empty() || o.min_eval_records < 2 ||
      *std::min_element(o.online_records.begin(), o.online_records.end()) < 1) {
    return absl::InvalidArgumentError("--online-records must be >= 1 and --min-eval-records >= 2");
  }
  if (o.max_eval_records < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-eval-records-per-task must be >= 0 (0 = as --max-records-per-task), got ",
        o.max_eval_records));
  }
  ASSIGN_OR_RETURN(costmodel::XGBoostOptions xo, XGBoostOptionsOf(o.data));
  RETURN_IF_ERROR(WarmOptions(o).status());
  ASSIGN_OR_RETURN(search::TrainingData data, LoadModelData(o.data));
  if (data.tasks.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("leave-one-workload-out needs records of at least 2 workloads; the logs hold ",
                     data.tasks.size()));
  }
  const std::string scratch =
      (std::filesystem::temp_directory_path() / absl::StrCat("tilesearch_eval_", ::getpid()))
          .string();
  std::vector<std::vector<WorkloadRow>> rows(o.online_records.size());
  absl::Status status;
  for (size_t h = 0; h < data.tasks.size() && status.ok(); ++h) {
    if (!Evaluated(o, data.tasks[h])) continue;
    absl::StatusOr<std::string> pretrained = PretrainedModel(o, xo, data, h, scratch);
    if (!pretrained.ok()) {
      status = pretrained.status();
      break;
    }
    for (size_t c = 0; c < o.online_records.size() && status.ok(); ++c) {
      WorkloadRow row;
      absl::StatusOr<bool> used =
          EvaluateTask(o, xo, data, h, o.online_records[c], *pretrained, &row);
      if (!used.ok()) status = used.status();
      if (!used.ok() || !*used) continue;
      std::cerr << "eval-model: " << o.online_records[c] << " online: " << rows[c].size() + 1
                << ": " << row.name << " (" << row.eval << " evaluated)\n";
      rows[c].push_back(std::move(row));
    }
  }
  std::filesystem::remove(scratch);
  RETURN_IF_ERROR(status);
  std::string tables;
  for (size_t c = 0; c < o.online_records.size(); ++c) {
    if (rows[c].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no workload has --online-records + --min-eval-records (", o.online_records[c], " + ",
          o.min_eval_records, ") records with valid measurements to evaluate"));
    }
    tables += absl::StrCat(c == 0 ? "" : "\n", Table(o, data, o.online_records[c], rows[c]));
  }
  std::cout << tables;
  if (!o.out.empty()) {
    std::ofstream f(o.out, std::ios::trunc);
    f << "# eval-model: leave-one-workload-out\n\nCommand: `" << o.command_line
      << "`\n\nDate: " << search::CurrentTimestamp() << "; logs: " << data.logs.size() << " files, "
      << data.tasks.size() << " workloads, " << data.records << " records\n\n"
      << tables;
    if (!f) return absl::InternalError(absl::StrCat("cannot write '", o.out, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

CommandAction AddEvalModelCommand(CLI::App& app) {
  auto o = std::make_shared<EvalModelOptions>();
  AddModelDataOptions(app, o->data);
  app.add_option("--online-records", o->online_records,
                 "records of the held-out workload the online models train on (its first ones); "
                 "repeatable: one table per count")
      ->default_val(std::vector<int>{16});
  app.add_option("--min-eval-records", o->min_eval_records,
                 "evaluate a workload only with at least this many valid records after those")
      ->default_val(8);
  app.add_option("--max-eval-records-per-task", o->max_eval_records,
                 "consider at most this many records of each held-out workload, the first ones "
                 "(0 = as --max-records-per-task, which then caps only the training workloads "
                 "when this is smaller)")
      ->default_val(0);
  app.add_option("--holdout", o->holdout,
                 "hold out only workloads whose name (as `inspect` prints it) contains this text "
                 "(repeatable; default: every workload with enough records)");
  app.add_option("--summary-holdout", o->summary_holdout,
                 "also summarize the evaluated workloads whose name contains this text "
                 "(repeatable)");
  app.add_option("--pretrained-cache", o->pretrained_cache,
                 "keep each held-out workload's pretrained model in this directory and reuse it "
                 "when the logs and training options are the same");
  costmodel::XGBoostWarmStartOptions& w = o->warm;
  app.add_option("--warm-depth", w.max_depth, "depth of the trees the warm start adds")
      ->default_val(w.max_depth);
  app.add_option("--warm-eta", w.eta, "their learning rate")->default_val(w.eta);
  app.add_option("--warm-rounds", w.max_rounds, "at most this many added rounds")
      ->default_val(w.max_rounds);
  app.add_option("--warm-folds", w.folds,
                 "cross-validation folds choosing the added rounds and weight (0: one held-out "
                 "split, weight 1, no clipping)")
      ->default_val(w.folds);
  app.add_option("--warm-prior-records", w.prior_records,
                 "the added trees' weight is at most n / (n + this) for n records")
      ->default_val(w.prior_records);
  app.add_option("--warm-clip", w.clip, "clip the added trees to their range on the records")
      ->default_val(w.clip);
  app.add_option("--warm-band", w.band,
                 "reorder only programs whose pretrained scores lie among the records'")
      ->default_val(w.band);
  app.add_option("--warm-min-gain", w.min_gain,
                 "a weight above 0 must beat the pretrained model's cross-validated pairwise "
                 "accuracy by this / sqrt(valid records)")
      ->default_val(w.min_gain);
  app.add_option("--warm-objective", o->warm_objective,
                 "the added trees' objective: initial (the pretrained model's), rank, regression")
      ->default_val("initial");
  app.add_option("--out", o->out, "also write the tables as Markdown to this file");
  return [o]() {
    // The command as run, for the Markdown file (every option, defaults included).
    o->command_line = absl::StrCat(
        "tilesearch eval-model --logs ", absl::StrJoin(o->data.logs, " "),
        o->data.target.empty() ? "" : absl::StrCat(" --target '", o->data.target, "'"),
        " --objective ", o->data.objective, " --online-records ",
        absl::StrJoin(o->online_records, " --online-records "), " --min-eval-records ",
        o->min_eval_records,
        o->holdout.empty()
            ? ""
            : absl::StrCat(" --holdout '", absl::StrJoin(o->holdout, "' --holdout '"), "'"),
        o->summary_holdout.empty()
            ? ""
            : absl::StrCat(" --summary-holdout '",
                           absl::StrJoin(o->summary_holdout, "' --summary-holdout '"), "'"),
        " --max-records-per-task ", o->data.max_records_per_task,
        o->max_eval_records > 0 ? absl::StrCat(" --max-eval-records-per-task ", o->max_eval_records)
                                : std::string(),
        " --max-rounds ", o->data.max_rounds, " --max-depth ", o->data.max_depth, " --seed ",
        o->data.seed, " --warm-depth ", o->warm.max_depth, " --warm-eta ", o->warm.eta,
        " --warm-rounds ", o->warm.max_rounds, " --warm-folds ", o->warm.folds,
        " --warm-prior-records ", o->warm.prior_records, " --warm-clip ", o->warm.clip ? 1 : 0,
        " --warm-band ", o->warm.band ? 1 : 0, " --warm-min-gain ", o->warm.min_gain,
        " --warm-objective ", o->warm_objective);
    return RunEvalModel(*o);
  };
}

}  // namespace tilesearch::tools
