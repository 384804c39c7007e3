// Measure records for the log and replay tests: a square matmul workload, its key as the DAG
// computes it, a timed record of it, and reading a file back as text.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "schedule/schedule_file.h"
#include "search/measure_record.h"

namespace tilesearch::search::testing {

/// The whole file at `path` (empty where it cannot be read).
inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// matmul of [n, n] by [n, n].
inline schedule::Workload Matmul(int64_t n) {
  schedule::Workload w;
  w.op = "matmul";
  w.args.shapes = {{n, n}, {n, n}};
  return w;
}

/// The key of the workload as this build computes it (independent of the code under test: the
/// DAG's own hash); "" with a failed expectation where the workload does not build.
inline std::string KeyOf(const schedule::Workload& w) {
  absl::StatusOr<ir::ComputeDAG> dag = w.Build();
  EXPECT_TRUE(dag.ok()) << dag.status();
  return dag.ok() ? dag->WorkloadKey() : "";
}

/// A successful record of `workload` on `target` claiming `key`: one timed run of `median_ms`
/// (ms), trial `trial`, a fixed timestamp, no steps.
inline MeasureRecord TimedRecord(const schedule::Workload& workload, const std::string& key,
                                 const Target& target, int64_t trial, double median_ms) {
  MeasureRecord r;
  r.workload = workload;
  r.workload_key = key;
  r.target = target;
  r.result.costs_s = {median_ms * 1e-3};
  r.result.timing.runs = 1;
  r.result.timing.median_ms = median_ms;
  r.timestamp = "2025-11-30T00:00:00.000Z";
  r.trial = trial;
  return r;
}

}  // namespace tilesearch::search::testing
