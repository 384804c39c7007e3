// Mutation and crossover (TVM v0.19 mutation rules; crossover after Ansor §5.1; see mutation.h).
#include "search/mutation.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/matmul_like.h"
#include "search/measure_record.h"
#include "search/mutation_internal.h"
#include "search/sketch_rules.h"
#include "search/tensor_core_space.h"

namespace tilesearch::search {

using internal::Pick;
using schedule::ComputeLocation;
using schedule::IteratorAnnotation;
using schedule::IteratorKind;
using schedule::State;
using schedule::Step;

namespace {

constexpr int kTries = 8;
// Extra tries for edits rejected by a cheap check before replay and lowering.
constexpr int kCheapTries = 24;

absl::Status NotApplicable(const char* name, const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat(name, " not applicable: ", why));
}

// The divisors of n in increasing order, in O(sqrt(n)) (a logged split may be as long as 2^40).
std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t i = 1; i <= n / i; ++i) {
    if (n % i != 0) continue;
    small.push_back(i);
    if (i != n / i) large.push_back(n / i);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

using internal::FinishEdit;
using internal::IsVectorSplit;

// One factor move on split `sp`: a random divisor factor of one level to another; false when none
// applies.
bool MoveFactor(schedule::SplitStep& sp, const AnnotationOptions& options, std::mt19937_64& rng) {
  internal::SplitLevels levels = internal::LevelsOf(sp);
  const std::vector<int64_t>& v = levels.levels;
  const int n = static_cast<int>(v.size());
  if (n < 2) return false;
  std::vector<int> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int k = 0; k < n; ++k) {
    const int src = perm[k];
    const int dst = perm[(k + 1) % n];
    if (v[src] <= 1) continue;
    std::vector<int64_t> d = Divisors(v[src]);
    const int64_t f = d[1 + Pick(rng, static_cast<int64_t>(d.size()) - 1)];
    std::vector<int64_t> w = v;
    w[src] /= f;
    w[dst] *= f;
    if (!internal::InnermostAllowed(v, w, options)) continue;
    internal::SetLevels(sp, {w, levels.divisible});
    return true;
  }
  return false;
}

// A step without its decisions: split lengths and pragma values cleared.
Step StripDecisions(Step s) {
  if (auto* sp = std::get_if<schedule::SplitStep>(&s)) {
    for (auto& l : sp->lengths) l = 0;
  } else if (auto* p = std::get_if<schedule::PragmaStep>(&s)) {
    p->auto_unroll_max_step = 0;
    if (p->software_pipeline >= 0) p->software_pipeline = 0;  // the kind stays: structure
  }
  return s;
}

// Leading iterators from `first` that may join a parallel fuse.
int MaxParallelFuse(const State& s, int sid, int first) {
  const auto& st = s.stage(sid);
  int n = 0;
  for (int i = first; i < static_cast<int>(st.iters.size()); ++i) {
    const auto& it = st.iters[i];
    if (it.kind != IteratorKind::kSpace || it.annotation != IteratorAnnotation::kNone) break;
    ++n;
    bool attach = false;
    for (int j = 0; j < s.num_stages(); ++j) {
      const auto& a = s.stage(j);
      attach |= a.location == ComputeLocation::kAttached && a.attach_stage == sid &&
                a.attach_iter == it.name;
    }
    if (attach) break;
  }
  return n;
}

// Renumbers iterator ids > `first` of stage `sid` in `step` by `delta`.
void ShiftIters(Step& step, int sid, int first, int delta) {
  auto shift = [&](int& id) {
    if (id > first) id += delta;
  };
  if (auto* a = std::get_if<schedule::AnnotationStep>(&step); a && a->stage_id == sid) {
    shift(a->iter_id);
  } else if (auto* f = std::get_if<schedule::FuseStep>(&step); f && f->stage_id == sid) {
    for (int& id : f->fused_ids) shift(id);
  } else if (auto* sp = std::get_if<schedule::SplitStep>(&step); sp && sp->stage_id == sid) {
    shift(sp->iter_id);
  } else if (auto* p = std::get_if<schedule::PragmaStep>(&step); p && p->stage_id == sid) {
    shift(p->iter_id);
  } else if (auto* r = std::get_if<schedule::ReorderStep>(&step); r && r->stage_id == sid) {
    for (int& id : r->after_ids) shift(id);
  } else if (auto* c = std::get_if<schedule::ComputeAtStep>(&step);
             c && c->target_stage_id == sid) {
    shift(c->target_iter_id);
  }
}

}  // namespace

