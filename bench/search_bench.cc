// The search phase of one tuning round, timed without measuring: what the tuner's SearchRound does
// (local search around the best measured states, the evolutionary search, the model's scores of
// the round) for a task whose records come from a tuning log. The model starts from an initial
// model file (the shipped pretrained one for the log's target) and is trained on the log's
// records, as a resumed tuning job would be. Prints the time split per round and a digest of the
// round's candidates (their StepsHash and predicted scores, in order), so that two builds can be
// compared for identical results. A cuda task needs no GPU here: nothing is compiled or run.
//
//   search_bench --log LOG.jsonl --model-init models/default-cuda-sm_90.model [--rounds 2]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "costmodel/features.h"
#include "costmodel/xgboost_model.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "search/evolutionary_search.h"
#include "search/local_search.h"
#include "search/log_io.h"
#include "search/measure_record.h"
#include "search/sketch.h"
#include "search/tune_context.h"

namespace ts = tilesearch;
using ts::search::Candidate;
using ts::search::MeasureRecord;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string log;
  std::string model_init;
  int rounds = 2;
  int per_round = 64;
  int population = 2048;
  int generations = 4;
  int threads = 0;
  int max_records = 0;
  uint64_t seed = 1;
  double local_search_fraction = 0.25;
  bool digest = false;
};

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The task's records with their replayed and lowered candidates (as the tuner resumes a log).
struct Task {
  std::vector<MeasureRecord> records;
  std::vector<std::optional<Candidate>> candidates;
  std::unordered_set<uint64_t> measured;
};

Task LoadTask(const std::vector<MeasureRecord>& records, const ts::search::TuneContext& ctx) {
  Task t;
  for (const MeasureRecord& r : records) {
    std::optional<Candidate> c;
    absl::StatusOr<ts::schedule::State> state = ts::schedule::ReplaySteps(ctx.dag(), r.steps);
    if (state.ok()) {
      c = Candidate{*std::move(state), nullptr, 0};
      absl::StatusOr<ts::schedule::LoweredKernel> k =
          ts::schedule::Lower(ctx.dag(), c->state, ctx.target());
      if (k.ok()) c->lowered = std::make_shared<const ts::schedule::LoweredKernel>(*std::move(k));
    }
    t.measured.insert(ts::search::RecordStateHash(r));
    t.records.push_back(r);
    t.candidates.push_back(std::move(c));
  }
  return t;
}

std::vector<ts::costmodel::TrainingSample> Samples(const Task& t,
                                                   const ts::search::TuneContext& ctx) {
  std::vector<ts::costmodel::TrainingSample> out;
  for (size_t i = 0; i < t.records.size(); ++i) {
    ts::costmodel::TrainingSample s;
    s.throughput = ts::search::RecordThroughput(t.records[i], ctx.dag());
    const std::optional<Candidate>& c = t.candidates[i];
    if (c && c->lowered) {
      absl::StatusOr<ts::costmodel::StoreFeatures> f =
          ts::costmodel::ExtractLoweredFeatures(c->state, *c->lowered, ctx.target());
      if (f.ok()) s.features.stores = *std::move(f);
    }
    out.push_back(std::move(s));
  }
  return out;
}

// The best measured candidates, best first (the tuner's BestCandidates).
std::vector<Candidate> Best(const Task& t, const ts::search::SearchOptions& so) {
  std::vector<size_t> valid;
  for (size_t i = 0; i < t.records.size(); ++i) {
    if (t.records[i].valid() && !t.records[i].untuned) valid.push_back(i);
  }
  std::stable_sort(valid.begin(), valid.end(), [&](size_t a, size_t b) {
    return t.records[a].median_ms() < t.records[b].median_ms();
  });
  const size_t n = std::max(static_cast<size_t>(so.init_measured_ratio * so.population),
                            static_cast<size_t>(so.local_search_states));
  std::vector<Candidate> best;
  for (size_t i = 0; i < valid.size() && best.size() < n; ++i) {
    if (t.candidates[valid[i]]) best.push_back(*t.candidates[valid[i]]);
  }
  return best;
}

