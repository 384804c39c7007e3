// Random annotation of sketches (TVM v0.19 init-population rules; see annotation.h).
#include "search/annotation.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "search/sketch_rules.h"

namespace tilesearch::search {

using schedule::ComputeLocation;
using schedule::IteratorAnnotation;
using schedule::IteratorKind;
using schedule::Stage;
using schedule::State;
using schedule::Step;
using schedule::Target;

namespace internal {

int64_t Pick(std::mt19937_64& rng, int64_t n) {
  return n <= 1 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
}

bool IsThreadSplit(const std::vector<Step>& steps, int i) {
  const auto* sp = std::get_if<schedule::SplitStep>(&steps[i]);
  if (sp == nullptr || sp->lengths.size() != 1 || i + 1 >= static_cast<int>(steps.size())) {
    return false;
  }
  const auto* an = std::get_if<schedule::AnnotationStep>(&steps[i + 1]);
  return an != nullptr && an->stage_id == sp->stage_id && an->iter_id == sp->iter_id + 1 &&
         an->annotation == IteratorAnnotation::kThreadIdxX;
}

int64_t SampleThreads(int64_t extent, const AnnotationOptions& options, std::mt19937_64& rng) {
  std::vector<int64_t> c;
  for (int64_t t : options.gpu_thread_candidates) {
    if (t <= extent) c.push_back(t);
  }
  if (c.empty()) return std::max<int64_t>(1, extent);
  return c[Pick(rng, static_cast<int64_t>(c.size()))];
}

std::vector<int64_t> SampleTile(int64_t extent, int n_lengths, const AnnotationOptions& options,
                                std::mt19937_64& rng) {
  int64_t e = std::max<int64_t>(1, extent);
  int divisors = 0;
  for (int64_t d = 1; d * d <= e; ++d) {
    if (e % d == 0) divisors += d * d == e ? 1 : 2;
  }
  if (e > 8 && divisors <= 4 && options.non_divisible_probability > 0 &&
      static_cast<double>(rng() % 1000000) / 1e6 < options.non_divisible_probability) {
    e = (e + 7) / 8 * 8;
  }
  const auto& f = SplitFactorizations(e, n_lengths + 1, options.max_innermost_split_factor);
  if (f.empty()) return std::vector<int64_t>(n_lengths, 1);
  const auto& pick = f[Pick(rng, static_cast<int64_t>(f.size()))];
  return std::vector<int64_t>(pick.begin() + 1, pick.end());
}

}  // namespace internal

namespace {

using internal::Pick;

// Replays a state's steps while filling the unfilled split lengths.
absl::StatusOr<State> FillAndReplay(const State& sketch, const ir::ComputeDAG& dag,
                                    const AnnotationOptions& options, std::mt19937_64& rng) {
  const std::vector<Step>& steps = sketch.steps();
  State s = State::Initial(dag);
  for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
    Step step = steps[i];
    if (auto* sp = std::get_if<schedule::SplitStep>(&step)) {
      const bool unfilled = std::any_of(sp->lengths.begin(), sp->lengths.end(),
                                        [](const auto& l) { return !l.has_value(); });
      if (unfilled) {
        if (sp->stage_id < 0 || sp->stage_id >= s.num_stages() || sp->iter_id < 0 ||
            sp->iter_id >= static_cast<int>(s.stage(sp->stage_id).iters.size())) {
          return absl::InvalidArgumentError(absl::StrCat("step ", i, " ", StepToString(step),
                                                         " names a missing stage or iterator"));
        }
        const int64_t extent = s.stage(sp->stage_id).iters[sp->iter_id].extent;
        if (internal::IsThreadSplit(steps, i)) {
          sp->lengths = {internal::SampleThreads(extent, options, rng)};
        } else {
          std::vector<int64_t> tile =
              internal::SampleTile(extent, static_cast<int>(sp->lengths.size()), options, rng);
          for (size_t k = 0; k < tile.size(); ++k) {
            if (!sp->lengths[k].has_value()) sp->lengths[k] = tile[k];
          }
        }
      }
    }
    ASSIGN_OR_RETURN(s, schedule::ApplyStep(s, step));
  }
  return s;
}

bool HasAnnotated(const Stage& st, IteratorAnnotation a) {
  for (const auto& it : st.iters) {
    if (it.annotation == a) return true;
  }
  return false;
}

bool HasReduceIter(const Stage& st) {
  for (const auto& it : st.iters) {
    if (it.kind == IteratorKind::kReduce) return true;
  }
  return false;
}

bool IsAttachPoint(const State& s, int sid, int iter) {
  const std::string& name = s.stage(sid).iters[iter].name;
  for (int i = 0; i < s.num_stages(); ++i) {
    const Stage& a = s.stage(i);
    if (a.location == ComputeLocation::kAttached && a.attach_stage == sid && a.attach_iter == name) {
      return true;
    }
  }
  return false;
}

// Leading unannotated space iterators, stopping after an attach point (TVM
// FuseAllOuterSpaceIterators) and, when max_degree > 0, once their product exceeds it.
std::vector<int> OuterSpaceIters(const State& s, int sid, int64_t max_degree = 0) {
  std::vector<int> ids;
  int64_t degree = 1;
  const Stage& st = s.stage(sid);
  for (int i = 0; i < static_cast<int>(st.iters.size()); ++i) {
    const auto& it = st.iters[i];
    if (it.kind != IteratorKind::kSpace || it.annotation != IteratorAnnotation::kNone) break;
    ids.push_back(i);
    degree *= it.extent;
    if (max_degree > 0 && degree > max_degree) break;
    if (IsAttachPoint(s, sid, i)) break;
  }
  return ids;
}

absl::Status Apply(State& s, const Step& step) {
  ASSIGN_OR_RETURN(s, schedule::ApplyStep(s, step));
  return absl::OkStatus();
}

// Fuses iterators [first, first + n) of stage `sid` when n > 1; returns the fused iterator id.
absl::StatusOr<int> FuseRange(State& s, int sid, int first, int n) {
  if (n > 1) {
    std::vector<int> ids;
    for (int k = 0; k < n; ++k) ids.push_back(first + k);
    RETURN_IF_ERROR(Apply(s, schedule::FuseStep{sid, ids}));
  }
  return first;
}

absl::Status Bind(State& s, int sid, int iter, IteratorAnnotation a) {
  return Apply(s, schedule::AnnotationStep{sid, iter, a});
}

// Number of space-tile groups of a multi-level-tiled root stage (its iterators start with n ".0"
// iterators, then n ".1", then n ".2"), or 0.
int TiledGroups(const Stage& st) {
  int n = 0;
  while (n < static_cast<int>(st.iters.size()) && st.iters[n].kind == IteratorKind::kSpace &&
         absl::EndsWith(st.iters[n].name, ".0")) {
    ++n;
  }
  if (n == 0 || static_cast<int>(st.iters.size()) < 3 * n) return 0;
  for (int k = 0; k < n; ++k) {
    if (!absl::EndsWith(st.iters[n + k].name, ".1") ||
        !absl::EndsWith(st.iters[2 * n + k].name, ".2")) {
      return 0;
    }
  }
  return n;
}

// The SplitSteps made on the space iterators of stage `name` with ≥ 2 lengths (the multi-level
// tiling splits whose level-1 lengths give the thread count).
std::vector<int> SpaceTileSplits(const ir::ComputeDAG& dag, const std::vector<Step>& steps,
                                 const std::string& name) {
  std::vector<int> ids;
  State s = State::Initial(dag);
  for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
    if (const auto* sp = std::get_if<schedule::SplitStep>(&steps[i])) {
      const Stage& st = s.stage(sp->stage_id);
      if (st.name() == name && sp->lengths.size() >= 2 &&
          st.iters[sp->iter_id].kind == IteratorKind::kSpace) {
        ids.push_back(i);
      }
    }
    absl::StatusOr<State> next = schedule::ApplyStep(s, steps[i]);
    if (!next.ok()) return {};
    s = *std::move(next);
  }
  return ids;
}