absl::StatusOr<Candidate> MutateTileSize(const State& state, TuneContext& ctx) {
  const Target& target = ctx.target();
  std::mt19937_64& rng = ctx.rng();
  const AnnotationOptions& options = ctx.annotation();
  const std::vector<Step>& steps = state.steps();
  std::vector<int> cands;
  for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
    if (std::holds_alternative<schedule::TensorCoreStep>(steps[i])) {
      cands.push_back(i);
      continue;
    }
    const auto* sp = std::get_if<schedule::SplitStep>(&steps[i]);
    if (sp == nullptr) continue;
    if (target.is_gpu() && IsVectorSplit(steps, i)) {
      cands.push_back(i);
      continue;
    }
    if (internal::HasMovableFactors(*sp)) cands.push_back(i);
  }
  if (cands.empty()) return NotApplicable("MutateTileSize", "no split with a known extent > 1");
  absl::Status last = NotApplicable("MutateTileSize", "no factor could be moved");
  // Edits that break the GPU tile limits are rejected before replay and lowering (cheap), and
  // count against a larger budget than the full validations.
  int cheap_rejections = 0;
  for (int t = 0; t < kTries; ++t) {
    const int i = cands[Pick(rng, static_cast<int64_t>(cands.size()))];
    std::vector<Step> mutated = steps;
    if (auto* tc = std::get_if<schedule::TensorCoreStep>(&mutated[i])) {
      // The tile sizes of a tensor-core stage are decisions of its one step.
      if (tc->stage_id < 0 || tc->stage_id >= state.num_stages()) continue;
      const schedule::Stage& st = state.stage(tc->stage_id);
      absl::StatusOr<schedule::MatmulLike> mm = schedule::AnalyzeMatmulLike(*st.op, st.op->body);
      if (!mm.ok() || !MutateTensorCoreStep(*tc, *mm, state, target, rng)) continue;
      absl::StatusOr<Candidate> out = FinishEdit(ctx, mutated);
      if (out.ok()) return out;
      last = out.status();
      continue;
    }
    auto& sp = std::get<schedule::SplitStep>(mutated[i]);
    if (IsVectorSplit(steps, i)) {
      // Another width of the cooperative fetch that divides the fused extent (known only from
      // the replayed prefix: the split of an attached stage records no extent).
      std::vector<int64_t> c;
      for (int64_t w : internal::VectorWidthCandidates(ctx, steps, i)) {
        if (w != *sp.lengths[0]) c.push_back(w);
      }
      if (c.empty()) continue;
      internal::SetVectorWidth(mutated, i, c[Pick(rng, static_cast<int64_t>(c.size()))]);
    } else if (internal::IsThreadSplit(steps, i)) {
      if (!target.is_gpu()) continue;
      const std::vector<int64_t> c = internal::ThreadCountCandidates(sp, options);
      if (c.empty()) continue;
      sp.lengths[0] = c[Pick(rng, static_cast<int64_t>(c.size()))];
    } else if (internal::IsBlockReductionSplit(steps, i)) {
      const std::vector<int64_t> c = internal::OtherBlockChunks(sp, options);
      if (c.empty()) continue;
      sp.lengths[0] = c[Pick(rng, static_cast<int64_t>(c.size()))];
    } else if (!MoveFactor(sp, options, rng)) {
      continue;
    } else if (!internal::GpuTileRunFits(ctx, mutated, i)) {
      last = NotApplicable("MutateTileSize", "factor moves broke the GPU tile limits");
      if (++cheap_rejections <= kCheapTries) --t;
      continue;
    } else {
      internal::RefreshLaterSplitExtents(ctx.dag(), mutated, i);
    }
    absl::StatusOr<Candidate> out = FinishEdit(ctx, mutated);
    if (out.ok()) return out;
    last = out.status();
  }
  return last;
}

