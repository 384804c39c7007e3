#include "mpi/mpi_job.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tilesearch::mpi {
namespace {

using nlohmann::json;

// The cores this process may run on, in increasing order.
std::vector<int> AllowedCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cores.push_back(c);
    }
  }
  if (cores.empty()) {
    const unsigned n = std::thread::hardware_concurrency();
    for (unsigned c = 0; c < std::max(1u, n); ++c) cores.push_back(static_cast<int>(c));
  }
  return cores;
}

// The local_rank-th of local_size equal contiguous slices of `cores`; with fewer cores than
// ranks, core local_rank mod cores.
cpu_set_t CoreShare(const std::vector<int>& cores, int local_rank, int local_size) {
  cpu_set_t share;
  CPU_ZERO(&share);
  const size_t n = cores.size();
  const size_t ranks = static_cast<size_t>(local_size);
  const size_t r = static_cast<size_t>(local_rank);
  if (n < ranks) {
    CPU_SET(cores[r % n], &share);
    return share;
  }
  for (size_t i = r * n / ranks; i < (r + 1) * n / ranks; ++i) CPU_SET(cores[i], &share);
  return share;
}

std::string TargetText(const json& target) {
  if (!target.is_object()) return "none";
  return absl::StrCat(target.value("kind", std::string("?")), " ",
                      target.value("arch", std::string("?")));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MpiJob>> MpiJob::Start(int* argc, char*** argv) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    return absl::FailedPreconditionError("MPI_Init_thread failed");
  }
  std::unique_ptr<MpiJob> job(new MpiJob());
  if (provided < MPI_THREAD_SERIALIZED) {
    job->finished_ = true;
    MPI_Finalize();
    return absl::FailedPreconditionError(absl::StrCat(
        "the MPI library gives thread support level ", provided,
        ", below MPI_THREAD_SERIALIZED, which rank 0 needs (it measures rounds on a thread)"));
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &job->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &job->size_);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, job->rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &job->local_rank_);
  MPI_Comm_size(node, &job->local_size_);
  MPI_Comm_free(&node);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  job->host_.assign(name, static_cast<size_t>(length));
  const std::vector<int> cores = AllowedCores();
  job->allowed_cores_ = static_cast<int>(cores.size());
  job->core_share_ = CoreShare(cores, job->local_rank_, job->local_size_);
  return job;
}

MpiJob::~MpiJob() { Finish(); }

std::string MpiJob::Name(int rank) const { return absl::StrCat("rank ", rank); }

void MpiJob::Send(int rank, MessageTag tag, const json& message) const {
  const std::string text = message.dump();
  MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, rank, static_cast<int>(tag),
           MPI_COMM_WORLD);
}

namespace {

json ReceiveProbed(const MPI_Status& status, int* from, MessageTag* tag_out) {
  int count = 0;
  MPI_Get_count(&status, MPI_CHAR, &count);
  std::string text(static_cast<size_t>(count), '\0');
  MPI_Status got;
  MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD, &got);
  if (from != nullptr) *from = status.MPI_SOURCE;
  if (tag_out != nullptr) *tag_out = static_cast<MessageTag>(status.MPI_TAG);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? json{{"error", "a message that is not JSON"}} : j;
}

}  // namespace

std::optional<json> MpiJob::Poll(int rank, std::optional<MessageTag> tag, int* from,
                                 MessageTag* tag_out) const {
  int flag = 0;
  MPI_Status status;
  MPI_Iprobe(rank < 0 ? MPI_ANY_SOURCE : rank, tag ? static_cast<int>(*tag) : MPI_ANY_TAG,
             MPI_COMM_WORLD, &flag, &status);
  if (!flag) return std::nullopt;
  return ReceiveProbed(status, from, tag_out);
}

json MpiJob::Receive(int rank, std::optional<MessageTag> tag, int* from,
                     MessageTag* tag_out) const {
  // Polled with growing sleeps rather than a blocking MPI_Probe, which spins a core at 100% in
  // MPICH's progress loop: an idle rank would take a core from rank 0's search on the same host
  // (on 2 cores its search took 1.6x as long).
  int sleep_us = 50;
  while (true) {
    if (std::optional<json> j = Poll(rank, tag, from, tag_out)) return *std::move(j);
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, 5000);
  }
}

absl::Status MpiJob::Join(const JoinInfo& mine, double timeout_s) {
  if (join_called_) return absl::FailedPreconditionError("MpiJob::Join called twice");
  join_called_ = true;
  return rank_ == 0 ? JoinAsRankZero(mine, timeout_s) : JoinAsWorker(mine);
}