absl::Status GpuThreadBind(State& s, const ir::ComputeDAG& dag, const Target& target,
                           const AnnotationOptions& options, std::mt19937_64& rng) {
  for (int sid = s.num_stages() - 1; sid >= 0; --sid) {
    const Stage& st = s.stage(sid);
    if (st.is_placeholder() || st.location == ComputeLocation::kInlined) continue;
    if (HasCrossThreadReduction(s, sid)) {
      if (st.location != ComputeLocation::kRoot) continue;
      std::vector<int> outer = OuterSpaceIters(s, sid);
      if (outer.empty()) continue;
      ASSIGN_OR_RETURN(int f, FuseRange(s, sid, outer.front(), static_cast<int>(outer.size())));
      RETURN_IF_ERROR(Bind(s, sid, f, IteratorAnnotation::kBlockIdxX));
      continue;
    }
    if (HasAnnotated(st, IteratorAnnotation::kThreadIdxX)) continue;
    if (st.location == ComputeLocation::kRoot) {
      if (const int n = TiledGroups(st); n > 0) {
        int64_t total = 1;
        for (int64_t e : st.op->shape) total *= e;
        RETURN_IF_ERROR(FuseRange(s, sid, 0, n).status());
        RETURN_IF_ERROR(FuseRange(s, sid, 1, n).status());
        RETURN_IF_ERROR(FuseRange(s, sid, 2, n).status());
        const int64_t vthreads = s.stage(sid).iters[1].extent;
        const int64_t threads = s.stage(sid).iters[2].extent;
        if (vthreads > target.max_vthread_extent) {
          return absl::FailedPreconditionError(absl::StrCat(
              "invalid_schedule: vthread extent ", vthreads, " > ", target.max_vthread_extent));
        }
        if (threads < target.warp_size && total >= int64_t{16} * target.warp_size) {
          return absl::FailedPreconditionError(absl::StrCat("invalid_schedule: ", threads,
                                                            " threads < warp size ",
                                                            target.warp_size));
        }
        RETURN_IF_ERROR(Bind(s, sid, 0, IteratorAnnotation::kBlockIdxX));
        RETURN_IF_ERROR(Bind(s, sid, 1, IteratorAnnotation::kVThread));
        RETURN_IF_ERROR(Bind(s, sid, 2, IteratorAnnotation::kThreadIdxX));
      } else {
        std::vector<int> outer = OuterSpaceIters(s, sid);
        if (outer.empty()) continue;  // a 1-block, 1-thread kernel
        ASSIGN_OR_RETURN(int f, FuseRange(s, sid, outer.front(), static_cast<int>(outer.size())));
        const int64_t extent = s.stage(sid).iters[f].extent;
        schedule::SplitStep sp;
        sp.stage_id = sid;
        sp.iter_id = f;
        sp.extent = extent;
        sp.lengths = {internal::SampleThreads(extent, options, rng)};
        RETURN_IF_ERROR(Apply(s, sp));
        RETURN_IF_ERROR(Bind(s, sid, f + 1, IteratorAnnotation::kThreadIdxX));
        RETURN_IF_ERROR(Bind(s, sid, f, IteratorAnnotation::kBlockIdxX));
      }
    } else if (st.location == ComputeLocation::kAttached &&
               absl::EndsWith(st.name(), ".shared")) {
      // Cooperative fetching: all threads of the block load the tile, vectorized.
      const std::string consumer = s.stage(st.attach_stage).name();
      std::vector<int> src = SpaceTileSplits(dag, s.steps(), consumer);
      if (src.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("no tiling splits of '", consumer, "' to follow for '", st.name(), "'"));
      }
      ASSIGN_OR_RETURN(int f, FuseRange(s, sid, 0, static_cast<int>(st.iters.size())));
      const int64_t extent = s.stage(sid).iters[f].extent;
      const int64_t bytes = ir::BytesOf(st.op->dtype);
      std::vector<int64_t> widths;
      for (int64_t v : {1, 2, 4}) {
        if (extent % v == 0 && v * bytes <= target.max_vector_bytes) widths.push_back(v);
      }
      schedule::SplitStep sp;
      sp.stage_id = sid;
      sp.iter_id = f;
      sp.extent = 0;  // attached: the extent follows the consumer's tiles
      sp.lengths = {widths[Pick(rng, static_cast<int64_t>(widths.size()))]};
      RETURN_IF_ERROR(Apply(s, sp));
      RETURN_IF_ERROR(Bind(s, sid, f + 1, IteratorAnnotation::kVectorize));
      schedule::FollowFusedSplitStep ffs;
      ffs.stage_id = sid;
      ffs.iter_id = f;
      ffs.src_step_ids = src;
      ffs.level = 1;
      ffs.factor_or_nparts = true;
      RETURN_IF_ERROR(Apply(s, ffs));
      RETURN_IF_ERROR(Bind(s, sid, f + 1, IteratorAnnotation::kThreadIdxX));
    }
  }
  return absl::OkStatus();
}