absl::StatusOr<Candidate> MutateAutoUnroll(const State& state, TuneContext& ctx) {
  const Target& target = ctx.target();
  std::mt19937_64& rng = ctx.rng();
  const AnnotationOptions& options = ctx.annotation();
  const std::vector<Step>& steps = state.steps();
  std::vector<int> cands;
  for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
    if (std::holds_alternative<schedule::PragmaStep>(steps[i])) cands.push_back(i);
  }
  if (cands.empty()) return NotApplicable("MutateAutoUnroll", "no pragma");
  const auto& values = target.is_gpu() ? options.gpu_unroll_steps : options.cpu_unroll_steps;
  absl::Status last = NotApplicable("MutateAutoUnroll", "no other unroll value");
  for (int t = 0; t < kTries; ++t) {
    std::vector<Step> mutated = steps;
    auto& p = std::get<schedule::PragmaStep>(mutated[cands[Pick(rng, cands.size())]]);
    if (p.software_pipeline >= 0) {
      // A software_pipeline pragma: one of the other values 0..gpu_max_software_pipeline.
      const int n = internal::MaxSoftwarePipeline(p.software_pipeline, options) + 1;
      if (n < 2) return NotApplicable("MutateAutoUnroll", "one software_pipeline value");
      p.software_pipeline = (p.software_pipeline + 1 + static_cast<int>(Pick(rng, n - 1))) % n;
      absl::StatusOr<Candidate> out = FinishEdit(ctx, mutated);
      if (out.ok()) return out;
      last = out.status();
      continue;
    }
    std::vector<int64_t> other;
    for (int64_t v : values) {
      if (v != p.auto_unroll_max_step) other.push_back(v);
    }
    if (other.empty()) continue;
    p.auto_unroll_max_step = other[Pick(rng, static_cast<int64_t>(other.size()))];
    absl::StatusOr<Candidate> out = FinishEdit(ctx, mutated);
    if (out.ok()) return out;
    last = out.status();
  }
  return last;
}

absl::StatusOr<Candidate> MutateComputeLocation(const State& state, TuneContext& ctx) {
  const ir::ComputeDAG& dag = ctx.dag();
  const Target& target = ctx.target();
  std::mt19937_64& rng = ctx.rng();
  if (target.is_gpu()) return NotApplicable("MutateComputeLocation", "cpu only");
  const std::vector<Step>& steps = state.steps();
  // Prefix states before each compute_at of an untiled stage, with its candidates.
  struct Cand {
    int step;
    std::vector<std::pair<int, int>> locations;
  };
  std::vector<Cand> cands;
  State s = State::Initial(dag);
  for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
    if (const auto* ca = std::get_if<schedule::ComputeAtStep>(&steps[i])) {
      bool tiled = false;
      for (const auto& it : s.stage(ca->stage_id).iters)
        tiled |= it.name.find('.') != std::string::npos;
      if (!tiled && !NeedsMultiLevelTiling(s, ca->stage_id)) {
        std::vector<std::pair<int, int>> loc;
        for (auto c : internal::ComputeLocationCandidates(s, ca->stage_id)) {
          if (c != std::make_pair(ca->target_stage_id, ca->target_iter_id)) loc.push_back(c);
        }
        if (!loc.empty()) cands.push_back({i, loc});
      }
    }
    ASSIGN_OR_RETURN(s, schedule::ApplyStep(s, steps[i]));
  }
  if (cands.empty()) return NotApplicable("MutateComputeLocation", "no movable compute_at");
  absl::Status last = NotApplicable("MutateComputeLocation", "no valid location");
  for (int t = 0; t < kTries; ++t) {
    const Cand& c = cands[Pick(rng, static_cast<int64_t>(cands.size()))];
    std::vector<Step> mutated = steps;
    auto& ca = std::get<schedule::ComputeAtStep>(mutated[c.step]);
    const auto loc = c.locations[Pick(rng, static_cast<int64_t>(c.locations.size()))];
    ca.target_stage_id = loc.first;
    ca.target_iter_id = loc.second;
    absl::StatusOr<Candidate> out = FinishEdit(ctx, mutated);
    if (out.ok()) return out;
    last = out.status();
  }
  return last;
}

