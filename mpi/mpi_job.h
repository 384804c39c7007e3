// The MPI job a tilesearch process runs in (`mpiexec -n N tilesearch tune|bench|tune-graph ...`,
// or Slurm's srun). Rank 0 owns the search, the cost model, the task scheduler and the log; every
// other rank serves rounds (mpi/mpi_round_measurer.h): it builds and measures its share of each
// round's candidates on its own device and sends the results back.
//
// Every rank parses the same command line and calls Join once with what it made of it (its
// target, or the error it met) before any round; rank 0 checks that all ranks agree (command
// line, target kind and arch, each GPU's model) and answers every rank with one verdict, so a
// disagreement is one clear error on rank 0 and a clean exit of every rank, never a hang. Each
// rank is bound by its local rank (MPI_COMM_TYPE_SHARED split of the ranks of its host): to GPU
// `local rank` on cuda targets, and to its share of the host's cores (an equal, contiguous slice
// of the cores the process may run on) for the processes that build and measure.
//
// Messages between ranks are JSON text (MessageTag says which). MPI cannot survive a lost rank:
// when a rank dies the launcher ends the job; a rank that stops answering makes rank 0 stop the
// job with MPI_Abort (Abort). Neither loses a logged record: rank 0 appends each one as it
// arrives (fsync'd).
#pragma once

#include <sched.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tilesearch::mpi {

/// What a message between ranks carries.
enum class MessageTag : int {
  kJoin = 1,     // rank > 0 → 0: JoinInfo
  kVerdict = 2,  // 0 → rank: {"ok": bool, "error": text}
  kWork = 3,     // 0 → rank: a round share (search::RoundShareToJson) or {"stop": true}
  kResult = 4,   // rank → 0: one measured candidate (search::MeasuredCandidateToJson)
  // rank → 0: {"trials", "build_s", "measure_s", "prepare_s", "worker_setups", "setup_s",
  // "items_s"} or {"error": text}
  kShareDone = 5,
};

/// What one rank made of the command line, for Join.
struct JoinInfo {
  /// The command line without the program path.
  std::vector<std::string> args;
  /// The target the rank would tune for (search::TargetToRecordJson); null with an error.
  nlohmann::json target;
  /// cuda: the model of the rank's GPU (device_name, arch) as probed; empty on cpu.
  std::string device_arch;
  std::string device_name;
  /// Non-empty when the rank cannot take part (bad options, no device): the reason.
  std::string error;
};

/// This process's place in the MPI job.
class MpiJob {
 public:
  /// Initializes MPI (MPI_THREAD_SERIALIZED: rank 0 talks to the ranks from the thread that
  /// measures a round, which may not be the main thread) and finds the rank's local rank and the
  /// number of ranks on its host. Call once, early in main. Errors: kFailedPrecondition when MPI
  /// does not initialize or gives less than serialized thread support.
  static absl::StatusOr<std::unique_ptr<MpiJob>> Start(int* argc, char*** argv);

  ~MpiJob();
  MpiJob(const MpiJob&) = delete;
  MpiJob& operator=(const MpiJob&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const std::string& host() const { return host_; }
  /// This rank's share of the cores this process may run on: the local_rank-th of local_size
  /// equal contiguous slices (one core, shared round-robin, when there are fewer cores than
  /// ranks).
  const cpu_set_t& core_share() const { return core_share_; }
  /// How many cores this process may run on (its affinity mask) when the job started.
  int allowed_cores() const { return allowed_cores_; }
  /// "rank 1 (local rank 1 on host node7)".
  std::string Name(int rank) const;

  /// Every rank calls it once before any round, with what it made of the command line. Rank 0
  /// gathers every rank's info (waiting at most `timeout_s` for each), checks that they agree and
  /// sends each rank the verdict. Returns OK on every rank when they agree; otherwise rank 0's
  /// error names the ranks and what differs ("rank 1 (...): no CUDA device 1: ...", "ranks
  /// disagree on the command line: ...", "rank 1's GPU is sm_80 (NVIDIA A100), the job tunes
  /// for sm_90 ...") and the other ranks get kAborted (their error is rank 0's to report).
  absl::Status Join(const JoinInfo& mine, double timeout_s = 600);
  bool joined() const { return joined_; }
  /// Whether Join was called (successfully or not).
  bool join_called() const { return join_called_; }

  /// Rank 0: tells every rank to stop serving (after Join succeeded), with the exit status rank 0
  /// ends with (ServeRounds returns it, so that an interrupted job exits 130 on every rank and
  /// mpiexec reports it). Idempotent.
  void StopRanks(int status = 0);
  /// Ends the job at once with MPI_Abort(`code`) (a rank stopped answering: nothing else can end
  /// it). Does not return.
  [[noreturn]] void Abort(int code) const;
  /// Marks the job as not recoverable: Finish then aborts instead of finalizing.
  void MarkBroken() { broken_ = true; }
  bool broken() const { return broken_; }
  /// Ends MPI: rank 0 stops the ranks, then every rank calls MPI_Finalize (MPI_Abort when the job
  /// is broken). Rank 0 passes its exit status on to the ranks (StopRanks). Called by the
  /// destructor when not before.
  void Finish(int status = 0);

  /// Sends `message` (JSON text) to `rank` with `tag`; blocks until MPI may reuse the buffer.
  void Send(int rank, MessageTag tag, const nlohmann::json& message) const;
  /// A message that has arrived from `rank` (any rank: -1) with `tag` (any: nullopt), without
  /// waiting: nullopt when none has. Sets *from and *tag_out.
  std::optional<nlohmann::json> Poll(int rank, std::optional<MessageTag> tag, int* from,
                                     MessageTag* tag_out) const;
  /// As Poll, waiting for the message (polling, with sleeps of up to 5 ms: an idle rank leaves
  /// its core to the others).
  nlohmann::json Receive(int rank, std::optional<MessageTag> tag, int* from,
                         MessageTag* tag_out) const;

 private:
  MpiJob() = default;
  absl::Status JoinAsRankZero(const JoinInfo& mine, double timeout_s);
  absl::Status JoinAsWorker(const JoinInfo& mine);

  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::string host_;
  cpu_set_t core_share_{};
  int allowed_cores_ = 1;
  bool joined_ = false;
  bool join_called_ = false;
  bool stopped_ = false;
  bool finished_ = false;
  bool broken_ = false;
};

/// The JSON of a JoinInfo and back (missing fields read as empty).
nlohmann::json JoinInfoToJson(const JoinInfo& info);
JoinInfo JoinInfoFromJson(const nlohmann::json& j);

/// Why the ranks' JoinInfos (index = rank) cannot make one job, or OK: a rank's own error, a
/// command line that differs from rank 0's, a target of another kind or arch than rank 0's, a
/// GPU whose arch is not the target's. `names[r]` names rank r in messages.
absl::Status CheckRanksAgree(const std::vector<JoinInfo>& infos,
                             const std::vector<std::string>& names);

}  // namespace tilesearch::mpi