absl::Status Unroll(State& s, const std::vector<int64_t>& steps, std::mt19937_64& rng) {
  for (int sid = 0; sid < s.num_stages(); ++sid) {
    const Stage& st = s.stage(sid);
    if (st.is_placeholder() || st.location == ComputeLocation::kInlined || !HasReduceIter(st)) {
      continue;
    }
    schedule::PragmaStep p;
    p.stage_id = sid;
    p.iter_id = 0;
    p.auto_unroll_max_step = steps[Pick(rng, static_cast<int64_t>(steps.size()))];
    RETURN_IF_ERROR(Apply(s, p));
  }
  return absl::OkStatus();
}

bool IsTiled(const Stage& st) {
  for (const auto& it : st.iters) {
    if (absl::EndsWith(it.name, ".0")) return true;
  }
  return false;
}

absl::Status CpuChangeComputeLocation(State& s, std::mt19937_64& rng) {
  for (int sid = s.num_stages() - 1; sid >= 0; --sid) {
    const Stage& st = s.stage(sid);
    if (st.is_placeholder() || st.location == ComputeLocation::kInlined) continue;
    if (IsTiled(st) || NeedsMultiLevelTiling(s, sid)) continue;
    std::vector<std::pair<int, int>> cands = internal::ComputeLocationCandidates(s, sid);
    const int64_t choice = Pick(rng, static_cast<int64_t>(cands.size()) + 1);
    if (choice == 0) {
      if (st.location == ComputeLocation::kAttached) {
        RETURN_IF_ERROR(Apply(s, schedule::ComputeRootStep{sid}));
      }
    } else {
      const auto [target, iter] = cands[choice - 1];
      RETURN_IF_ERROR(Apply(s, schedule::ComputeAtStep{sid, target, iter}));
    }
  }
  return absl::OkStatus();
}