absl::StatusOr<Candidate> MutateParallel(const State& state, TuneContext& ctx) {
  const ir::ComputeDAG& dag = ctx.dag();
  const Target& target = ctx.target();
  std::mt19937_64& rng = ctx.rng();
  if (target.is_gpu()) return NotApplicable("MutateParallel", "cpu only");
  const std::vector<Step>& steps = state.steps();
  struct Cand {
    int annotation;  // index of the parallel AnnotationStep
    int fuse;        // index of its FuseStep, or -1
    int first;       // first fused iterator
    int count;       // fused iterators now
    int max;         // fusible iterators
  };
  std::vector<Cand> cands;
  State s = State::Initial(dag);
  State before_fuse = s;
  for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
    const auto* an = std::get_if<schedule::AnnotationStep>(&steps[i]);
    if (an && an->annotation == IteratorAnnotation::kParallel) {
      const auto* fu = i > 0 ? std::get_if<schedule::FuseStep>(&steps[i - 1]) : nullptr;
      if (fu && fu->stage_id == an->stage_id && !fu->fused_ids.empty() &&
          fu->fused_ids.front() == an->iter_id) {
        const int max = MaxParallelFuse(before_fuse, an->stage_id, an->iter_id);
        cands.push_back({i, i - 1, an->iter_id, static_cast<int>(fu->fused_ids.size()), max});
      } else {
        const int max = MaxParallelFuse(s, an->stage_id, an->iter_id);
        cands.push_back({i, -1, an->iter_id, 1, max});
      }
    }
    before_fuse = s;
    ASSIGN_OR_RETURN(s, schedule::ApplyStep(s, steps[i]));
  }
  std::vector<Cand> usable;
  for (const Cand& c : cands) {
    if (c.max >= 2) usable.push_back(c);
  }
  if (usable.empty()) return NotApplicable("MutateParallel", "no parallel loop can change");
  absl::Status last = NotApplicable("MutateParallel", "no valid parallel extent");
  for (int t = 0; t < kTries; ++t) {
    const Cand& c = usable[Pick(rng, static_cast<int64_t>(usable.size()))];
    const int count = 1 + static_cast<int>(Pick(rng, c.max - 1));
    const int new_count = count >= c.count ? count + 1 : count;  // uniform over [1, max] \ {count}
    if (new_count > c.max) continue;
    const int sid = std::get<schedule::AnnotationStep>(steps[c.annotation]).stage_id;
    std::vector<Step> mutated;
    for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
      if (i == c.fuse) continue;
      if (i == c.annotation) {
        if (new_count > 1) {
          schedule::FuseStep f{sid, {}};
          for (int k = 0; k < new_count; ++k) f.fused_ids.push_back(c.first + k);
          mutated.push_back(f);
        }
        mutated.push_back(steps[i]);
        continue;
      }
      Step step = steps[i];
      if (i > c.annotation) ShiftIters(step, sid, c.first, c.count - new_count);
      mutated.push_back(step);
    }
    absl::StatusOr<Candidate> out = FinishEdit(ctx, mutated);
    if (out.ok()) return out;
    last = out.status();
  }
  return last;
}

uint64_t StructureHash(const std::vector<Step>& steps) {
  std::string text;
  for (const Step& step : steps) {
    text += StepToString(StripDecisions(step));
    text += ';';
  }
  return ir::Fnv1a64(text);
}

uint64_t TileFamilyHash(const std::vector<Step>& steps, bool gpu) {
  std::string text;
  for (const Step& step : steps) {
    // A tensor-core state has no multi-level split of its matmul stage: its block tile, warp
    // tile and instruction kind (wgmma or mma.sync) are its family. Without them every
    // tensor-core state was one family, so max_family_fraction capped all of them together at a
    // quarter of a round's model-ranked picks (bench/NOTES.md). Repacked operands make another
    // kernel (its fill and extra launches), so another family.
    if (const auto* tc = std::get_if<schedule::TensorCoreStep>(&step)) {
      absl::StrAppend(&text, "tc", tc->stage_id, ":", tc->block_m, "x", tc->block_n, "/",
                      tc->warp_m, "x", tc->warp_n, tc->warpgroup ? "wg" : "",
                      tc->repack ? "rp" : "", ";");
      continue;
    }
    const auto* sp = std::get_if<schedule::SplitStep>(&step);
    if (sp == nullptr || sp->lengths.size() < 3) continue;
    int64_t span = 1;
    for (const auto& l : sp->lengths) span *= l.value_or(0);
    const auto& level = gpu ? sp->lengths[1] : sp->lengths.back();
    absl::StrAppend(&text, sp->stage_id, ":", sp->iter_id, "=", span, "/", level.value_or(0), ";");
  }
  return ir::Fnv1a64(text);
}

