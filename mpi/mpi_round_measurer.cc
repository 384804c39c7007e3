#include "mpi/mpi_round_measurer.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "measure/runner.h"

namespace tilesearch::mpi {
namespace {

using nlohmann::json;
using search::MeasuredCandidate;
using search::RankTiming;
using search::RoundShare;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Results of rank 0's own share, handed from its measuring thread to the thread talking MPI.
struct LocalResults {
  std::mutex mu;
  std::vector<MeasuredCandidate> arrived;
  bool done = false;
  RankTiming timing;
};

// What rank 0 knows of one rank's share of the round in flight.
struct RankState {
  int64_t expected = 0;  // candidates in its share
  bool done = true;      // its share-done message arrived (or it had no share)
  Clock::time_point last_heard = Clock::now();
  RankTiming timing;
};

// The test hook TILESEARCH_MPI_TEST_FAULT="R:S[:hang]" for this rank: nullopt when unset or
// another rank's; else the share number and whether to hang instead of dying.
struct Fault {
  int share = 0;
  bool hang = false;
};
std::optional<Fault> FaultOf(int rank) {
  const char* text = std::getenv("TILESEARCH_MPI_TEST_FAULT");
  if (text == nullptr) return std::nullopt;
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  int r = -1;
  Fault f;
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &r) ||
      !absl::SimpleAtoi(parts[1], &f.share)) {
    return std::nullopt;
  }
  if (r != rank) return std::nullopt;
  f.hang = parts.size() > 2 && parts[2] == "hang";
  return f;
}

}  // namespace

MpiRoundMeasurer::MpiRoundMeasurer(MpiJob& job, const measure::MeasureOptions& measure_options,
                                   double silence_s)
    : job_(job), measure_options_(measure_options), silence_s_(silence_s) {}

double MpiRoundMeasurer::SilenceLimitS(const RoundShare& round) const {
  if (silence_s_ > 0) return silence_s_;
  // Before its first result a rank builds its whole share and starts a measurement worker; after
  // that each result takes at most one candidate's run limit.
  const double share = static_cast<double>(round.steps.size()) / job_.size() + 1;
  return (share * round.compile_timeout_ms + measure_options_.setup_timeout_ms +
          measure_options_.run_timeout_ms) /
             1e3 +
         60;
}

