#include "search/predict.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"
#include "costmodel/features.h"
#include "schedule/matmul_like.h"
#include "search/annotation.h"
#include "search/schedule_transfer.h"
#include "search/sketch.h"
#include "search/tune_context.h"

namespace tilesearch::search {
namespace {

constexpr size_t kMaxNotes = 16;

// A tuned workload near the task's, with its fastest distinct valid records.
struct Source {
  double distance = 0;
  std::vector<const MeasureRecord*> records;  // fastest first
};

// The first matmul-like stage of `dag` (schedule/matmul_like.h), or nullopt.
std::optional<schedule::MatmulLike> MatmulOf(const ir::ComputeDAG& dag) {
  const schedule::State s = schedule::State::Initial(dag);
  for (int i = 0; i < s.num_stages(); ++i) {
    const schedule::Stage& st = s.stage(i);
    if (st.is_placeholder() || st.op->reduce_axes.empty()) continue;
    absl::StatusOr<schedule::MatmulLike> mm = schedule::AnalyzeMatmulLike(*st.op, st.op->body);
    if (mm.ok()) return *std::move(mm);
  }
  return std::nullopt;
}

// The distance of two GEMMs: the sum of |log2(a / b)| over batch, m, n and k (WorkloadDistance's
// measure over the GEMM extents instead of the input shapes).
double GemmDistance(const schedule::MatmulLike& a, const schedule::MatmulLike& b) {
  double d = 0;
  for (auto [x, y] : {std::pair{a.batch, b.batch}, {a.m, b.m}, {a.n, b.n}, {a.k, b.k}}) {
    d += std::fabs(std::log2(static_cast<double>(x) / static_cast<double>(y)));
  }
  return d;
}

// The nearest `options.nearest_workloads` workloads of `records` by `distance` (of a record's
// workload key and workload; +infinity leaves it out), nearest first (ties: the fastest best
// record first), each with up to `options.records_per_workload` distinct schedules.
template <typename Distance>
std::vector<Source> NearestSources(const Target& target, const std::vector<MeasureRecord>& records,
                                   const PredictOptions& options, Distance distance) {
  std::map<std::string, Source> by_key;
  for (const MeasureRecord& r : records) {
    if (!r.valid() || !SameTarget(r.target, target) || r.precision != options.precision) continue;
    const double d = distance(r.workload_key, r.workload);
    if (!std::isfinite(d)) continue;
    Source& s = by_key[r.workload_key];
    s.distance = d;
    s.records.push_back(&r);
  }
  std::vector<Source> sources;
  for (auto& [key, s] : by_key) {
    std::stable_sort(s.records.begin(), s.records.end(),
                     [](const MeasureRecord* a, const MeasureRecord* b) {
                       return a->median_ms() < b->median_ms();
                     });
    std::vector<const MeasureRecord*> distinct;
    std::set<uint64_t> seen;
    for (const MeasureRecord* r : s.records) {
      if (static_cast<int>(distinct.size()) >= options.records_per_workload) break;
      if (seen.insert(StepsHash(r->steps)).second) distinct.push_back(r);
    }
    s.records = std::move(distinct);
    sources.push_back(std::move(s));
  }
  std::stable_sort(sources.begin(), sources.end(), [](const Source& a, const Source& b) {
    if (a.distance != b.distance) return a.distance < b.distance;
    return a.records.front()->median_ms() < b.records.front()->median_ms();
  });
  if (static_cast<int>(sources.size()) > options.nearest_workloads) {
    sources.resize(options.nearest_workloads);
  }
  return sources;
}

// Twins of `workload`: the same operator, dtype and attributes (WorkloadDistance).
std::vector<Source> TwinSources(const schedule::Workload& workload, const Target& target,
                                const std::vector<MeasureRecord>& records,
                                const PredictOptions& options) {
  return NearestSources(target, records, options,
                        [&](const std::string&, const schedule::Workload& w) {
                          return WorkloadDistance(workload, w);
                        });
}

// Relatives of `workload` (whose DAG is `dag`): workloads of its dtype that are not twins but
// whose DAG has a matmul-like stage, as `dag` does (a dense with bias and GELU and a dense with
// bias only, or a matmul), by GemmDistance. Their step lists transfer where they replay on `dag`
// (TransferSteps fails on another structure). Empty when `dag` has no matmul-like stage.
std::vector<Source> RelativeSources(const ir::ComputeDAG& dag, const schedule::Workload& workload,
                                    const Target& target, const std::vector<MeasureRecord>& records,
                                    const PredictOptions& options) {
  const std::optional<schedule::MatmulLike> mine = MatmulOf(dag);
  if (!mine.has_value()) return {};
  std::map<std::string, double> by_key;  // each workload's DAG is built once
  return NearestSources(
      target, records, options, [&](const std::string& key, const schedule::Workload& w) {
        constexpr double kFar = std::numeric_limits<double>::infinity();
        if (w.args.dtype != workload.args.dtype || std::isfinite(WorkloadDistance(workload, w))) {
          return kFar;
        }
        auto [it, inserted] = by_key.try_emplace(key, kFar);
        if (inserted) {
          absl::StatusOr<ir::ComputeDAG> other = w.Build();
          std::optional<schedule::MatmulLike> theirs;
          if (other.ok()) theirs = MatmulOf(*other);
          if (theirs.has_value()) it->second = GemmDistance(*mine, *theirs);
        }
        return it->second;
      });
}

struct Ranked {
  Candidate candidate;
  std::string origin;
};

// The tensor_core step of `steps` as text, "" when there is none.
std::string TensorCoreText(const std::vector<schedule::Step>& steps) {
  for (const schedule::Step& st : steps) {
    if (std::holds_alternative<schedule::TensorCoreStep>(st)) return schedule::StepToString(st);
  }
  return "";
}

// The transferred candidates in (distance, source time) order, distinct by schedule, each
// followed by its TransferVariants; `*variants` counts the latter.
std::vector<Ranked> Transfer(const std::vector<Source>& sources, const TuneContext& ctx,
                             std::vector<std::string>* notes, int* variants) {
  std::vector<Ranked> out;
  std::set<uint64_t> seen;
  for (const Source& s : sources) {
    for (const MeasureRecord* r : s.records) {
      const std::string from = absl::StrCat("trial ", r->trial, " of ", r->workload.ToString());
      absl::StatusOr<schedule::State> state = TransferSteps(r->steps, ctx.dag());
      std::vector<schedule::State> adapted;
      if (state.ok()) adapted = TransferVariants(*state, ctx.dag(), ctx.target());
      absl::StatusOr<Candidate> c =
          state.ok() ? LowerCandidate(*std::move(state), ctx) : state.status();
      if (!c.ok()) {
        if (notes->size() < kMaxNotes)
          notes->push_back(absl::StrCat(from, ": ", c.status().message()));
      } else if (seen.insert(StepsHash(c->state.steps())).second) {
        out.push_back(Ranked{
            *std::move(c), absl::StrFormat("transferred from %s (%.4g ms)", from, r->median_ms())});
      }
      // A variant that does not lower (a target limit the step's own checks do not see) is
      // dropped without a note: the transferred copy's note, if any, says why the record failed.
      for (schedule::State& v : adapted) {
        if (!seen.insert(StepsHash(v.steps())).second) continue;
        const std::string tc = TensorCoreText(v.steps());
        absl::StatusOr<Candidate> vc = LowerCandidate(std::move(v), ctx);
        if (!vc.ok()) continue;
        out.push_back(Ranked{*std::move(vc), absl::StrFormat("adapted from %s (%.4g ms) to %s",
                                                             from, r->median_ms(), tc)});
        ++*variants;
      }
    }
  }
  return out;
}

// Up to `n` fresh samples of the task's sketches.
absl::StatusOr<std::vector<Ranked>> Sample(int n, TuneContext& ctx) {
  std::vector<Ranked> out;
  if (n <= 0) return out;
  ASSIGN_OR_RETURN(std::vector<schedule::State> sketches, GenerateSketches(ctx));
  for (schedule::State& s : SampleInitialPopulation(sketches, n, ctx)) {
    absl::StatusOr<Candidate> c = LowerCandidate(std::move(s), ctx);
    if (c.ok()) out.push_back(Ranked{*std::move(c), "sampled"});
  }
  return out;
}

absl::Status ValidateOptions(const PredictOptions& o) {
  if (o.nearest_workloads < 1 || o.records_per_workload < 1 || o.fresh_samples < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "predict: nearest_workloads and records_per_workload must be >= 1 and fresh_samples >= 0, "
        "got ",
        o.nearest_workloads, ", ", o.records_per_workload, ", ", o.fresh_samples));
  }
  return absl::OkStatus();
}

}  // namespace

