// Where a tuning round's candidates are built and measured. By default the tuner builds a round
// with its own measure::Builder and measures it with its own measure::Runner. A RoundMeasurer
// (TuneOptions::measurer) spreads each round over several processes instead: the MPI build's
// mpi::MpiRoundMeasurer hands every rank a share, each rank rebuilds its candidates from their
// steps, builds them and measures them on its own device with its own Builder and Runner (so the
// check, the timing and the isolation of faults are those of a single process), and the results
// come back to the tuner in candidate order. The tuner stays the one owner of the search, the
// cost model and the log, which reads as a single process's.
//
// A share travels as JSON (RoundShareToJson): the workload as the log writes it
// (schedule::WorkloadToJson), the target (TargetToRecordJson), the precision and each
// candidate's steps (schedule::StepsToJson); results as measure::MeasureResultToJson.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "measure/measure.h"
#include "measure/runner.h"
#include "nlohmann/json.hpp"
#include "schedule/schedule_file.h"
#include "schedule/step.h"
#include "search/measure_record.h"

namespace tilesearch::search {

/// Candidates of one round of one task, as another process needs them: the task (workload,
/// target, precision), each candidate's steps with its index in the round, and the round's build
/// and measure settings.
struct RoundShare {
  schedule::Workload workload;
  Target target;
  measure::Fp32Precision precision = measure::Fp32Precision::kIeee;
  /// The round's number in the log (messages only).
  int64_t round = 0;
  /// Indices into the round's candidates, parallel to `steps`.
  std::vector<int64_t> indices;
  std::vector<std::vector<schedule::Step>> steps;
  /// measure::MeasureOptions::screen_above_ms and screen_factor of the round (0: off).
  double screen_above_ms = 0;
  double screen_factor = 0;
  /// TuneOptions::compile_timeout_ms and unroll_budget (the GPU build's limits).
  double compile_timeout_ms = 3000;
  int64_t unroll_budget = 0;
};

/// The share as JSON and back. FromJson errors (kInvalidArgument) name the bad field.
nlohmann::json RoundShareToJson(const RoundShare& share);
absl::StatusOr<RoundShare> RoundShareFromJson(const nlohmann::json& j);

/// The share of `share` (a whole round) that `rank` of `ranks` measures: every ranks-th
/// candidate from the rank-th on, so that each rank gets the same number (±1) and slow and fast
/// candidates of the search's order mix. Empty for a rank beyond the candidates.
RoundShare ShareOfRank(const RoundShare& share, int rank, int ranks);

/// One measured candidate of a share: its index in the round, its result and the build part of
/// its record's compile time (lowering + GPU compile, ms; MeasureRecord::compile_ms adds the cpu
/// worker's JIT from the result).
struct MeasuredCandidate {
  int64_t index = 0;
  measure::MeasureResult result;
  double build_ms = 0;
};
nlohmann::json MeasuredCandidateToJson(const MeasuredCandidate& m);
absl::StatusOr<MeasuredCandidate> MeasuredCandidateFromJson(const nlohmann::json& j);

/// Measures built candidates with `runner`, screened above `screen_above_ms` (0: off), calling
/// `on_result` with each one's index from `indices` (parallel to `built`) as soon as its result
/// is final; adds the measuring wall seconds to timing->measure_s and the runner's split of them
/// (Runner::last_run_usage) to timing->split. The part of MeasureShare after
/// the build, shared with the tuner's own share (whose candidates are built from its lowerings).
void MeasureBuilt(const std::vector<measure::BuildResult>& built,
                  const std::vector<int64_t>& indices, double screen_above_ms,
                  const ir::ComputeDAG& dag, measure::Runner& runner,
                  const std::function<void(const MeasuredCandidate&)>& on_result,
                  RankTiming* timing);

/// Builds and measures a share in this process: replays each candidate's steps on `dag` (the
/// share's workload built), lowers it for the share's target, builds them all with a
/// measure::Builder of the share's build settings, then measures them with `runner` (screened by
/// the share's screen), calling `on_result` for each as soon as it is final, in share order.
/// A candidate that no longer replays or lowers is an invalid_schedule result, never an error.
/// `timing` gets the trials and the build and measure wall seconds.
void MeasureShare(const RoundShare& share, const ir::ComputeDAG& dag, measure::Runner& runner,
                  const std::function<void(const MeasuredCandidate&)>& on_result,
                  RankTiming* timing);

/// Spreads rounds over processes (see the file comment).
class RoundMeasurer {
 public:
  virtual ~RoundMeasurer() = default;
  using ResultCallback = std::function<void(const MeasuredCandidate&)>;
  /// Builds and measures this process's share (indices into the round) with its own builder and
  /// runner, calling `on_result` as each result is final, and filling `timing` (trials, build_s,
  /// measure_s). The tuner's candidates are already lowered, so it need not replay them.
  using LocalShare = std::function<void(const std::vector<int64_t>& indices,
                                        const ResultCallback& on_result, RankTiming* timing)>;
  /// Measures the round `round` (every candidate; indices 0..n-1), calling `on_result` once per
  /// candidate in index order, from the calling thread, as soon as its result and those of all
  /// earlier candidates have arrived (so the tuner can log each at once). Returns each rank's
  /// timing, in rank order. Errors: a rank that fails or stops answering (the job cannot go on;
  /// the results delivered so far are final).
  virtual absl::StatusOr<std::vector<RankTiming>> MeasureRound(const RoundShare& round,
                                                               const LocalShare& local,
                                                               const ResultCallback& on_result) = 0;
};

}  // namespace tilesearch::search