absl::StatusOr<std::vector<RankTiming>> MpiRoundMeasurer::MeasureRound(
    const RoundShare& round, const LocalShare& local, const ResultCallback& on_result) {
  const int size = job_.size();
  const size_t n = round.steps.size();
  const auto start = Clock::now();
  std::vector<RankState> ranks(static_cast<size_t>(size));
  for (int r = 1; r < size; ++r) {
    RoundShare part = search::ShareOfRank(round, r, size);
    RankState& s = ranks[static_cast<size_t>(r)];
    s.expected = static_cast<int64_t>(part.steps.size());
    s.timing.rank = r;
    if (part.steps.empty()) continue;
    s.done = false;
    job_.Send(r, MessageTag::kWork, search::RoundShareToJson(part));
  }
  // Rank 0's own share, on a thread bound to its cores (its forked measurement and compile
  // workers inherit them), while this thread talks to the ranks.
  LocalResults mine;
  const std::vector<int64_t> own = search::ShareOfRank(round, 0, size).indices;
  std::thread measuring([&] {
    const cpu_set_t share = job_.core_share();
    pthread_setaffinity_np(pthread_self(), sizeof(share), &share);
    RankTiming timing;
    local(
        own,
        [&](const MeasuredCandidate& m) {
          std::lock_guard<std::mutex> lock(mine.mu);
          mine.arrived.push_back(m);
        },
        &timing);
    std::lock_guard<std::mutex> lock(mine.mu);
    mine.timing = timing;
    mine.done = true;
  });

  std::vector<std::optional<MeasuredCandidate>> slots(n);
  size_t next = 0;
  absl::Status failure;
  const double silence_s = SilenceLimitS(round);
  while (true) {
    bool progressed = false;
    int from = -1;
    MessageTag tag;
    while (std::optional<json> j = job_.Poll(-1, std::nullopt, &from, &tag)) {
      progressed = true;
      RankState& s = ranks[static_cast<size_t>(from)];
      s.last_heard = Clock::now();
      if (tag == MessageTag::kResult) {
        absl::StatusOr<MeasuredCandidate> m = search::MeasuredCandidateFromJson(*j);
        if (m.ok() && m->index >= 0 && static_cast<size_t>(m->index) < n) {
          slots[static_cast<size_t>(m->index)] = *std::move(m);
        } else if (failure.ok()) {
          failure = absl::InternalError(absl::StrCat(
              "rank ", from, " sent an unreadable result in round ", round.round, ": ",
              m.ok() ? absl::StrCat("index ", m->index, " of ", n) : m.status().ToString()));
        }
      } else if (tag == MessageTag::kShareDone) {
        s.done = true;
        s.timing.trials = j->value("trials", int64_t{0});
        s.timing.build_s = j->value("build_s", 0.0);
        s.timing.measure_s = j->value("measure_s", 0.0);
        s.timing.split.prepare_s = j->value("prepare_s", 0.0);
        s.timing.split.worker_setups = j->value("worker_setups", int64_t{0});
        s.timing.split.setup_s = j->value("setup_s", 0.0);
        s.timing.split.items_s = j->value("items_s", 0.0);
        if (j->contains("error") && failure.ok()) {
          failure = absl::InternalError(absl::StrCat("rank ", from,
                                                     " could not measure its share of round ",
                                                     round.round, ": ", j->value("error", "")));
        }
      }
    }
    bool local_done = false;
    {
      std::lock_guard<std::mutex> lock(mine.mu);
      for (MeasuredCandidate& m : mine.arrived) {
        slots[static_cast<size_t>(m.index)] = std::move(m);
        progressed = true;
      }
      mine.arrived.clear();
      local_done = mine.done;
    }
    // After a failure nothing more is delivered: the log keeps the results before the gap.
    while (failure.ok() && next < n && slots[next]) {
      on_result(*slots[next]);
      slots[next].reset();
      ++next;
    }
    bool all_done = local_done;
    for (const RankState& s : ranks) all_done = all_done && s.done;
    if (all_done) break;
    for (int r = 1; r < size; ++r) {
      const RankState& s = ranks[static_cast<size_t>(r)];
      if (s.done || SecondsSince(s.last_heard) <= silence_s) continue;
      // A rank that hangs cannot be ended from here: stop the job (MpiJob::Finish aborts).
      job_.MarkBroken();
      measuring.join();
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", r, " sent nothing for ", static_cast<int64_t>(silence_s),
          " s while measuring its ", s.expected, " candidates of round ", round.round,
          "; stopping the job (every result received in order is logged; run the same command "
          "again to resume)"));
    }
    if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  measuring.join();
  if (!failure.ok()) return failure;
  if (next != n) {
    return absl::InternalError(
        absl::StrCat("round ", round.round, ": ", next, " of ", n, " results arrived"));
  }
  const double wall_s = SecondsSince(start);
  ranks[0].timing = mine.timing;
  std::vector<RankTiming> timings;
  for (int r = 0; r < size; ++r) {
    RankTiming t = ranks[static_cast<size_t>(r)].timing;
    t.rank = r;
    t.idle_s = std::max(0.0, wall_s - t.build_s - t.measure_s);
    timings.push_back(t);
  }
  return timings;
}

namespace {

// One rank's builders' and runners' state across shares: DAGs by workload, runners by
// precision and screen factor (each runner keeps its last task's measuring worker and data, so a
// rank's shares of one task pay one worker setup).
class ShareServer {
 public:
  ShareServer(MpiJob& job, const measure::MeasureOptions& options)
      : job_(job), options_(options), fault_(FaultOf(job.rank())) {}

