#include "search/task_scheduler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace tilesearch::search {

absl::StatusOr<RoundResult> TaskRunner::Restore(int /*task*/) { return RoundResult{}; }

const char* TaskStateName(TaskState state) {
  switch (state) {
    case TaskState::kActive:
      return "active";
    case TaskState::kNotStarted:
      return "not_started";
    case TaskState::kDead:
      return "dead";
    case TaskState::kExhausted:
      return "exhausted";
    case TaskState::kEarlyStopped:
      return "early_stopped";
  }
  return "unknown";
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string Fixed(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

absl::Status CheckOptions(const std::vector<SchedulerTask>& tasks, const TaskSchedulerOptions& o) {
  if (tasks.empty())
    return absl::InvalidArgumentError("the task scheduler needs at least one task");
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!(tasks[i].weight > 0) || !std::isfinite(tasks[i].weight)) {
      return absl::InvalidArgumentError(absl::StrCat("task ", i, " ('", tasks[i].name,
                                                     "') has weight ", tasks[i].weight,
                                                     "; weights must be positive and finite"));
    }
    if (!(tasks[i].flops >= 0) || !std::isfinite(tasks[i].flops)) {
      return absl::InvalidArgumentError(absl::StrCat("task ", i, " ('", tasks[i].name,
                                                     "') has flops ", tasks[i].flops,
                                                     "; flops must be finite and >= 0"));
    }
  }
  if (o.trials < 1) {
    return absl::InvalidArgumentError(absl::StrCat("trials must be >= 1, got ", o.trials));
  }
  if (o.per_round < 1) {
    return absl::InvalidArgumentError(absl::StrCat("per_round must be >= 1, got ", o.per_round));
  }
  if (!(o.alpha >= 0 && o.alpha <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("alpha must be in [0, 1], got ", o.alpha));
  }
  if (!(o.beta > 0) || !std::isfinite(o.beta)) {
    return absl::InvalidArgumentError(absl::StrCat("beta must be > 0, got ", o.beta));
  }
  if (o.backward_window_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("backward_window_size must be >= 1, got ", o.backward_window_size));
  }
  if (!(o.eps_greedy >= 0 && o.eps_greedy <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("eps_greedy must be in [0, 1], got ", o.eps_greedy));
  }
  if (o.per_task_early_stopping < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "per_task_early_stopping must be >= 0 (0 = off), got ", o.per_task_early_stopping));
  }
  if (o.early_stopping < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("early_stopping must be >= 0 (0 = off), got ", o.early_stopping));
  }
  return absl::OkStatus();
}

// The scheduler's bookkeeping of one task.
struct TaskTrack {
  double best = kInf;
  // Rounds counted for the forward gradient: restored (estimated) + run.
  int total_rounds = 0;
  // total_rounds when `best` last improved.
  int best_round = 0;
  // Best latency after each round (one entry for a restore).
  std::vector<double> history;
  int group = -1;  // similarity group, -1 when none
};

class Scheduler {
 public:
  Scheduler(const std::vector<SchedulerTask>& tasks, TaskRunner& runner,
            const TaskSchedulerOptions& options)
      : tasks_(tasks), runner_(runner), options_(options), rng_(options.seed) {
    const int64_t n = static_cast<int64_t>(tasks.size());
    per_round_ = static_cast<int>(
        std::min<int64_t>(options.per_round, std::max<int64_t>(1, options.trials / n)));
    track_.resize(tasks.size());
    result_.tasks.resize(tasks.size());
    std::map<std::string, int> group_of_tag;
    for (size_t i = 0; i < tasks.size(); ++i) {
      const std::string& tag = tasks[i].similarity_tag;
      if (tag.empty()) continue;
      auto [it, inserted] = group_of_tag.emplace(tag, static_cast<int>(groups_.size()));
      if (inserted) groups_.emplace_back();
      groups_[it->second].push_back(static_cast<int>(i));
      track_[i].group = it->second;
    }
  }