absl::StatusOr<Candidate> CrossoverTileSizes(const State& parent_a, const State& parent_b,
                                             TuneContext& ctx) {
  std::mt19937_64& rng = ctx.rng();
  const std::vector<Step>& a = parent_a.steps();
  const std::vector<Step>& b = parent_b.steps();
  if (a.size() != b.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("crossover: parents have ", a.size(), " and ", b.size(), " steps"));
  }
  // Same structure: equal steps once split lengths and pragma values are ignored.
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(StripDecisions(a[i]) == StripDecisions(b[i]))) {
      return absl::InvalidArgumentError(
          absl::StrCat("crossover: parents differ in structure at step ", i, ": ",
                       StepToString(a[i]), " vs ", StepToString(b[i])));
    }
  }
  // The decisions (split lengths, pragma values) that differ: with equal structure, exactly the
  // steps that differ.
  std::vector<size_t> genes;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] == b[i])) genes.push_back(i);
  }
  if (genes.size() < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("crossover not applicable: the parents differ in ", genes.size(),
                     " decision(s); a child would equal a parent"));
  }
  absl::Status last = absl::FailedPreconditionError("crossover: no valid child found");
  int cheap_rejections = 0;
  for (int t = 0; t < kTries * 2; ++t) {
    std::vector<size_t> from_b;
    for (size_t g : genes) {
      if (rng() & 1) from_b.push_back(g);
    }
    if (from_b.empty() || from_b.size() == genes.size()) {
      --t;  // an empty or full subset costs nothing; redraw
      if (++cheap_rejections > kCheapTries) break;
      continue;
    }
    std::vector<Step> child = a;
    for (size_t g : from_b) child[g] = b[g];
    // Mixed tiles of one stage can break the GPU launch limits: a cheap check first.
    bool fits = true;
    for (size_t g : from_b) {
      fits = fits && internal::GpuTileRunFits(ctx, child, static_cast<int>(g));
    }
    if (!fits) {
      last = absl::FailedPreconditionError("crossover: the mixed tiles break the GPU tile limits");
      if (++cheap_rejections <= kCheapTries) --t;
      continue;
    }
    absl::StatusOr<Candidate> out = FinishEdit(ctx, child);
    if (out.ok()) return out;
    last = out.status();
  }
  return last;
}

namespace {

// The rule objects of the mutation table.
class MutateTileSizeRule : public MutationRule {
 public:
  const char* name() const override { return "MutateTileSize"; }
  absl::StatusOr<Candidate> Apply(const State& s, TuneContext& ctx) const override {
    return MutateTileSize(s, ctx);
  }
};

class MutateAutoUnrollRule : public MutationRule {
 public:
  const char* name() const override { return "MutateAutoUnroll"; }
  absl::StatusOr<Candidate> Apply(const State& s, TuneContext& ctx) const override {
    return MutateAutoUnroll(s, ctx);
  }
};

class MutateComputeLocationRule : public MutationRule {
 public:
  const char* name() const override { return "MutateComputeLocation"; }
  absl::StatusOr<Candidate> Apply(const State& s, TuneContext& ctx) const override {
    return MutateComputeLocation(s, ctx);
  }
};

class MutateParallelRule : public MutationRule {
 public:
  const char* name() const override { return "MutateParallel"; }
  absl::StatusOr<Candidate> Apply(const State& s, TuneContext& ctx) const override {
    return MutateParallel(s, ctx);
  }
};

template <typename Rule>
WeightedMutationRule Weighted(int cpu_weight, int gpu_weight) {
  return WeightedMutationRule{std::make_unique<Rule>(), cpu_weight, gpu_weight};
}

std::vector<WeightedMutationRule> MakeMutationRules() {
  std::vector<WeightedMutationRule> rules;
  rules.push_back(Weighted<MutateTileSizeRule>(900, 900));
  rules.push_back(Weighted<MutateAutoUnrollRule>(40, 100));
  rules.push_back(Weighted<MutateComputeLocationRule>(50, 0));
  rules.push_back(Weighted<MutateParallelRule>(10, 0));
  return rules;
}

}  // namespace