absl::Status CpuParallel(State& s, const Target& target) {
  for (int sid = 0; sid < s.num_stages(); ++sid) {
    const Stage& st = s.stage(sid);
    if (st.is_placeholder() || st.location != ComputeLocation::kRoot) continue;
    std::vector<int> outer = OuterSpaceIters(s, sid, int64_t{16} * std::max(1, target.host_cores));
    int64_t degree = 1;
    for (int i : outer) degree *= st.iters[i].extent;
    if (outer.empty() || degree <= 1) continue;
    ASSIGN_OR_RETURN(int f, FuseRange(s, sid, outer.front(), static_cast<int>(outer.size())));
    RETURN_IF_ERROR(Bind(s, sid, f, IteratorAnnotation::kParallel));
  }
  return absl::OkStatus();
}

absl::Status CpuVectorize(State& s, const AnnotationOptions& options, std::mt19937_64& rng) {
  for (int sid = 0; sid < s.num_stages(); ++sid) {
    const Stage& st = s.stage(sid);
    if (st.is_placeholder() || st.location == ComputeLocation::kInlined) continue;
    const int n = static_cast<int>(st.iters.size());
    int64_t prod = 1;
    int fusible = 0;
    while (fusible < n) {
      const int id = n - 1 - fusible;
      if (IsAttachPoint(s, sid, id)) break;
      const auto& it = st.iters[id];
      if (it.kind != IteratorKind::kSpace || it.annotation != IteratorAnnotation::kNone) break;
      // Heuristic of TVM: in a tiled stage only the innermost iterator is contiguous.
      if (IsTiled(st) && fusible != 0) break;
      prod *= it.extent;
      if (prod > options.max_vectorize_size) break;
      ++fusible;
    }
    if (fusible > 1) fusible = 1 + static_cast<int>(Pick(rng, fusible - 1));
    if (fusible == 0) continue;
    ASSIGN_OR_RETURN(int f, FuseRange(s, sid, n - fusible, fusible));
    RETURN_IF_ERROR(Bind(s, sid, f, IteratorAnnotation::kVectorize));
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

std::vector<std::pair<int, int>> ComputeLocationCandidates(const State& s, int sid) {
  std::vector<std::pair<int, int>> out;
  std::vector<int> cons = StageConsumers(s, sid);
  if (cons.size() != 1) return out;
  const int t = cons[0];
  const Stage& ts = s.stage(t);
  if (ts.location == ComputeLocation::kInlined) return out;
  const bool tiled = IsTiled(ts);
  const bool target_attached = ts.location == ComputeLocation::kAttached;
  bool visited_reduce = false;
  for (int i = 0; i < static_cast<int>(ts.iters.size()); ++i) {
    const auto& it = ts.iters[i];
    if (it.kind == IteratorKind::kReduce) {
      visited_reduce = true;
      if (!tiled) break;  // not inside an untiled reduction
    } else if (visited_reduce) {
      break;
    }
    if (it.annotation == IteratorAnnotation::kUnroll) break;
    if (it.extent == 1) continue;
    if (target_attached && it.kind == IteratorKind::kSpace && absl::EndsWith(it.name, ".0")) {
      continue;
    }
    out.emplace_back(t, i);
    if (IsAttachPoint(s, t, i)) break;
  }
  return out;
}

}  // namespace internal

const std::vector<std::vector<int64_t>>& SplitFactorizations(int64_t extent, int n,
                                                             int64_t max_innermost) {
  thread_local std::map<std::tuple<int64_t, int, int64_t>, std::vector<std::vector<int64_t>>>
      memo;
  auto key = std::make_tuple(extent, n, max_innermost);
  auto found = memo.find(key);
  if (found != memo.end()) return found->second;
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> cur;
  // Depth-first over divisors, outermost factor first.
  auto rec = [&](auto&& self, int64_t left, int k) -> void {
    if (k == n - 1) {
      if (left <= max_innermost) {
        cur.push_back(left);
        out.push_back(cur);
        cur.pop_back();
      }
      return;
    }
    for (int64_t d = 1; d <= left; ++d) {
      if (left % d != 0) continue;
      cur.push_back(d);
      self(self, left / d, k + 1);
      cur.pop_back();
    }
  };
  if (n >= 1 && extent >= 1) rec(rec, extent, 0);
  return memo.emplace(key, std::move(out)).first->second;
}

absl::StatusOr<State> AnnotateSketch(const State& sketch, const ir::ComputeDAG& dag,
                                     const Target& target, std::mt19937_64& rng,
                                     const AnnotationOptions& options) {
  ASSIGN_OR_RETURN(State s, FillAndReplay(sketch, dag, options, rng));
  if (target.is_gpu()) {
    RETURN_IF_ERROR(GpuThreadBind(s, dag, target, options, rng));
    RETURN_IF_ERROR(Unroll(s, options.gpu_unroll_steps, rng));
  } else {
    if (options.change_compute_location) RETURN_IF_ERROR(CpuChangeComputeLocation(s, rng));
    RETURN_IF_ERROR(CpuParallel(s, target));
    RETURN_IF_ERROR(Unroll(s, options.cpu_unroll_steps, rng));
    RETURN_IF_ERROR(CpuVectorize(s, options, rng));
  }
  RETURN_IF_ERROR(schedule::Lower(dag, s, target).status());
  return s;
}

std::vector<State> SampleInitialPopulation(const std::vector<State>& sketches,
                                           const ir::ComputeDAG& dag, const Target& target, int n,
                                           std::mt19937_64& rng,
                                           const AnnotationOptions& options) {
  std::vector<State> out;
  if (sketches.empty() || n <= 0) return out;
  std::set<uint64_t> seen;
  const int64_t max_attempts = int64_t{n} * std::max(1, options.max_attempts_per_state);
  for (int64_t attempt = 0; attempt < max_attempts && static_cast<int>(out.size()) < n;
       ++attempt) {
    const State& sketch = sketches[Pick(rng, static_cast<int64_t>(sketches.size()))];
    absl::StatusOr<State> s = AnnotateSketch(sketch, dag, target, rng, options);
    if (!s.ok()) continue;
    if (seen.insert(s->Hash()).second) out.push_back(*std::move(s));
  }
  return out;
}

}  // namespace tilesearch::search