  absl::StatusOr<TaskSchedulerResult> Run() {
    for (size_t i = 0; i < tasks_.size(); ++i) RETURN_IF_ERROR(RestoreTask(static_cast<int>(i)));
    result_.objective = Objective();

    // Warm-up: one round per task not restored from a log (TVM skips those too).
    for (size_t i = 0; i < tasks_.size() && !result_.interrupted; ++i) {
      if (result_.tasks[i].restored_trials > 0) continue;
      if (result_.trials >= options_.trials) {
        result_.tasks[i].state = TaskState::kNotStarted;
        continue;
      }
      if (StopRequested()) break;
      RETURN_IF_ERROR(RunRound(static_cast<int>(i), /*warmup=*/true, /*random=*/false));
    }
    double best_objective = Objective();
    int64_t best_at = result_.trials;

    int last = -1;  // round-robin position
    while (result_.trials < options_.trials && !result_.interrupted) {
      std::vector<int> schedulable;
      for (size_t i = 0; i < tasks_.size(); ++i) {
        if (result_.tasks[i].state == TaskState::kActive)
          schedulable.push_back(static_cast<int>(i));
      }
      if (schedulable.empty()) break;
      if (StopRequested()) break;
      int task = -1;
      bool random = false;
      if (options_.strategy == AllocationStrategy::kRoundRobin) {
        const int n = static_cast<int>(tasks_.size());
        task = (last + 1) % n;
        while (result_.tasks[task].state != TaskState::kActive) task = (task + 1) % n;
        last = task;
      } else {
        // One draw per step whatever its outcome, so the sequence depends only on the seed.
        const double u = Uniform();
        if (u < options_.eps_greedy) {
          task = schedulable[rng_() % schedulable.size()];
          random = true;
        } else {
          std::vector<double> gradients;
          for (int i : schedulable) gradients.push_back(Gradient(i));
          const auto [lo, hi] = std::minmax_element(gradients.begin(), gradients.end());
          if (*lo == *hi) {
            task = schedulable[rng_() % schedulable.size()];
            random = true;
          } else {
            task = schedulable[lo - gradients.begin()];  // first minimum, as np.argmin
          }
        }
      }
      RETURN_IF_ERROR(RunRound(task, /*warmup=*/false, random));
      AdjustSimilarityGroup(task);

      const double objective = Objective();
      if (objective < best_objective) {
        best_objective = objective;
        best_at = result_.trials;
      } else if (options_.early_stopping > 0 &&
                 result_.trials - best_at >= options_.early_stopping && std::isfinite(objective)) {
        result_.early_stopped = true;
        break;
      }
    }

    for (size_t i = 0; i < tasks_.size(); ++i) {
      result_.tasks[i].best_latency_s = track_[i].best;
      if (result_.tasks[i].state == TaskState::kDead)
        result_.dead_tasks.push_back(static_cast<int>(i));
    }
    result_.objective = Objective();
    return std::move(result_);
  }

 private:
  // options.stop_requested, recorded as an interrupt.
  bool StopRequested() {
    if (options_.stop_requested && options_.stop_requested()) result_.interrupted = true;
    return result_.interrupted;
  }

  absl::Status TaskError(int task, const absl::Status& status) const {
    return absl::Status(status.code(), absl::StrCat("task ", task, " ('", tasks_[task].name,
                                                    "'): ", std::string(status.message())));
  }

  absl::Status CheckLatency(int task, double latency, const char* what) const {
    if (std::isnan(latency) || latency < 0) {
      return absl::InternalError(absl::StrCat("task ", task, " ('", tasks_[task].name, "'): ", what,
                                              " reported best latency ", latency,
                                              " s; expected >= 0 or +inf"));
    }
    return absl::OkStatus();
  }

  absl::Status RestoreTask(int task) {
    absl::StatusOr<RoundResult> r = runner_.Restore(task);
    if (!r.ok()) return TaskError(task, r.status());
    RETURN_IF_ERROR(CheckLatency(task, r->best_latency_s, "restore"));
    if (r->trials <= 0) return absl::OkStatus();
    TaskTrack& t = track_[task];
    TaskAllocation& a = result_.tasks[task];
    a.restored_trials = r->trials;
    t.best = r->best_latency_s;
    // TVM estimates restored rounds as trials / per_round (rounded) and, not knowing when the
    // best was found, the same for the best round; at least one round.
    t.total_rounds = std::max<int>(
        1, static_cast<int>(std::llround(static_cast<double>(r->trials) / per_round_)));
    t.best_round = t.total_rounds;
    t.history.push_back(t.best);
    // The restored trials played the warm-up's part.
    if (!std::isfinite(t.best)) a.state = TaskState::kDead;
    return absl::OkStatus();
  }