const std::vector<WeightedMutationRule>& MutationRules() {
  static const std::vector<WeightedMutationRule>* rules =
      new std::vector<WeightedMutationRule>(MakeMutationRules());
  return *rules;
}

absl::StatusOr<Candidate> Mutate(const State& state, TuneContext& ctx) {
  const bool gpu = ctx.target().is_gpu();
  const std::vector<WeightedMutationRule>& rules = MutationRules();
  int64_t total = 0;
  for (const WeightedMutationRule& r : rules) total += gpu ? r.gpu_weight : r.cpu_weight;
  const double x = internal::Uniform01(ctx.rng());
  int64_t prefix = 0;
  const MutationRule* chosen = nullptr;
  for (const WeightedMutationRule& r : rules) {
    const int weight = gpu ? r.gpu_weight : r.cpu_weight;
    if (weight <= 0) continue;
    prefix += weight;
    chosen = r.rule.get();
    // prefix / total is the correctly rounded quotient, so with weights in thousandths the
    // thresholds are exactly the decimal probabilities (0.90, 0.94, 0.99).
    if (x < static_cast<double>(prefix) / static_cast<double>(total)) break;
  }
  if (chosen == nullptr) {
    return absl::FailedPreconditionError("no mutation rule has a positive weight on this target");
  }
  return chosen->Apply(state, ctx);
}

namespace internal {

namespace {

absl::StatusOr<Candidate> ReplayAndLower(const TuneContext& ctx, const std::vector<Step>& steps) {
  ASSIGN_OR_RETURN(State s, schedule::ReplaySteps(ctx.dag(), steps));
  return LowerCandidate(std::move(s), ctx);
}

}  // namespace

absl::StatusOr<Candidate> FinishEdit(const TuneContext& ctx, const std::vector<Step>& steps) {
  LoweringCache* cache = ctx.lowering_cache();
  if (cache == nullptr) return ReplayAndLower(ctx, steps);
  const uint64_t hash = StepsHash(steps);
  if (std::optional<absl::StatusOr<Candidate>> known = cache->Find(hash)) return *std::move(known);
  absl::StatusOr<Candidate> out = ReplayAndLower(ctx, steps);
  cache->Insert(hash, out);
  return out;
}

double Uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
}

bool IsVectorSplit(const std::vector<Step>& steps, int i) {
  const schedule::SplitStep* sp = SplitThenAnnotated(steps, i, IteratorAnnotation::kVectorize);
  return sp != nullptr && sp->lengths[0].has_value();
}

bool HasMovableFactors(const schedule::SplitStep& sp) {
  if (sp.extent <= 1) return false;
  return std::all_of(sp.lengths.begin(), sp.lengths.end(),
                     [](const auto& l) { return l.has_value(); });
}

std::vector<int64_t> VectorWidthCandidates(const TuneContext& ctx, const std::vector<Step>& steps,
                                           int i) {
  const ir::ComputeDAG& dag = ctx.dag();
  const Target& target = ctx.target();
  const auto& sp = std::get<schedule::SplitStep>(steps[i]);
  absl::StatusOr<State> prefix =
      schedule::ReplaySteps(dag, std::vector<Step>(steps.begin(), steps.begin() + i));
  if (!prefix.ok()) return {};
  const auto& st = prefix->stage(sp.stage_id);
  if (sp.iter_id < 0 || sp.iter_id >= static_cast<int>(st.iters.size())) return {};
  const int64_t extent = st.iters[sp.iter_id].extent;
  return VectorWidths(extent, WidestAccessBytes(*st.op, st.iters[sp.iter_id].name), target);
}

