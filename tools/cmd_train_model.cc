// `tilesearch train-model`: a cost model pretrained on the tuning logs of many workloads (TenSet's
// pretraining; labels normalized per task), saved with its target and provenance.
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "costmodel/xgboost_model.h"
#include "nlohmann/json.hpp"
#include "search/measure_record.h"
#include "tools/commands.h"
#include "tools/model_options.h"

namespace tilesearch::tools {
namespace {

struct TrainModelOptions {
  ModelDataOptions data;
  std::string out;
  std::string commit;  // provenance: the commit the logs and the build come from
  bool quiet = false;
};

std::string ProvenanceOf(const TrainModelOptions& o, const search::TrainingData& data) {
  // Each log named relative to the --logs directory it was found in (a file given: its name).
  nlohmann::json logs = nlohmann::json::array();
  for (const std::string& l : data.logs) {
    std::string name = std::filesystem::path(l).filename();
    for (const std::string& given : o.data.logs) {
      std::error_code ec;
      const std::string prefix = (std::filesystem::path(given) / "").string();
      if (std::filesystem::is_directory(given, ec) && l.rfind(prefix, 0) == 0) {
        name = l.substr(prefix.size());
      }
    }
    logs.push_back(name);
  }
  nlohmann::json p = {{"logs", logs},
                      {"records", data.records},
                      {"tasks", data.tasks.size()},
                      {"records_without_features", data.without_features},
                      {"duplicates_dropped", data.duplicates},
                      {"capped_dropped", data.capped},
                      {"max_records_per_task", o.data.max_records_per_task},
                      {"objective", o.data.objective},
                      {"seed", o.data.seed},
                      {"date", search::CurrentTimestamp()},
                      {"tilesearch_version", search::kTilesearchVersion}};
  if (!o.commit.empty()) p["commit"] = o.commit;
  return p.dump();
}

absl::Status RunTrainModel(const TrainModelOptions& o) {
  ASSIGN_OR_RETURN(costmodel::XGBoostOptions xo, XGBoostOptionsOf(o.data));
  ASSIGN_OR_RETURN(search::TrainingData data, LoadModelData(o.data));
  std::vector<costmodel::TrainingSample> samples;
  for (search::TaskRecords& t : data.tasks) {
    for (costmodel::TrainingSample& s : t.samples) samples.push_back(std::move(s));
  }
  if (!o.quiet) {
    std::cout << "logs: " << data.logs.size() << " (" << data.warnings.size()
              << " skipped lines)\ntarget: " << data.target.ToString()
              << "\ntasks: " << data.tasks.size() << "\nrecords: " << data.records << " ("
              << data.without_features << " without features, " << data.duplicates
              << " duplicates and " << data.capped << " past the per-task cap dropped)\n";
  }
  costmodel::XGBoostModel model(xo);
  RETURN_IF_ERROR(model.Update(samples));
  if (!model.trained()) {
    return absl::InvalidArgumentError(
        "no valid record with features in the logs: nothing to learn");
  }
  model.set_info({costmodel::ModelTargetName(data.target), ProvenanceOf(o, data)});
  RETURN_IF_ERROR(model.Save(o.out));
  const costmodel::XGBoostTrainingReport& r = model.last_report();
  std::cout << "model: " << o.out << " (" << costmodel::ModelTargetName(data.target) << ", "
            << o.data.objective << ", " << r.rounds << " trees, " << r.num_programs
            << " programs; held-out pairwise accuracy " << r.validation_pairwise_accuracy << ")\n";
  return absl::OkStatus();
}

}  // namespace

CommandAction AddTrainModelCommand(CLI::App& app) {
  auto o = std::make_shared<TrainModelOptions>();
  AddModelDataOptions(app, o->data);
  app.add_option("--out", o->out, "the model file to write")->required();
  app.add_option("--commit", o->commit, "recorded in the provenance (e.g. git rev-parse HEAD)");
  app.add_flag("--quiet", o->quiet, "print only the model line");
  return [o]() { return RunTrainModel(*o); };
}

}  // namespace tilesearch::tools
