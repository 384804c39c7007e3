// TuneOptions for the search tests' small cpu tuning runs: the RandomModel (no XGBoost training),
// a population of 16 evolved for 1 generation, one quick timed run per candidate on one host
// thread, no progress lines. Callers set what their test is about (local search, budgets).
#pragma once

#include <cstdint>
#include <string>

#include "ir/type.h"
#include "schedule/schedule_file.h"
#include "search/tuner.h"

namespace tilesearch::search::testing {

inline TuneOptions TinyCpuTuneOptions(const std::string& log, int64_t trials, int per_round,
                                      uint64_t seed) {
  TuneOptions o;
  o.trials = trials;
  o.per_round = per_round;
  o.log_path = log;
  o.seed = seed;
  o.use_xgboost = false;
  o.search.population = 16;
  o.search.generations = 1;
  o.search.init_min_population = 8;
  o.measure.timing.min_runs = 1;
  o.measure.timing.min_total_ms = 0;
  o.measure.timing.warmup_runs = 0;
  if (o.measure.timing.max_runs < 1) o.measure.timing.max_runs = 1;
  o.measure.host_threads = 1;
  o.model_threads = 1;
  o.quiet = true;
  return o;
}

/// The workload matmul n×n · n×n float32.
inline schedule::Workload SquareMatmul(int64_t n) {
  schedule::Workload w;
  w.op = "matmul";
  w.args.shapes = {{n, n}, {n, n}};
  w.args.dtype = ir::ScalarType::kFloat32;
  return w;
}

}  // namespace tilesearch::search::testing
