// The build without MPI: tuning stays in one process (tools/distributed.h).
#include "mpi/launch_env.h"
#include "tools/distributed.h"

namespace tilesearch::tools {

absl::Status StartDistributed(int*, char***) {
  if (mpi::LaunchedWithRanks()) {
    return absl::FailedPreconditionError(
        "launched as one of several MPI ranks, but this tilesearch was built without MPI "
        "(configure with -DTILESEARCH_MPI=ON)");
  }
  return absl::OkStatus();
}

bool IsServingRank() { return false; }

absl::Status CheckDistributedCommand(const std::string&) { return absl::OkStatus(); }

absl::StatusOr<std::optional<int>> DistributeTuning(search::TuneOptions&, const Target&) {
  return std::optional<int>();
}

int FinishDistributed(int code, const std::string&) { return code; }

}  // namespace tilesearch::tools