absl::Status MpiJob::JoinAsRankZero(const JoinInfo& mine, double timeout_s) {
  std::vector<JoinInfo> infos(static_cast<size_t>(size_));
  std::vector<bool> heard(static_cast<size_t>(size_), false);
  infos[0] = mine;
  heard[0] = true;
  std::vector<std::string> names;
  for (int r = 0; r < size_; ++r) names.push_back(Name(r));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int missing = size_ - 1;
  while (missing > 0) {
    int from = -1;
    std::optional<json> j = Poll(-1, MessageTag::kJoin, &from, nullptr);
    if (j) {
      infos[static_cast<size_t>(from)] = JoinInfoFromJson(*j);
      // Names carry the host and local rank the ranks report.
      names[static_cast<size_t>(from)] =
          absl::StrCat("rank ", from, " (local rank ", j->value("local_rank", -1), " on host ",
                       j->value("host", std::string("?")), ")");
      heard[static_cast<size_t>(from)] = true;
      --missing;
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::vector<std::string> silent;
      for (int r = 1; r < size_; ++r) {
        if (!heard[static_cast<size_t>(r)]) silent.push_back(absl::StrCat(r));
      }
      broken_ = true;  // a silent rank can only be ended by MPI_Abort
      return absl::DeadlineExceededError(absl::StrCat("ranks ", absl::StrJoin(silent, ", "),
                                                      " did not report within ", timeout_s,
                                                      " s of starting; stopping the job"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  names[0] = absl::StrCat("rank 0 (local rank ", local_rank_, " on host ", host_, ")");
  absl::Status agree = CheckRanksAgree(infos, names);
  for (int r = 1; r < size_; ++r) {
    Send(r, MessageTag::kVerdict,
         json{{"ok", agree.ok()}, {"error", std::string(agree.message())}});
  }
  if (agree.ok()) {
    joined_ = true;
  } else {
    stopped_ = true;  // the ranks end on the verdict
  }
  return agree;
}

absl::Status MpiJob::JoinAsWorker(const JoinInfo& mine) {
  json j = JoinInfoToJson(mine);
  j["host"] = host_;
  j["local_rank"] = local_rank_;
  Send(0, MessageTag::kJoin, j);
  const json verdict = Receive(0, MessageTag::kVerdict, nullptr, nullptr);
  if (verdict.value("ok", false)) {
    joined_ = true;
    return absl::OkStatus();
  }
  stopped_ = true;
  return absl::AbortedError(
      absl::StrCat("rank 0 stopped the job: ", verdict.value("error", std::string())));
}

void MpiJob::StopRanks(int status) {
  if (rank_ != 0 || !joined_ || stopped_) return;
  stopped_ = true;
  for (int r = 1; r < size_; ++r) {
    Send(r, MessageTag::kWork, json{{"stop", true}, {"status", status}});
  }
}

void MpiJob::Abort(int code) const {
  // The launcher forwards each rank's output through its proxy, which MPI_Abort may end before
  // it has passed on the lines just written (the error that says why): give it a moment.
  std::cout.flush();
  std::cerr.flush();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; in case it does
}

void MpiJob::Finish(int status) {
  if (finished_) return;
  if (broken_) Abort(3);
  StopRanks(status);
  finished_ = true;
  MPI_Finalize();
}

json JoinInfoToJson(const JoinInfo& info) {
  return {{"args", info.args},
          {"target", info.target},
          {"device_arch", info.device_arch},
          {"device_name", info.device_name},
          {"error", info.error}};
}

JoinInfo JoinInfoFromJson(const json& j) {
  JoinInfo info;
  if (!j.is_object()) {
    info.error = "sent a join message that is not a JSON object";
    return info;
  }
  if (j.contains("args") && j.at("args").is_array()) {
    for (const json& a : j.at("args")) {
      if (a.is_string()) info.args.push_back(a.get<std::string>());
    }
  }
  if (j.contains("target")) info.target = j.at("target");
  info.device_arch = j.value("device_arch", std::string());
  info.device_name = j.value("device_name", std::string());
  info.error = j.value("error", std::string());
  return info;
}

absl::Status CheckRanksAgree(const std::vector<JoinInfo>& infos,
                             const std::vector<std::string>& names) {
  std::vector<std::string> errors;
  for (size_t r = 0; r < infos.size(); ++r) {
    if (!infos[r].error.empty()) errors.push_back(absl::StrCat(names[r], ": ", infos[r].error));
  }
  if (!errors.empty()) return absl::FailedPreconditionError(absl::StrJoin(errors, "; "));
  const JoinInfo& zero = infos.front();
  for (size_t r = 1; r < infos.size(); ++r) {
    if (infos[r].args != zero.args) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ranks disagree on the command line: ", names[r], " ran '",
          absl::StrJoin(infos[r].args, " "), "', ", names[0], " '", absl::StrJoin(zero.args, " "),
          "'; launch every rank with the same arguments"));
    }
    if (TargetText(infos[r].target) != TargetText(zero.target)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ranks disagree on the target: ", names[r], " tunes for ", TargetText(infos[r].target),
          ", ", names[0], " for ", TargetText(zero.target)));
    }
  }
  const std::string arch = zero.target.is_object() ? zero.target.value("arch", "") : "";
  for (size_t r = 0; r < infos.size(); ++r) {
    if (infos[r].device_arch.empty() || infos[r].device_arch == arch) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        names[r], " has a ", infos[r].device_name, " (", infos[r].device_arch,
        "), but the job tunes for ", arch,
        ": measurements of different GPU models must stay apart; run one job per GPU model "
        "(or name its arch with --target)"));
  }
  return absl::OkStatus();
}

}  // namespace tilesearch::mpi