void SetVectorWidth(std::vector<Step>& steps, int i, int64_t width) {
  auto& sp = std::get<schedule::SplitStep>(steps[i]);
  const int64_t old_width = *sp.lengths[0];
  sp.lengths[0] = width;
  // A vectorized root stage splits the rest again (its thread split, annotation.cc), which
  // records the rest's extent: follow the new width.
  if (sp.extent > 0) {
    const int64_t old_rest = (sp.extent + old_width - 1) / old_width;
    const int64_t new_rest = (sp.extent + width - 1) / width;
    for (size_t j = i + 1; j < steps.size(); ++j) {
      auto* later = std::get_if<schedule::SplitStep>(&steps[j]);
      if (later != nullptr && later->stage_id == sp.stage_id && later->iter_id == sp.iter_id &&
          later->extent == old_rest) {
        later->extent = new_rest;
      }
    }
  }
}

void RefreshLaterSplitExtents(const ir::ComputeDAG& dag, std::vector<Step>& steps, int i) {
  // Only a split that records an extent after a fuse of the stage can see a changed extent (a
  // tiled stage's later fuses bind without splitting again): no replay on the hot path otherwise.
  const int stage = std::get<schedule::SplitStep>(steps[i]).stage_id;
  bool fused = false, split_after_fuse = false;
  for (size_t j = i + 1; j < steps.size() && !split_after_fuse; ++j) {
    const auto* fu = std::get_if<schedule::FuseStep>(&steps[j]);
    const auto* sp = std::get_if<schedule::SplitStep>(&steps[j]);
    fused |= fu != nullptr && fu->stage_id == stage;
    split_after_fuse = fused && sp != nullptr && sp->stage_id == stage && sp->extent > 0;
  }
  if (!split_after_fuse) return;
  absl::StatusOr<State> s =
      schedule::ReplaySteps(dag, std::vector<Step>(steps.begin(), steps.begin() + i + 1));
  for (size_t j = i + 1; j < steps.size() && s.ok(); ++j) {
    auto* later = std::get_if<schedule::SplitStep>(&steps[j]);
    if (later != nullptr && later->stage_id == stage && later->extent > 0 && later->iter_id >= 0 &&
        later->iter_id < static_cast<int>(s->stage(stage).iters.size())) {
      later->extent = s->stage(stage).iters[later->iter_id].extent;
    }
    s = schedule::ApplyStep(*s, steps[j]);
  }
}

std::vector<int64_t> ThreadCountCandidates(const schedule::SplitStep& sp,
                                           const AnnotationOptions& options) {
  const int64_t old = *sp.lengths[0];
  std::vector<int64_t> c;
  for (int64_t v : options.gpu_thread_candidates) {
    if ((sp.extent <= 0 || v <= sp.extent) && v != old) c.push_back(v);
  }
  return c;
}

SplitLevels LevelsOf(const schedule::SplitStep& sp) {
  int64_t prod = 1;
  for (const auto& l : sp.lengths) prod *= *l;
  SplitLevels out;
  out.divisible = sp.extent % prod == 0;
  if (out.divisible) out.levels.push_back(sp.extent / prod);
  for (const auto& l : sp.lengths) out.levels.push_back(*l);
  return out;
}

void SetLevels(schedule::SplitStep& sp, const SplitLevels& levels) {
  const int offset = levels.divisible ? 1 : 0;
  CHECK(levels.levels.size() == sp.lengths.size() + offset)
      << levels.levels.size() << " levels for a split of " << sp.lengths.size() << " lengths";
  for (size_t i = 0; i < sp.lengths.size(); ++i) sp.lengths[i] = levels.levels[i + offset];
}

std::vector<int64_t> OtherBlockChunks(const schedule::SplitStep& sp,
                                      const AnnotationOptions& options) {
  std::vector<int64_t> c;
  for (int64_t l : BlockChunkCandidates(sp.extent, options)) {
    if (sp.lengths.empty() || !sp.lengths[0].has_value() || *sp.lengths[0] != l) c.push_back(l);
  }
  return c;
}

bool InnermostAllowed(const std::vector<int64_t>& before, const std::vector<int64_t>& after,
                      const AnnotationOptions& options) {
  return !(after.back() > options.max_innermost_split_factor && after.back() > before.back());
}

int MaxSoftwarePipeline(int current, const AnnotationOptions& options) {
  return std::max(options.gpu_max_software_pipeline, current);
}

}  // namespace internal

}  // namespace tilesearch::search
