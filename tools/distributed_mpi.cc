// The MPI build: tuning spread over the ranks of an MPI job (tools/distributed.h).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "measure/measure.h"
#include "mpi/launch_env.h"
#include "mpi/mpi_job.h"
#include "mpi/mpi_round_measurer.h"
#include "runtime/cuda_device.h"
#include "search/measure_record.h"
#include "tools/distributed.h"

namespace tilesearch::tools {
namespace {

// The job this process is a rank of; null outside one (a plain run of the MPI build).
std::unique_ptr<mpi::MpiJob>& Job() {
  static std::unique_ptr<mpi::MpiJob> job;
  return job;
}

std::vector<std::string>& Args() {
  static std::vector<std::string> args;
  return args;
}

// What this rank reports to Join: its command line, target and (cuda) its GPU's model, probed in
// a child process so that this process does not initialize CUDA before forking workers.
mpi::JoinInfo InfoOf(const Target& target, int device) {
  mpi::JoinInfo info;
  info.args = Args();
  info.target = search::TargetToRecordJson(target);
  if (target.is_gpu()) {
    absl::StatusOr<runtime::DeviceInfo> probed = runtime::ProbeCudaDevice(device);
    if (!probed.ok()) {
      info.error = absl::StrCat("no usable CUDA device ", device,
                                " for its local rank: ", probed.status().message());
    } else {
      info.device_arch = runtime::TargetFromDevice(*probed).arch;
      info.device_name = probed->name;
    }
  }
  return info;
}

// `device` when it exists, else device % (the number of devices), found by probing devices 0, 1,
// ... in child processes (this process must not initialize CUDA before forking workers); `device`
// unchanged when even device 0 does not answer (Join then reports the probe's error).
int SharedDevice(int device) {
  if (device == 0 || runtime::ProbeCudaDevice(device).ok()) return device;
  int count = 0;
  while (count < device && runtime::ProbeCudaDevice(count).ok()) ++count;
  return count == 0 ? device : device % count;
}

// Test hook: TILESEARCH_MPI_SILENCE_S overrides how long rank 0 waits for a silent rank (the
// hang test's few seconds); unset, MpiRoundMeasurer derives it from each round (0).
double SilenceLimitS() {
  const char* text = std::getenv("TILESEARCH_MPI_SILENCE_S");
  double s = 0;
  return text != nullptr && absl::SimpleAtod(text, &s) && s > 0 ? s : 0;
}

}  // namespace

absl::Status StartDistributed(int* argc, char*** argv) {
  if (!mpi::LaunchedWithRanks()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<mpi::MpiJob>> job = mpi::MpiJob::Start(argc, argv);
  if (!job.ok()) return job.status();
  Job() = *std::move(job);
  // An MPI that cannot talk to the launcher starts every process as a job of one: N processes
  // would then each tune alone into one log.
  if (Job()->size() != mpi::LaunchedRanks()) {
    const int size = Job()->size();
    Job().reset();
    return absl::FailedPreconditionError(absl::StrCat(
        "the launcher started ", mpi::LaunchedRanks(), " ranks, but MPI sees a job of ", size,
        ": this MPI does not speak the launcher's PMI (with Slurm try srun --mpi=pmi2 or "
        "--mpi=pmix, or mpiexec inside the allocation)"));
  }
  for (int i = 1; i < *argc; ++i) Args().push_back((*argv)[i]);
  return absl::OkStatus();
}

bool IsServingRank() { return Job() != nullptr && Job()->rank() > 0; }

absl::Status CheckDistributedCommand(const std::string& command) {
  if (Job() == nullptr || command == "tune" || command == "bench" || command == "tune-graph") {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'tilesearch ", command,
                   "' runs as one process; under mpiexec / srun only "
                   "tune, bench and tune-graph spread their work over the ranks"));
}

absl::StatusOr<std::optional<int>> DistributeTuning(search::TuneOptions& tune,
                                                    const Target& target) {
  mpi::MpiJob* job = Job().get();
  if (job == nullptr) return std::optional<int>();
  // Each rank measures on the GPU of its local rank; with fewer GPUs than local ranks, on the
  // GPU of its local rank modulo their number (ranks sharing one take turns through the device
  // lock, as processes sharing a GPU always do).
  if (target.is_gpu()) {
    tune.measure.device = SharedDevice(mpi::DeviceOfLocalRank(job->local_rank()));
    // Ranks sharing a GPU must not check or time at the same time: concurrent kernels slow each
    // other (an untuned 27 ms kernel timed at 52 ms beside another rank's). Unless the user named
    // a lock (TILESEARCH_DEVICE_LOCK), every rank on the host takes the device's own lock file;
    // a rank alone on its GPU finds it free.
    if (measure::DeviceLockPath(tune.measure).empty()) {
      std::error_code ignored;
      const std::filesystem::path dir = std::filesystem::temp_directory_path(ignored);
      tune.measure.device_lock_path =
          (dir.empty() ? std::filesystem::path("/tmp") : dir) /
          absl::StrCat("tilesearch-", ::getuid(), "-gpu", tune.measure.device, ".lock");
    }
  }
  RETURN_IF_ERROR(job->Join(InfoOf(target, tune.measure.device)));
  if (job->rank() > 0) {
    // Rank 0's exit status (130 when the job was interrupted), so that mpiexec reports it.
    return std::optional<int>(mpi::ServeRounds(*job, tune.measure));
  }
  if (job->local_size() > job->allowed_cores()) {
    // Each rank then builds on one core that it shares with others: slower than fewer ranks.
    std::cerr << "tilesearch: warning: " << job->local_size() << " ranks on host " << job->host()
              << " share " << job->allowed_cores()
              << (job->allowed_cores() == 1 ? " core" : " cores")
              << "; ranks that share a core build in turn (use at most one rank per core)\n";
  }
  tune.measurer = std::make_shared<mpi::MpiRoundMeasurer>(*job, tune.measure, SilenceLimitS());
  return std::optional<int>();
}

int FinishDistributed(int code, const std::string& error) {
  mpi::MpiJob* job = Job().get();
  if (job == nullptr) return code;
  if (!job->joined() && !job->join_called()) {
    // This rank ended before DistributeTuning: a failure is rank 0's to report; a command that
    // succeeded without tuning (--help) on every rank leaves the job agreed, and it ends with 0.
    mpi::JoinInfo info;
    info.args = Args();
    if (code != 0 || !error.empty()) {
      info.error =
          error.empty() ? absl::StrCat("exited with status ", code, " before tuning") : error;
    }
    absl::Status joined = job->Join(info);
    if (job->rank() == 0 && !joined.ok() && error.empty()) {
      std::cerr << "tilesearch: error: " << joined.message() << "\n";
      code = 2;
    } else if (job->rank() > 0 && joined.ok()) {
      // Rank 0 ends an agreed job with a stop message (MpiJob::Finish); take it before finalizing.
      job->Receive(0, mpi::MessageTag::kWork, nullptr, nullptr);
    }
  }
  job->Finish(code);
  Job().reset();
  return code;
}

}  // namespace tilesearch::tools