// One round's search, timed; the round's candidates are added to `measured` (as if measured).
int Round(int round, const Args& args, ts::search::TuneContext& ctx,
          const std::vector<ts::schedule::State>& sketches, ts::costmodel::CostModel& model,
          const std::vector<Candidate>& best, std::unordered_set<uint64_t>& measured) {
  const Clock::time_point t0 = Clock::now();
  const int n = args.per_round;
  const int n_local = static_cast<int>(std::ceil(args.local_search_fraction * n - 1e-9));
  std::vector<Candidate> cands;
  if (n_local > 0) {
    absl::StatusOr<std::vector<Candidate>> local = ts::search::LocalSearchCandidates(
        ctx, best, measured, n_local, ctx.options().local_search_states, model);
    if (!local.ok()) return std::cerr << "local search: " << local.status() << "\n", 1;
    cands = *std::move(local);
  }
  const double local_s = SecondsSince(t0);
  std::unordered_set<uint64_t> exclude = measured;
  for (const Candidate& c : cands) exclude.insert(ts::search::StepsHash(c.state.steps()));
  ts::search::SearchProfile prof;
  const Clock::time_point te = Clock::now();
  absl::StatusOr<std::vector<Candidate>> evolved = ts::search::EvolutionarySearch(
      ctx, sketches, model, exclude, best, n - static_cast<int>(cands.size()), &prof);
  if (!evolved.ok()) return std::cerr << "search: " << evolved.status() << "\n", 1;
  const double evolution_s = SecondsSince(te);
  for (Candidate& c : *evolved) cands.push_back(std::move(c));
  const Clock::time_point ts0 = Clock::now();
  absl::StatusOr<std::vector<double>> scores = ts::search::ScoreCandidates(cands, ctx, model);
  if (!scores.ok()) return std::cerr << "score: " << scores.status() << "\n", 1;
  const double score_s = SecondsSince(ts0);
  absl::PrintF(
      "round %d: search %.2f s (local %.2f, evolution %.2f (returned after %.2f) [init %.2f evolve "
      "%.2f predict %.2f "
      "rank %.2f, in parallel %.2f; cpu annotate %.2f mutate %.2f features %.2f], score %.2f) "
      "candidates %d "
      "predicted %d known %d cache hits %d\n",
      round, SecondsSince(t0), local_s, prof.total_s, evolution_s, prof.init_s, prof.evolve_s,
      prof.predict_s, prof.rank_s, prof.parallel_s, prof.annotate_cpu_s, prof.mutate_cpu_s,
      prof.features_cpu_s, score_s, static_cast<int>(cands.size()),
      static_cast<int>(prof.predicted), static_cast<int>(prof.known_children),
      static_cast<int>(prof.lowering_cache_hits));
  for (size_t i = 0; i < cands.size(); ++i) {
    const uint64_t h = ts::search::StepsHash(cands[i].state.steps());
    if (args.digest) absl::PrintF("  %d %016x %.17g\n", static_cast<int>(i), h, (*scores)[i]);
    measured.insert(h);
  }
  return 0;
}

int Run(const Args& args) {
  absl::StatusOr<ts::search::LogContents> log = ts::search::ReadLog(args.log);
  if (!log.ok() || log->records.empty()) {
    std::cerr << "search_bench: no records in " << args.log << "\n";
    return 2;
  }
  std::vector<MeasureRecord> records = log->records;
  if (args.max_records > 0 && static_cast<int>(records.size()) > args.max_records) {
    records.resize(args.max_records);
  }
  absl::StatusOr<ts::ir::ComputeDAG> dag = records[0].workload.Build();
  if (!dag.ok()) return std::cerr << dag.status() << "\n", 2;
  ts::search::SearchOptions so;
  so.population = args.population;
  so.generations = args.generations;
  so.num_threads = args.threads;
  so.precision = records[0].precision;
  ts::search::TuneContext ctx(
      std::make_shared<const ts::search::SearchTask>(*dag, records[0].target, so.precision), so,
      args.seed);
  std::erase_if(records,
                [&](const MeasureRecord& r) { return r.workload_key != ctx.workload_key(); });
  Clock::time_point t = Clock::now();
  Task task = LoadTask(records, ctx);
  ts::costmodel::XGBoostModel model(ts::costmodel::OnlineModelOptions(args.seed, 0));
  if (!args.model_init.empty()) {
    absl::Status s = model.SetInitialModel(args.model_init, ctx.target());
    if (!s.ok()) return std::cerr << s << "\n", 2;
  }
  if (absl::Status s = model.Update(Samples(task, ctx)); !s.ok()) return std::cerr << s << "\n", 2;
  absl::StatusOr<std::vector<ts::schedule::State>> sketches = ts::search::GenerateSketches(ctx);
  if (!sketches.ok()) return std::cerr << sketches.status() << "\n", 2;
  absl::PrintF("%s: %d records, %d sketches, setup (replay, lower, train) %.2f s\n",
               ctx.workload_key(), static_cast<int>(task.records.size()),
               static_cast<int>(sketches->size()), SecondsSince(t));
  const std::vector<Candidate> best = Best(task, so);
  for (int r = 1; r <= args.rounds; ++r) {
    if (int rc = Round(r, args, ctx, *sketches, model, best, task.measured); rc != 0) return rc;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"time the search phase of tuning rounds (no measurement)"};
  app.add_option("--log", args.log, "tuning log whose records the task resumes from")->required();
  app.add_option("--model-init", args.model_init, "initial XGBoost model file");
  app.add_option("--rounds", args.rounds, "search rounds");
  app.add_option("--per-round", args.per_round, "candidates per round");
  app.add_option("--population", args.population, "population");
  app.add_option("--generations", args.generations, "generations");
  app.add_option("--threads", args.threads, "search worker threads (0: all)");
  app.add_option("--max-records", args.max_records, "use only the first N records (0: all)");
  app.add_option("--seed", args.seed, "seed of the search and the model");
  app.add_option("--local-search-fraction", args.local_search_fraction, "local search share");
  app.add_flag("--digest", args.digest, "print each candidate's hash and score");
  CLI11_PARSE(app, argc, argv);
  return Run(args);
}
