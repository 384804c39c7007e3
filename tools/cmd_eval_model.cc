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
#include "costmodel/xgboost_model.h"
#include "search/measure_record.h"
#include "tools/commands.h"
#include "tools/model_options.h"

namespace tilesearch::tools {
namespace {

struct EvalModelOptions {
  ModelDataOptions data;
  int online_records = 16;
  int min_eval_records = 8;
  std::vector<std::string> holdout;  // --holdout TEXT: only workloads whose name contains one
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

// Evaluates held-out task `h`; false when it has too few records.
absl::StatusOr<bool> EvaluateTask(const EvalModelOptions& o, const costmodel::XGBoostOptions& xo,
                                  const search::TrainingData& data, size_t h,
                                  const std::string& scratch, WorkloadRow* row) {
  const search::TaskRecords& task = data.tasks[h];
  const size_t n_online = std::min<size_t>(o.online_records, task.samples.size());
  std::vector<costmodel::ProgramFeatures> eval;
  std::vector<double> throughput, ms;
  for (size_t i = n_online; i < task.samples.size(); ++i) {
    const costmodel::TrainingSample& s = task.samples[i];
    if (s.throughput <= 0 || s.features.stores.empty()) continue;
    eval.push_back(s.features);
    throughput.push_back(s.throughput);
    ms.push_back(task.median_ms[i]);
  }
  if (static_cast<int>(eval.size()) < o.min_eval_records) return false;
  row->name = task.workload.ToString();
  const bool chosen = o.holdout.empty() ||
                      std::any_of(o.holdout.begin(), o.holdout.end(), [&](const std::string& text) {
                        return row->name.find(text) != std::string::npos;
                      });
  if (!chosen) return false;
  row->records = static_cast<int64_t>(task.samples.size());
  row->eval = static_cast<int64_t>(eval.size());
  std::vector<costmodel::TrainingSample> others;
  for (size_t t = 0; t < data.tasks.size(); ++t) {
    if (t == h) continue;
    others.insert(others.end(), data.tasks[t].samples.begin(), data.tasks[t].samples.end());
  }
  const std::vector<costmodel::TrainingSample> online(task.samples.begin(),
                                                      task.samples.begin() + n_online);
  ASSIGN_OR_RETURN(auto pretrained, TrainModel(xo, others, "", data.target));
  pretrained->set_info({costmodel::ModelTargetName(data.target), "{}"});
  RETURN_IF_ERROR(pretrained->Save(scratch));
  ASSIGN_OR_RETURN(auto online_only, TrainModel(xo, online, "", data.target));
  ASSIGN_OR_RETURN(auto warm, TrainModel(xo, online, scratch, data.target));
  costmodel::RandomModel random(o.data.seed);
  costmodel::CostModel* models[kModels] = {pretrained.get(), online_only.get(), warm.get(),
                                           &random};
  for (int k = 0; k < kModels; ++k) {
    ASSIGN_OR_RETURN(std::vector<double> predicted, models[k]->Predict(eval));
    row->m[k] = Score(predicted, throughput, ms);
  }
  return true;
}

std::string Table(const EvalModelOptions& o, const search::TrainingData& data,
                  const std::vector<WorkloadRow>& rows) {
  std::ostringstream out;
  out << "Summary (median over " << rows.size() << " held-out workloads; " << data.target.ToString()
      << ", objective " << o.data.objective << ", online records " << o.online_records << "):\n\n"
      << "| model | Spearman | top-1 recall | top-5 recall | top pick / best "
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
  out << "\nPer workload (models: pre = pretrained, onl = online-only, warm = pretrained+online, "
         "rnd = random):\n\n| workload | records | eval | Spearman pre / onl / warm / rnd | top-5 "
         "pre / onl / warm / rnd | pick/best pre / onl / warm / rnd |\n|---|---|---|---|---|---|\n";
  for (const WorkloadRow& r : rows) {
    std::vector<std::string> rho, t5, pick;
    for (int k = 0; k < kModels; ++k) {
      rho.push_back(Fixed(r.m[k].spearman, 2));
      t5.push_back(Fixed(r.m[k].top5, 2));
      pick.push_back(Fixed(r.m[k].pick, 2));
    }
    out << "| " << r.name << " | " << r.records << " | " << r.eval << " | "
        << absl::StrJoin(rho, " / ") << " | " << absl::StrJoin(t5, " / ") << " | "
        << absl::StrJoin(pick, " / ") << " |\n";
  }
  return out.str();
}

absl::Status RunEvalModel(const EvalModelOptions& o) {
  if (o.online_records < 1 || o.min_eval_records < 2) {
    return absl::InvalidArgumentError("--online-records must be >= 1 and --min-eval-records >= 2");
  }
  ASSIGN_OR_RETURN(costmodel::XGBoostOptions xo, XGBoostOptionsOf(o.data));
  ASSIGN_OR_RETURN(search::TrainingData data, LoadModelData(o.data));
  if (data.tasks.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("leave-one-workload-out needs records of at least 2 workloads; the logs hold ",
                     data.tasks.size()));
  }
  const std::string scratch =
      (std::filesystem::temp_directory_path() / absl::StrCat("tilesearch_eval_", ::getpid()))
          .string();
  std::vector<WorkloadRow> rows;
  for (size_t h = 0; h < data.tasks.size(); ++h) {
    WorkloadRow row;
    absl::StatusOr<bool> used = EvaluateTask(o, xo, data, h, scratch, &row);
    if (!used.ok()) {
      std::filesystem::remove(scratch);
      return used.status();
    }
    if (*used) {
      std::cerr << "eval-model: " << rows.size() + 1 << ": " << row.name << " (" << row.eval
                << " evaluated)\n";
      rows.push_back(std::move(row));
    }
  }
  std::filesystem::remove(scratch);
  if (rows.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no workload has --online-records + --min-eval-records (", o.online_records,
                     " + ", o.min_eval_records, ") records with valid measurements to evaluate"));
  }
  const std::string table = Table(o, data, rows);
  std::cout << table;
  if (!o.out.empty()) {
    std::ofstream f(o.out, std::ios::trunc);
    f << "# eval-model: leave-one-workload-out\n\nCommand: `" << o.command_line
      << "`\n\nDate: " << search::CurrentTimestamp() << "; logs: " << data.logs.size() << " files, "
      << data.tasks.size() << " workloads, " << data.records << " records\n\n"
      << table;
    if (!f) return absl::InternalError(absl::StrCat("cannot write '", o.out, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

CommandAction AddEvalModelCommand(CLI::App& app) {
  auto o = std::make_shared<EvalModelOptions>();
  AddModelDataOptions(app, o->data);
  app.add_option("--online-records", o->online_records,
                 "records of the held-out workload the online models train on (its first ones)")
      ->default_val(16);
  app.add_option("--min-eval-records", o->min_eval_records,
                 "evaluate a workload only with at least this many valid records after those")
      ->default_val(8);
  app.add_option("--holdout", o->holdout,
                 "hold out only workloads whose name (as `inspect` prints it) contains this text "
                 "(repeatable; default: every workload with enough records)");
  app.add_option("--out", o->out, "also write the tables as Markdown to this file");
  return [o]() {
    // The command as run, for the Markdown file (every option, defaults included).
    o->command_line = absl::StrCat(
        "tilesearch eval-model --logs ", absl::StrJoin(o->data.logs, " "),
        o->data.target.empty() ? "" : absl::StrCat(" --target '", o->data.target, "'"),
        " --objective ", o->data.objective, " --online-records ", o->online_records,
        " --min-eval-records ", o->min_eval_records,
        o->holdout.empty()
            ? ""
            : absl::StrCat(" --holdout '", absl::StrJoin(o->holdout, "' --holdout '"), "'"),
        " --max-records-per-task ", o->data.max_records_per_task, " --max-rounds ",
        o->data.max_rounds, " --max-depth ", o->data.max_depth, " --seed ", o->data.seed);
    return RunEvalModel(*o);
  };
}

}  // namespace tilesearch::tools