double WorkloadDistance(const schedule::Workload& a, const schedule::Workload& b) {
  constexpr double kFar = std::numeric_limits<double>::infinity();
  if (a.op != b.op || a.args.dtype != b.args.dtype || a.args.attrs != b.args.attrs ||
      a.args.shapes.size() != b.args.shapes.size() || !(a.nodes == b.nodes)) {
    return kFar;
  }
  double d = 0;
  for (size_t i = 0; i < a.args.shapes.size(); ++i) {
    if (a.args.shapes[i].size() != b.args.shapes[i].size()) return kFar;
    for (size_t k = 0; k < a.args.shapes[i].size(); ++k) {
      d += std::fabs(std::log2(static_cast<double>(a.args.shapes[i][k]) /
                               static_cast<double>(b.args.shapes[i][k])));
    }
  }
  return d;
}

absl::StatusOr<PredictedSchedule> PredictSchedule(const ir::ComputeDAG& dag,
                                                  const schedule::Workload& workload,
                                                  const Target& target,
                                                  const std::vector<MeasureRecord>& records,
                                                  costmodel::CostModel* model,
                                                  const PredictOptions& options) {
  RETURN_IF_ERROR(ValidateOptions(options));
  TuneContext ctx(dag, target, options.search, options.seed, options.sketch);
  PredictedSchedule out;
  std::vector<Ranked> candidates =
      Transfer(TwinSources(workload, target, records, options), ctx, &out.notes, &out.variants);
  // Relatives only where no twin transfers: a twin's record was measured on this structure.
  if (candidates.empty()) {
    candidates = Transfer(RelativeSources(dag, workload, target, records, options), ctx, &out.notes,
                          &out.variants);
    out.related = !candidates.empty();
  }
  out.transferred = static_cast<int>(candidates.size()) - out.variants;
  if (model == nullptr) {
    if (candidates.empty()) {
      return absl::NotFoundError(absl::StrCat(
          "no tuned workload of ", workload.op, " ", ir::TypeName(workload.args.dtype), " on ",
          target.ToString(), " to transfer from and no cost model to rank fresh samples",
          out.notes.empty() ? "" : absl::StrCat(" (", out.notes.front(), ")")));
    }
    out.state = candidates.front().candidate.state;
    out.lowered = candidates.front().candidate.lowered;
    out.origin = candidates.front().origin;
    out.score = std::nan("");
    return out;
  }
  // Fresh samples compete only where nothing transfers: a transferred record carries a
  // measurement, a sample only the model's extrapolation. Measured on the H200 (bench/NOTES.md):
  // over four tensor-core matmuls predicted from the other shapes' logs, the model's pick among
  // transfers and samples was a sample every time, at 0.48-0.59x the tuned best, while the
  // nearest transfer reached 0.85-1.19x.
  if (candidates.empty()) {
    ASSIGN_OR_RETURN(std::vector<Ranked> sampled, Sample(options.fresh_samples, ctx));
    out.sampled = static_cast<int>(sampled.size());
    for (Ranked& r : sampled) candidates.push_back(std::move(r));
  }
  if (candidates.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no valid candidate: nothing transferred or sampled for ", workload.ToString(),
                     " lowers on ", target.ToString()));
  }
  std::vector<costmodel::ProgramFeatures> programs(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    absl::StatusOr<costmodel::StoreFeatures> f = costmodel::ExtractLoweredFeatures(
        candidates[i].candidate.state, *candidates[i].candidate.lowered, target);
    if (f.ok()) programs[i].stores = *std::move(f);
  }
  ASSIGN_OR_RETURN(std::vector<double> scores, model->Predict(programs));
  // The first best score wins (a tie keeps the nearer transfer).
  size_t best = 0;
  for (size_t i = 1; i < scores.size(); ++i) {
    if (scores[i] > scores[best]) best = i;
  }
  out.state = candidates[best].candidate.state;
  out.lowered = candidates[best].candidate.lowered;
  out.origin = candidates[best].origin;
  out.score = scores[best];
  return out;
}

}  // namespace tilesearch::search
