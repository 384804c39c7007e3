// `tilesearch export-dispatch`: kernels for a family of shapes that differ in one dimension (e.g.
// a matmul's M for a serving system's batch sizes), one per bucket, with a C dispatch header that
// maps a runtime extent to its bucket. Each bucket's kernel is its workload's best logged record,
// or, for a shape never tuned, a schedule predicted without measuring (search/predict.h); every
// kernel is rebuilt and checked before anything is written.
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "base/write_file.h"
#include "costmodel/xgboost_model.h"
#include "ir/compute_dag.h"
#include "nlohmann/json.hpp"
#include "schedule/schedule_file.h"
#include "search/api.h"
#include "search/replay.h"
#include "tools/commands.h"
#include "tools/model_options.h"
#include "tools/workload_options.h"

namespace tilesearch::tools {
namespace {

struct DispatchOptions {
  WorkloadOptions workload;  // op / shapes / attrs / dtype / target
  std::string log;
  std::string model;
  int input = 0;                // the input whose dimension varies
  int dim = 0;                  // that dimension
  std::vector<int64_t> values;  // the bucket extents
  std::string out;
  std::string name;
};

// One bucket: its extent, artifact, where the schedule came from and the check.
struct Bucket {
  int64_t extent = 0;
  search::KernelArtifact artifact;
  std::string source;
  search::CheckOutcome check;
};

absl::Status ValidateDispatch(DispatchOptions& o, const ir::OpArgs& args) {
  if (o.input < 0 || o.input >= static_cast<int>(args.shapes.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input ", o.input, ": the workload has ", args.shapes.size(), " inputs"));
  }
  const auto& shape = args.shapes[o.input];
  if (o.dim < 0 || o.dim >= static_cast<int>(shape.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dim ", o.dim, ": input ", o.input, " has rank ", shape.size()));
  }
  std::sort(o.values.begin(), o.values.end());
  o.values.erase(std::unique(o.values.begin(), o.values.end()), o.values.end());
  if (o.values.empty() || o.values.front() < 1) {
    return absl::InvalidArgumentError("--values: give one or more extents >= 1");
  }
  RETURN_IF_ERROR(search::ValidateArtifactName(o.name));
  return search::ValidateArtifactDir(o.out);
}

// Refuses a varied dimension that some stage reduces over (softmax's row, a matmul's k): a padded
// input would then change every result, not only add ignored ones. Compares the reduce extents of
// every stage at the smallest and the largest bucket.
absl::Status CheckPaddable(const DispatchOptions& o, schedule::Workload workload) {
  std::vector<ir::ComputeDAG> dags;
  for (int64_t extent : {o.values.front(), o.values.back()}) {
    workload.args.shapes[o.input][o.dim] = extent;
    absl::StatusOr<ir::ComputeDAG> dag = workload.Build();
    if (!dag.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--values ", extent, ": workload ", workload.ToString(), ": ", dag.status().message()));
    }
    dags.push_back(*std::move(dag));
  }
  if (dags[0].num_stages() != dags[1].num_stages()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--input ", o.input, " --dim ", o.dim, ": the workload's stages change with the extent"));
  }
  for (int id = 0; id < dags[0].num_stages(); ++id) {
    const auto& a = dags[0].stage(id)->reduce_axes;
    const auto& b = dags[1].stage(id)->reduce_axes;
    for (size_t r = 0; r < a.size() && r < b.size(); ++r) {
      if (a[r].extent != b[r].extent) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--input ", o.input, " --dim ", o.dim, ": stage '", dags[0].stage(id).name(),
            "' reduces over it (reduce axis '", a[r].name, "' is ", a[r].extent, " at ",
            o.values.front(), " and ", b[r].extent, " at ", o.values.back(),
            "): padded inputs would change every result; vary a dimension the output keeps"));
      }
    }
  }
  return absl::OkStatus();
}

// The bucket of extent `extent`: its best record or a prediction, rebuilt and checked.
absl::StatusOr<Bucket> MakeBucket(const DispatchOptions& o, schedule::Workload workload,
                                  const Target& target, int64_t extent,
                                  costmodel::CostModel* model) {
  workload.args.shapes[o.input][o.dim] = extent;
  ASSIGN_OR_RETURN(Task task, Task::FromWorkload(workload, target));
  ASSIGN_OR_RETURN(HistoryBest best, ApplyHistoryBestOrPredict(o.log, task, model));
  Bucket b;
  b.extent = extent;
  b.source = best.predicted ? absl::StrCat("predicted: ", best.prediction)
                            : absl::StrCat("record: trial ", best.record.trial, " (",
                                           best.record.median_ms(), " ms)");
  search::BuildOptions build;
  build.name = absl::StrCat(o.name, "_", extent);
  ASSIGN_OR_RETURN(b.artifact, search::BuildKernel(best, build));
  ASSIGN_OR_RETURN(b.check, search::CheckKernel(b.artifact));
  return b;
}

std::string DispatchHeader(const DispatchOptions& o, const std::vector<Bucket>& buckets) {
  std::string upper = o.name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::vector<std::string> includes, extents;
  for (const Bucket& b : buckets) {
    includes.push_back(absl::StrCat("#include \"", b.artifact.name, ".h\""));
    extents.push_back(absl::StrCat(b.extent));
  }
  return absl::StrCat(
      "// Dispatch of ", buckets.front().artifact.record.workload.op, " over input ", o.input,
      " dimension ", o.dim, ": buckets ", absl::StrJoin(extents, ", "),
      " (tilesearch export-dispatch).\n// Bucket i's kernel is compiled for extent ", o.name,
      "_extents[i]: pad the input's varied dimension to\n// it (the results past the real "
      "extent are computed and ignored; no stage reduces over it).\n",
      "#pragma once\n#include <stdint.h>\n", absl::StrJoin(includes, "\n"), "\n\n#define ", upper,
      "_NUM_BUCKETS ", buckets.size(), "\nstatic const int64_t ", o.name, "_extents[] = {",
      absl::StrJoin(extents, ", "), "};\n\n",
      "// The bucket whose kernel handles `extent` (the smallest bucket extent >= it); -1 when it\n"
      "// is larger than every bucket.\nstatic inline int ",
      o.name, "_bucket(int64_t extent) {\n  for (int i = 0; i < ", upper,
      "_NUM_BUCKETS; ++i) {\n    if (extent <= ", o.name,
      "_extents[i]) return i;\n  }\n  return -1;\n}\n");
}

// The files of the dispatch (each bucket's artifacts and schedule file, the header, the manifest),
// written into a staging folder inside o.out and moved into o.out only once all of them were
// written, so a failure leaves o.out as it was. Returns the names of the files, in order.
absl::StatusOr<std::vector<std::string>> StageDispatch(const DispatchOptions& o,
                                                       const Target& target,
                                                       const std::vector<Bucket>& buckets,
                                                       const std::string& staging) {
  std::vector<std::string> names;
  auto add = [&](const std::string& path) {
    names.push_back(std::filesystem::path(path).filename().string());
  };
  nlohmann::json manifest = {{"name", o.name},
                             {"input", o.input},
                             {"dim", o.dim},
                             {"target", target.ToString()},
                             {"buckets", nlohmann::json::array()}};
  for (const Bucket& b : buckets) {
    ASSIGN_OR_RETURN(std::vector<std::string> written,
                     search::WriteArtifacts(b.artifact, staging, &b.check));
    for (const std::string& path : written) add(path);
    // The bucket's schedule as a schedule file, so that `tilesearch measure` can time it.
    schedule::ScheduleFile file;
    file.comment = absl::StrCat("export-dispatch ", o.name, " bucket ", b.extent, ": ", b.source);
    file.workload = b.artifact.record.workload;
    file.target = target;
    file.steps = b.artifact.record.steps;
    const std::string schedule = absl::StrCat(staging, "/", b.artifact.name, ".schedule.json");
    RETURN_IF_ERROR(WriteFile(schedule, file.ToText() + "\n"));
    add(schedule);
    manifest["buckets"].push_back({{"extent", b.extent},
                                   {"artifact", b.artifact.name},
                                   {"workload_key", b.artifact.record.workload_key},
                                   {"source", b.source},
                                   {"checked", b.check.checked},
                                   {"passed", b.check.passed}});
  }
  const std::string header = absl::StrCat(staging, "/", o.name, ".h");
  const std::string json = absl::StrCat(staging, "/", o.name, ".json");
  RETURN_IF_ERROR(WriteFile(header, DispatchHeader(o, buckets)));
  RETURN_IF_ERROR(WriteFile(json, manifest.dump(2) + "\n"));
  add(header);
  add(json);
  return names;
}

// StageDispatch into a fresh staging folder, then every file moved into o.out. Errors: the
// staging's (nothing is written then), a destination that is a directory (checked before moving
// anything), and a move that fails (the message says how many files were moved already).
absl::Status WriteDispatch(const DispatchOptions& o, const Target& target,
                           const std::vector<Bucket>& buckets) {
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create output directory '", o.out, "': ", ec.message()));
  }
  std::string staging = absl::StrCat(o.out, "/.", o.name, ".staging-XXXXXX");
  if (::mkdtemp(staging.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a staging folder in '", o.out, "': ", std::strerror(errno)));
  }
  struct RemoveStaging {
    std::string path;
    ~RemoveStaging() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } cleanup{staging};
  absl::StatusOr<std::vector<std::string>> names = StageDispatch(o, target, buckets, staging);
  if (!names.ok()) {
    return absl::Status(names.status().code(),
                        absl::StrCat(names.status().message(), "; nothing was written"));
  }
  for (const std::string& name : *names) {
    const std::string dest = absl::StrCat(o.out, "/", name);
    if (std::filesystem::is_directory(dest, ec)) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot write '", dest, "': it is a directory; nothing was written"));
    }
  }
  for (size_t i = 0; i < names->size(); ++i) {
    const std::string from = absl::StrCat(staging, "/", (*names)[i]);
    const std::string dest = absl::StrCat(o.out, "/", (*names)[i]);
    if (std::rename(from.c_str(), dest.c_str()) != 0) {
      return absl::InternalError(
          absl::StrCat("cannot move '", from, "' to '", dest, "': ", std::strerror(errno), " (", i,
                       " of ", names->size(), " files were moved into '", o.out, "')"));
    }
    std::cout << "wrote: " << dest << "\n";
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ExportDispatch(DispatchOptions o) {
  schedule::Workload workload;
  workload.op = o.workload.op;
  ASSIGN_OR_RETURN(workload.args, ParseOpArgs(o.workload));
  RETURN_IF_ERROR(ValidateDispatch(o, workload.args));
  RETURN_IF_ERROR(CheckPaddable(o, workload));
  ASSIGN_OR_RETURN(const Target target,
                   TargetFromString(o.workload.target.empty() ? "auto" : o.workload.target));
  ASSIGN_OR_RETURN(std::unique_ptr<costmodel::XGBoostModel> model, RankingModel(o.model, target));
  std::vector<Bucket> buckets;
  bool all_passed = true;
  for (int64_t extent : o.values) {
    ASSIGN_OR_RETURN(Bucket b, MakeBucket(o, workload, target, extent, model.get()));
    const bool ok = !b.check.checked || b.check.passed;
    all_passed = all_passed && ok;
    std::cout << "bucket " << extent << ": " << b.artifact.record.workload.ToString() << ", "
              << b.source << ", check: "
              << (!b.check.checked ? b.check.note
                  : b.check.passed ? "passed"
                                   : "FAILED: " + b.check.note)
              << "\n";
    buckets.push_back(std::move(b));
  }
  if (!all_passed) {
    std::cout << "a bucket's kernel failed its check: nothing written\n";
    return 1;
  }
  RETURN_IF_ERROR(WriteDispatch(o, target, buckets));
  return 0;
}

}  // namespace

ExitCodeAction AddExportDispatchCommand(CLI::App& app) {
  auto o = std::make_shared<DispatchOptions>();
  app.add_option("--op", o->workload.op, "operator name (see 'tilesearch ops')")->required();
  app.add_option("--shape", o->workload.shapes, "input shape of the family, once per input");
  app.add_option("--attr", o->workload.attrs, "operator attribute name=value");
  app.add_option("--dtype", o->workload.dtype, "element type (default float32)");
  app.add_option("--target", o->workload.target, "auto (default), cpu, cuda -arch=sm_XX");
  app.add_option("--log", o->log, "tuning log with the family's tuned shapes")->required();
  app.add_option("--model", o->model,
                 "cost model ranking predicted schedules (default: the target's shipped model; "
                 "none: the nearest shape's fastest record)");
  app.add_option("--input", o->input, "the input whose dimension varies (default 0)");
  app.add_option("--dim", o->dim, "the dimension of that input that varies (default 0)");
  app.add_option("--values", o->values, "the bucket extents, e.g. 1,8,64,512,4096,16384")
      ->delimiter(',')
      ->required();
  app.add_option("--out", o->out, "directory for the artifacts and the dispatch header")
      ->required();
  app.add_option("--name", o->name, "dispatch name, a C identifier (artifacts <name>_<extent>)")
      ->required();
  return [o]() { return ExportDispatch(*o); };
}

}  // namespace tilesearch::tools
