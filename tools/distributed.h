// Tuning across the ranks of an MPI job from the CLI: `mpiexec -n N tilesearch tune|bench|
// tune-graph ...` (or srun). In the MPI build (cmake -DTILESEARCH_MPI=ON: distributed_mpi.cc)
// rank 0 tunes and the other ranks build and measure shares of its rounds (mpi/mpi_job.h,
// mpi/mpi_round_measurer.h); in the default build (distributed_off.cc) every function here is a
// no-op and a process launched by mpiexec is told that this build has no MPI.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/target.h"
#include "search/tuner.h"

namespace tilesearch::tools {

/// First thing in main: joins the MPI job when the process was launched as one of several ranks.
/// Errors: MPI does not initialize; kFailedPrecondition in a build without MPI launched as one of
/// several ranks ("this tilesearch was built without MPI (-DTILESEARCH_MPI=ON)").
[[nodiscard]] absl::Status StartDistributed(int* argc, char*** argv);

/// True on ranks > 0 of an MPI job: they print nothing of their own (rank 0 reports for all).
bool IsServingRank();

/// Before a command runs: kInvalidArgument for a command other than tune, bench and tune-graph in
/// an MPI job of several ranks (the others would each run it in full); OK otherwise.
[[nodiscard]] absl::Status CheckDistributedCommand(const std::string& command);

/// tune, bench and tune-graph, once their options and target are known and before they print or
/// tune: in an MPI job every rank checks with the others that they agree (same command line,
/// target kind and arch, each GPU's model). Then, on rank 0, sets tune.measurer (rounds spread
/// over the ranks) and, on cuda, tune.measure.device to its local rank (modulo the GPUs) and,
/// unless TILESEARCH_DEVICE_LOCK names one, the device's lock file in the temp directory (ranks
/// sharing a GPU take turns checking and timing), and returns nullopt: tune
/// as usual. On the other ranks it serves rounds until rank 0 is done and returns their exit code
/// (0). Outside an MPI job: nullopt, `tune` untouched. Errors (rank 0): the ranks' disagreement;
/// other ranks return kAborted (rank 0 reports).
[[nodiscard]] absl::StatusOr<std::optional<int>> DistributeTuning(search::TuneOptions& tune,
                                                                  const Target& target);

/// Last thing in main, with the command's exit code and its error message (empty when none):
/// ranks that did not reach DistributeTuning tell rank 0 why, rank 0 stops the others, and MPI is
/// finalized (aborted when a rank stopped answering). Returns the exit code to use.
int FinishDistributed(int code, const std::string& error);

}  // namespace tilesearch::tools
