// Rounds spread over the ranks of an MPI job (mpi/mpi_job.h). Rank 0's tuner hands each round to
// an MpiRoundMeasurer, which sends every other rank its share (every size-th candidate, as JSON:
// workload, target, steps), builds and measures its own share on a thread bound to its cores, and
// gives the tuner the results in candidate order as they arrive; the other ranks run ServeRounds:
// rebuild the share's candidates from their steps, build and measure them with their own Builder
// and Runner on their own device, and send each result back as soon as it is final.
//
// Design choice: rank 0 writes the one log. Each result is appended (one write + fsync, as in a
// single process) as soon as it and every earlier candidate of the round have arrived, so the log
// is identical in form to a single-process run (trials numbered in candidate order, one round
// line per round) and a lost rank loses no logged record: resuming reads one file, with no merge
// step whose own failure could lose or duplicate records. Per-rank logs merged afterwards would
// save rank 0 one small message per trial, which costs nothing next to a measurement.
#pragma once

#include <memory>

#include "measure/measure.h"
#include "mpi/mpi_job.h"
#include "search/round_measurer.h"

namespace tilesearch::mpi {

/// Rank 0's search::RoundMeasurer over every rank of `job` (which must have joined).
class MpiRoundMeasurer : public search::RoundMeasurer {
 public:
  /// `silence_s`: longest wait for the next message of a rank still measuring its share before
  /// the job is stopped as hung (0: derived from the round: the share's compile limits + the
  /// measurement setup and run limits of `measure_options` + 60 s).
  MpiRoundMeasurer(MpiJob& job, const measure::MeasureOptions& measure_options,
                   double silence_s = 0);

  /// See search::RoundMeasurer. Errors: kInternal when a rank could not read or measure its
  /// share (after every rank has finished it); kDeadlineExceeded when a rank stays silent longer
  /// than the silence limit (the job is then marked broken: MpiJob::Finish aborts it).
  absl::StatusOr<std::vector<search::RankTiming>> MeasureRound(
      const search::RoundShare& round, const LocalShare& local,
      const ResultCallback& on_result) override;

 private:
  double SilenceLimitS(const search::RoundShare& round) const;

  MpiJob& job_;
  measure::MeasureOptions measure_options_;
  double silence_s_;
};

/// Ranks > 0 after Join: binds this process to its core share, then builds and measures every
/// share rank 0 sends (with `measure_options`, this rank's own from the same command line; the
/// share sets precision and screening) until rank 0 says stop. A share it cannot read, or whose
/// workload or runner it cannot make, is reported to rank 0 (which stops the job), never a crash.
/// Test hook: TILESEARCH_MPI_TEST_FAULT="R:S" makes rank R kill itself (SIGKILL) after sending half
/// of the results of the S-th share it receives ("R:S:hang": it stops answering instead).
/// Returns the exit status rank 0 sent with its stop (0, or 130 after an interrupt).
int ServeRounds(MpiJob& job, const measure::MeasureOptions& measure_options);

}  // namespace tilesearch::mpi