  absl::Status RunRound(int task, bool warmup, bool random) {
    const int request =
        static_cast<int>(std::min<int64_t>(per_round_, options_.trials - result_.trials));
    CHECK(request >= 1) << "a round of " << request << " trials";
    absl::StatusOr<RoundResult> r = runner_.TuneRound(task, request);
    if (!r.ok()) return TaskError(task, r.status());
    if (r->trials < 0 || r->trials > request) {
      return absl::InternalError(absl::StrCat("task ", task, " ('", tasks_[task].name,
                                              "'): the runner measured ", r->trials,
                                              " trials in a round of at most ", request));
    }
    RETURN_IF_ERROR(CheckLatency(task, r->best_latency_s, "the runner"));
    TaskTrack& t = track_[task];
    TaskAllocation& a = result_.tasks[task];
    ++t.total_rounds;
    ++a.rounds;
    a.trials += r->trials;
    result_.trials += r->trials;
    if (r->best_latency_s < t.best) {
      t.best = r->best_latency_s;
      t.best_round = t.total_rounds;
    }
    t.history.push_back(t.best);
    if (warmup && !std::isfinite(t.best)) {
      a.state = TaskState::kDead;
    } else if (r->trials == 0) {
      a.state = TaskState::kExhausted;
    } else if (options_.per_task_early_stopping > 0 &&
               t.total_rounds - t.best_round >= options_.per_task_early_stopping) {
      a.state = TaskState::kEarlyStopped;
    }
    if (r->interrupted) result_.interrupted = true;

    SchedulerRound round;
    round.task = task;
    round.trials = r->trials;
    round.total_trials = result_.trials;
    round.objective = Objective();
    round.warmup = warmup;
    round.random = random;
    result_.rounds.push_back(round);
    return absl::OkStatus();
  }

  // Σ w·best over tasks that are not dead; +inf while one of them has no valid schedule.
  double Objective() const {
    double f = 0;
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (result_.tasks[i].state == TaskState::kDead) continue;
      f += tasks_[i].weight * track_[i].best;
    }
    return f;
  }

  // Best throughput (FLOP/s) among the current members of `group`; 0 when none is known.
  double BestGroupThroughput(int group) const {
    double best = 0;
    for (int j : groups_[group]) {
      const double g = track_[j].best;
      if (std::isfinite(g) && g > 0) best = std::max(best, tasks_[j].flops / g);
    }
    return best;
  }

  // TVM GradientScheduler.tune, gradient branch: the expected change of the objective per round
  // of `task` (negative: a decrease). The objective is linear, so ∂f/∂g_i is the weight exactly
  // (TVM takes a finite difference of the objective function).
  double Gradient(int task) const {
    const TaskTrack& t = track_[task];
    const int w = options_.backward_window_size;
    const int h = static_cast<int>(t.history.size());
    double backward = 0;
    if (h - 1 - w >= 0) backward = (t.history[h - 1] - t.history[h - 1 - w]) / w;
    const double g_next_1 = t.best - t.best / std::max(1, t.total_rounds);
    double g_next_2 = kInf;  // TVM: beta * 1e30
    if (t.group >= 0 && groups_[t.group].size() > 1) {
      const double best_throughput = BestGroupThroughput(t.group);
      if (best_throughput > 0) g_next_2 = options_.beta * tasks_[task].flops / best_throughput;
    }
    const double forward = std::min(g_next_1, g_next_2) - t.best;
    return tasks_[task].weight * (options_.alpha * backward + (1 - options_.alpha) * forward);
  }

  // TVM _adjust_similarity_group: a task tuned for more than 5 rounds beyond every other member of
  // its group that still runs below 1/β of the group's best throughput leaves the group.
  void AdjustSimilarityGroup(int task) {
    TaskTrack& t = track_[task];
    if (t.group < 0) return;
    std::vector<int>& members = groups_[t.group];
    if (members.size() <= 1) return;
    const double best_throughput = BestGroupThroughput(t.group);
    const double current = std::isfinite(t.best) && t.best > 0 ? tasks_[task].flops / t.best : 0.0;
    int max_other_rounds = 0;
    for (int j : members) {
      if (j != task) max_other_rounds = std::max(max_other_rounds, track_[j].total_rounds);
    }
    if (current < best_throughput / options_.beta && t.total_rounds > 5 + max_other_rounds) {
      members.erase(std::find(members.begin(), members.end(), task));
      t.group = -1;
    }
  }

  // Uniform in [0, 1) from 53 random bits (the same on every standard library).
  double Uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

  const std::vector<SchedulerTask>& tasks_;
  TaskRunner& runner_;
  const TaskSchedulerOptions& options_;
  std::mt19937_64 rng_;
  int per_round_ = 1;
  std::vector<TaskTrack> track_;
  std::vector<std::vector<int>> groups_;  // members of each similarity group
  TaskSchedulerResult result_;
};

}  // namespace