  // Measures one share message and reports it; errors go to rank 0 as the share's error.
  void Serve(const json& message) {
    ++shares_;
    absl::StatusOr<RoundShare> share = search::RoundShareFromJson(message);
    if (!share.ok()) return Fail(share.status());
    absl::StatusOr<const ir::ComputeDAG*> dag = Dag(share->workload);
    if (!dag.ok()) return Fail(dag.status());
    absl::StatusOr<measure::Runner*> runner = RunnerFor(*share);
    if (!runner.ok()) return Fail(runner.status());
    RankTiming timing;
    size_t sent = 0;
    const bool faulty = fault_ && fault_->share == shares_;
    search::MeasureShare(
        *share, **dag, **runner,
        [&](const MeasuredCandidate& m) {
          job_.Send(0, MessageTag::kResult, search::MeasuredCandidateToJson(m));
          if (faulty && ++sent == std::max<size_t>(1, share->steps.size() / 2)) InjectFault();
        },
        &timing);
    job_.Send(0, MessageTag::kShareDone,
              json{{"trials", timing.trials},
                   {"build_s", timing.build_s},
                   {"measure_s", timing.measure_s},
                   {"prepare_s", timing.split.prepare_s},
                   {"worker_setups", timing.split.worker_setups},
                   {"setup_s", timing.split.setup_s},
                   {"items_s", timing.split.items_s}});
  }

 private:
  void Fail(const absl::Status& status) {
    job_.Send(0, MessageTag::kShareDone, json{{"error", status.ToString()}});
  }

  [[noreturn]] void InjectFault() const {
    if (fault_->hang) {
      while (true) pause();
    }
    kill(getpid(), SIGKILL);
    while (true) pause();
  }

  absl::StatusOr<const ir::ComputeDAG*> Dag(const schedule::Workload& workload) {
    const std::string key = schedule::WorkloadToJson(workload).dump();
    auto it = dags_.find(key);
    if (it == dags_.end()) {
      absl::StatusOr<ir::ComputeDAG> dag = workload.Build();
      if (!dag.ok()) return dag.status();
      it = dags_.emplace(key, *std::move(dag)).first;
    }
    return &it->second;
  }

  absl::StatusOr<measure::Runner*> RunnerFor(const RoundShare& share) {
    const std::string key =
        absl::StrCat(share.target.ToString(), " ", measure::Fp32PrecisionName(share.precision), " ",
                     share.screen_factor);
    auto it = runners_.find(key);
    if (it == runners_.end()) {
      measure::MeasureOptions options = options_;
      options.precision = share.precision;
      options.screen_factor = share.screen_factor;
      absl::StatusOr<std::unique_ptr<measure::Runner>> runner =
          measure::CreateRunner(share.target, options);
      if (!runner.ok()) return runner.status();
      it = runners_.emplace(key, *std::move(runner)).first;
    }
    return it->second.get();
  }

  MpiJob& job_;
  measure::MeasureOptions options_;
  std::optional<Fault> fault_;
  int shares_ = 0;
  std::map<std::string, ir::ComputeDAG> dags_;
  std::map<std::string, std::unique_ptr<measure::Runner>> runners_;
};

}  // namespace

int ServeRounds(MpiJob& job, const measure::MeasureOptions& measure_options) {
  // mpiexec forwards Ctrl-C to every rank: rank 0 finishes the round and then stops the ranks,
  // so the others must not die of it.
  signal(SIGINT, SIG_IGN);
  const cpu_set_t share = job.core_share();
  sched_setaffinity(0, sizeof(share), &share);
  ShareServer server(job, measure_options);
  while (true) {
    const json message = job.Receive(0, MessageTag::kWork, nullptr, nullptr);
    if (message.value("stop", false)) return message.value("status", 0);
    server.Serve(message);
  }
}

}  // namespace tilesearch::mpi