double SchedulerObjective(const std::vector<SchedulerTask>& tasks,
                          const std::vector<TaskAllocation>& allocations) {
  double f = 0;
  for (size_t i = 0; i < tasks.size() && i < allocations.size(); ++i) {
    if (allocations[i].state == TaskState::kDead) continue;
    f += tasks[i].weight * allocations[i].best_latency_s;
  }
  return f;
}

absl::StatusOr<TaskSchedulerResult> RunTaskScheduler(const std::vector<SchedulerTask>& tasks,
                                                     TaskRunner& runner,
                                                     const TaskSchedulerOptions& options) {
  RETURN_IF_ERROR(CheckOptions(tasks, options));
  Scheduler scheduler(tasks, runner, options);
  return scheduler.Run();
}

std::string TaskSchedulerResult::ToString(const std::vector<SchedulerTask>& names) const {
  std::string out =
      "task  name                      weight    trials  rounds   best_ms  weighted_ms  state\n";
  for (size_t i = 0; i < this->tasks.size(); ++i) {
    const TaskAllocation& a = this->tasks[i];
    const std::string name = i < names.size() ? names[i].name : "";
    const double weight = i < names.size() ? names[i].weight : 1.0;
    std::string trials_text = absl::StrCat(a.trials);
    if (a.restored_trials > 0) absl::StrAppend(&trials_text, "+", a.restored_trials);
    char line[256];
    std::snprintf(line, sizeof(line), "%4zu  %-24s %7s  %8s  %6d  %8s  %11s  %s\n", i, name.c_str(),
                  Fixed(weight, 0).c_str(), trials_text.c_str(), a.rounds,
                  Fixed(a.best_latency_s * 1e3, 4).c_str(),
                  Fixed(weight * a.best_latency_s * 1e3, 4).c_str(), TaskStateName(a.state));
    out += line;
  }
  absl::StrAppend(&out, "objective (sum of weighted latencies): ", Fixed(objective * 1e3, 4),
                  " ms over ", trials, " trials in ", rounds.size(), " rounds");
  if (!dead_tasks.empty()) {
    absl::StrAppend(&out, "; dead tasks (no valid schedule): ", absl::StrJoin(dead_tasks, ", "));
  }
  if (early_stopped) absl::StrAppend(&out, "; stopped early");
  if (interrupted) absl::StrAppend(&out, "; interrupted");
  out += "\n";
  return out;
}

std::string SimilarityTag(const ir::ComputeDAG& dag) {
  std::vector<std::string> tags;
  std::set<std::string> seen;
  for (const ir::Tensor& stage : dag.stages()) {
    if (stage->is_placeholder || stage->reduce == ir::ReduceKind::kNone || stage->tag.empty()) {
      continue;
    }
    if (seen.insert(stage->tag).second) tags.push_back(stage->tag);
  }
  if (tags.empty()) return "";
  const int bucket = static_cast<int>(std::log(dag.Flops() + 1) / std::log(1.618));
  return absl::StrCat(absl::StrJoin(tags, "_"), "_", bucket);
}

std::vector<SchedulerTask> SchedulerTasksOf(const GraphPartition& partition) {
  std::vector<SchedulerTask> tasks;
  tasks.reserve(partition.tasks.size());
  for (const GraphTask& t : partition.tasks) {
    SchedulerTask s;
    s.name = t.name;
    s.weight = t.weight;
    s.flops = t.dag.Flops();
    s.similarity_tag = SimilarityTag(t.dag);
    tasks.push_back(std::move(s));
  }
  return tasks;
}

}  // namespace tilesearch::search
