// Random annotation of sketches (TVM v0.19 init-population rules; see annotation.h).
#include "search/annotation.h"

#include <algorithm>
#include <array>
#include <climits>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/simplify.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "search/mutation_internal.h"
#include "search/sketch_rules.h"
#include "search/tensor_core_space.h"

namespace tilesearch::search {

using schedule::ComputeLocation;
using schedule::IteratorAnnotation;
using schedule::IteratorKind;
using schedule::Stage;
using schedule::State;
using schedule::Step;

namespace internal {

int64_t Pick(std::mt19937_64& rng, int64_t n) {
  return n <= 1 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
}

const schedule::SplitStep* SplitThenAnnotated(const std::vector<Step>& steps, int i,
                                              IteratorAnnotation annotation) {
  const auto* sp = std::get_if<schedule::SplitStep>(&steps[i]);
  if (sp == nullptr || sp->lengths.size() != 1 || i + 1 >= static_cast<int>(steps.size())) {
    return nullptr;
  }
  const auto* an = std::get_if<schedule::AnnotationStep>(&steps[i + 1]);
  const bool ok = an != nullptr && an->stage_id == sp->stage_id && an->iter_id == sp->iter_id + 1 &&
                  an->annotation == annotation;
  return ok ? sp : nullptr;
}

bool IsThreadSplit(const std::vector<Step>& steps, int i) {
  return SplitThenAnnotated(steps, i, IteratorAnnotation::kThreadIdxX) != nullptr;
}

bool IsBlockReductionSplit(const std::vector<Step>& steps, int i) {
  const auto* sp = std::get_if<schedule::SplitStep>(&steps[i]);
  if (sp == nullptr || sp->lengths.size() != 1 || i + 1 >= static_cast<int>(steps.size())) {
    return false;
  }
  const auto* rf = std::get_if<schedule::RfactorStep>(&steps[i + 1]);
  // The CPU rule AddRfactor writes split + rfactor too; only SplitReductionAcrossBlocks follows
  // them with the thread split of the partial stage's chunk.
  if (rf == nullptr || rf->stage_id != sp->stage_id || rf->iter_id != sp->iter_id ||
      i + 2 >= static_cast<int>(steps.size()) || !IsThreadSplit(steps, i + 2)) {
    return false;
  }
  return std::get<schedule::SplitStep>(steps[i + 2]).stage_id == sp->stage_id;
}

std::vector<int64_t> BlockChunkCandidates(int64_t extent, const AnnotationOptions& options) {
  std::vector<int64_t> c;
  for (int64_t l : options.gpu_block_reduction_chunks) {
    if (l * 2 <= extent) c.push_back(l);
  }
  if (c.empty() && !options.gpu_block_reduction_chunks.empty()) {
    c.push_back(*std::min_element(options.gpu_block_reduction_chunks.begin(),
                                  options.gpu_block_reduction_chunks.end()));
  }
  return c;
}

std::vector<int64_t> VectorWidths(int64_t extent, int64_t element_bytes, const Target& target) {
  std::vector<int64_t> c;
  for (int64_t w : {1, 2, 4, 8, 16}) {
    if (extent % w == 0 && w * element_bytes <= target.max_vector_bytes) c.push_back(w);
  }
  return c;
}

int64_t SampleThreads(int64_t extent, const AnnotationOptions& options, std::mt19937_64& rng) {
  std::vector<int64_t> c;
  for (int64_t t : options.gpu_thread_candidates) {
    if (t <= extent) c.push_back(t);
  }
  if (c.empty()) return std::max<int64_t>(1, extent);
  return c[Pick(rng, static_cast<int64_t>(c.size()))];
}

// The extent whose factorizations are drawn: `extent`, or (for an awkward extent > 8 with at most
// 4 divisors, with probability non_divisible_probability) rounded up to a multiple of 8, so that
// non-divisible tiles widen the space.
int64_t TileExtent(int64_t extent, const AnnotationOptions& options, std::mt19937_64& rng) {
  int64_t e = std::max<int64_t>(1, extent);
  int divisors = 0;
  for (int64_t d = 1; d * d <= e; ++d) {
    if (e % d == 0) divisors += d * d == e ? 1 : 2;
  }
  if (e > 8 && divisors <= 4 && options.non_divisible_probability > 0 &&
      static_cast<double>(rng() % 1000000) / 1e6 < options.non_divisible_probability) {
    e = (e + 7) / 8 * 8;
  }
  return e;
}

std::vector<int64_t> SampleTile(int64_t extent, int n_lengths, const AnnotationOptions& options,
                                std::mt19937_64& rng) {
  const auto& f = SplitFactorizations(TileExtent(extent, options, rng), n_lengths + 1,
                                      options.max_innermost_split_factor);
  if (f.empty()) return std::vector<int64_t>(n_lengths, 1);
  const auto& pick = f[Pick(rng, static_cast<int64_t>(f.size()))];
  return std::vector<int64_t>(pick.begin() + 1, pick.end());
}

std::vector<const ir::LoadNode*> LoadsUsing(const ir::TensorNode& op, const std::string& axis) {
  // Whether an index expression mentions the axis.
  class Mentions : public ir::ExprVisitor {
   public:
    explicit Mentions(const std::string& axis) : axis_(axis) {}
    bool found = false;

   protected:
    void VisitVar(const ir::VarNode* v, const ir::Expr&) override {
      found = found || v->name == axis_;
    }

   private:
    const std::string& axis_;
  };
  class Finder : public ir::ExprVisitor {
   public:
    explicit Finder(const std::string& axis) : axis_(axis) {}
    std::vector<const ir::LoadNode*> loads;

   protected:
    void VisitLoad(const ir::LoadNode* l, const ir::Expr& e) override {
      Mentions m(axis_);
      for (const ir::Expr& index : l->indices) m.Visit(index);
      if (m.found) loads.push_back(l);
      ir::ExprVisitor::VisitLoad(l, e);
    }

   private:
    const std::string& axis_;
  } finder(axis);
  if (op.body.defined()) finder.Visit(op.body);
  return finder.loads;
}

int64_t WidestAccessBytes(const ir::TensorNode& op, const std::string& axis) {
  int64_t bytes = ir::BytesOf(op.dtype);
  for (const ir::LoadNode* l : LoadsUsing(op, axis)) {
    bytes = std::max<int64_t>(bytes, ir::BytesOf(l->type));
  }
  return bytes;
}

}  // namespace internal

namespace {

// Whether steps[i - 2] splits the iterator that steps[i] splits, on the same stage, and steps[i -
// 1] vectorizes its inner part: steps[i] splits the rest of a row's vector split.
bool FollowsRowVectorSplit(const std::vector<Step>& steps, int i) {
  if (i < 2) return false;
  const auto* sp = std::get_if<schedule::SplitStep>(&steps[i]);
  const schedule::SplitStep* vec =
      internal::SplitThenAnnotated(steps, i - 2, IteratorAnnotation::kVectorize);
  return sp != nullptr && vec != nullptr && vec->stage_id == sp->stage_id &&
         vec->iter_id == sp->iter_id;
}

// A one-length split with no length yet whose inner part the next step vectorizes (a row's vector
// split, sketch rule CrossThreadReduction).
bool IsUnfilledVectorSplit(const std::vector<Step>& steps, int i) {
  const schedule::SplitStep* sp =
      internal::SplitThenAnnotated(steps, i, IteratorAnnotation::kVectorize);
  return sp != nullptr && !sp->lengths[0].has_value();
}

using internal::Pick;

// What FillAndReplay learned about each step: the stage it applied to and, for splits, the kind
// of the split iterator (the cooperative fetch follows the consumer's space tiling splits).
struct StepInfo {
  std::string stage;
  bool space_split = false;
};

// ---------------------------------------------------------------------------------------------
// Joint tile sampling of a multi-level-tiled GPU stage.
//
// The tiling splits of one stage (a run of consecutive unfilled SplitSteps on it, as
// DoMultiLevelTiling writes them) are drawn together so that the launch limits hold by
// construction: with space lengths [l0, l1, l2, ...] (outer rest excluded) l0 becomes the vthread
// level and l1 the threadIdx level (GpuThreadBind), so
//   Π l0 ≤ min(max_vthread_extent, gpu_max_vthread),  Π l1 ∈ [min threads, max_threads],
//   per-thread registers ≈ Π (l2 · l3 · ...) + overhead ≤ 255 and × threads ≤ the block's file,
//   shared memory of the cached inputs' footprints (block tile × reduce tile) ≤ the opt-in limit,
// and, as a preference only, at least gpu_min_blocks blocks.
// Dimensions are visited in random order and each draws uniformly from the factorizations of its
// extent that keep the partial products feasible (a necessary condition for the rest).

struct TileDim {
  int step = 0;      // index of the SplitStep
  std::string axis;  // the original axis it splits ("i", "rc")
  int64_t extent = 1;
  bool reduce = false;
  int n_lengths = 0;
  std::vector<int64_t> lengths;  // chosen
};

struct TilePlan {
  std::vector<TileDim> dims;
  // Buffers of the tiled stage's op read through a shared-memory cache.
  std::vector<std::string> shared_buffers;
  // Their storage_align (dim, factor, offset), where the sketch pads them: the padded rows count.
  std::map<std::string, std::array<int64_t, 3>> shared_align;
  // SharedLayoutTiling's stage (a permuted copy through padded shared rows): its innermost axis,
  // whose thread level should be whole warps with one point per thread (below). Empty otherwise.
  std::string warp_axis;
};

int64_t Prod(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Points one outer iteration of an extent-E split covers: the product of the part extents,
// tightened like SplitStep (inner to outer, each min(l, what is left)); may exceed E for
// non-divisible tiles (guards drop the tail).
int64_t TileSpan(int64_t extent, const std::vector<int64_t>& lengths) {
  int64_t left = extent, span = 1;
  for (auto it = lengths.rbegin(); it != lengths.rend(); ++it) {
    span *= std::min(*it, left);
    left = (left + *it - 1) / *it;
  }
  return span;
}

class FootprintModel {
 public:
  FootprintModel(const ir::TensorNode& op, const std::vector<std::string>& buffers,
                 const std::map<std::string, std::array<int64_t, 3>>& align = {}) {
    std::vector<const ir::LoadNode*> loads;
    CollectLoads(op.body, loads);
    if (op.init.defined()) CollectLoads(op.init, loads);
    for (const ir::LoadNode* l : loads) {
      if (std::find(buffers.begin(), buffers.end(), l->buffer) == buffers.end()) continue;
      const int bytes = ir::BytesOf(l->type);
      auto it = std::find_if(groups_.begin(), groups_.end(),
                             [&](const Group& g) { return g.buffer == l->buffer; });
      if (it == groups_.end()) {
        groups_.push_back({l->buffer, bytes, {}, {}, std::nullopt});
        it = groups_.end() - 1;
        if (auto a = align.find(l->buffer); a != align.end()) it->align = a->second;
      }
      it->loads.push_back(l);
      if (l->producer && l->producer->shape.size() == l->indices.size()) {
        it->shape = l->producer->shape;
      }
    }
  }
  bool empty() const { return groups_.empty(); }
  // Shared bytes of every cached buffer when each axis spans tile[axis] (absent: 1), or -1 when
  // an index cannot be bounded.
  int64_t Bytes(const std::map<std::string, int64_t>& tile) const {
    ir::RangeMap ranges;
    for (const auto& [axis, t] : tile) ranges[axis] = {0, std::max<int64_t>(t, 1) - 1};
    int64_t total = 0;
    for (const Group& g : groups_) {
      std::vector<ir::Interval> hull;
      for (const ir::LoadNode* l : g.loads) {
        if (hull.empty()) hull.resize(l->indices.size(), {INT64_MAX, INT64_MIN});
        if (hull.size() != l->indices.size()) return -1;
        for (size_t d = 0; d < l->indices.size(); ++d) {
          ir::BoundResult b = ir::BoundOf(l->indices[d], WithZeros(ranges, l->indices[d]));
          if (!b.ok) return -1;
          hull[d].min = std::min(hull[d].min, b.range.min);
          hull[d].max = std::max(hull[d].max, b.range.max);
        }
      }
      // Like InferRegion: a region reaching the whole dimension is the whole dimension.
      std::vector<int64_t> extents;
      for (size_t d = 0; d < hull.size(); ++d) {
        int64_t e = hull[d].max - hull[d].min + 1;
        if (d < g.shape.size()) e = std::min(e, g.shape[d]);
        extents.push_back(e);
      }
      int64_t n = g.bytes;
      for (int64_t e : extents) n *= e;
      if (g.align) {
        // As lowering pads it (lower_internal::MakeAlignment): dimension dim's stride, the
        // product of the extents after it, rounded up to ≡ offset (mod factor).
        const auto [dim, factor, offset] = *g.align;
        if (dim >= 0 && dim + 1 < static_cast<int64_t>(extents.size()) && factor > 0) {
          int64_t stride = 1, rows = 1;
          for (size_t d = 0; d < extents.size(); ++d) {
            (static_cast<int64_t>(d) > dim ? stride : rows) *= extents[d];
          }
          int64_t padded = stride + (((offset - stride) % factor) + factor) % factor;
          // Dimensions not drawn yet count as 1, and a 1-element row needs no padding, but it
          // pads to factor + offset as soon as the row is 2 wide: budget the padded row from the
          // start, or the first dimension drawn takes room the padding needs.
          if (stride <= factor) padded = std::max(padded, factor + offset);
          n = g.bytes * rows * padded;
        }
      }
      total += n;
    }
    return total;
  }

 private:
  struct Group {
    std::string buffer;
    int bytes;
    std::vector<const ir::LoadNode*> loads;
    std::vector<int64_t> shape;                   // the buffer's, when known
    std::optional<std::array<int64_t, 3>> align;  // its cache's storage_align, if any
  };
  static void CollectLoads(const ir::Expr& e, std::vector<const ir::LoadNode*>& out) {
    struct C : ir::ExprVisitor {
      std::vector<const ir::LoadNode*>* out;
      void VisitLoad(const ir::LoadNode* op, const ir::Expr& e) override {
        out->push_back(op);
        ir::ExprVisitor::VisitLoad(op, e);
      }
    } c;
    c.out = &out;
    c.Visit(e);
  }
  // Variables without a tile (axes of other loops, never here in practice) span one point.
  static ir::RangeMap WithZeros(const ir::RangeMap& ranges, const ir::Expr& e) {
    struct V : ir::ExprVisitor {
      std::set<std::string> names;
      void VisitVar(const ir::VarNode* op, const ir::Expr&) override { names.insert(op->name); }
    } v;
    v.Visit(e);
    ir::RangeMap r = ranges;
    for (const std::string& n : v.names) r.emplace(n, ir::Interval{0, 0});
    return r;
  }
  std::vector<Group> groups_;
};

// Candidates of one dimension: all factorizations (outer rest first) of its extent (rounded up
// to a multiple of 8 with probability non_divisible_probability for awkward extents), innermost
// ≤ max_innermost_split_factor. Empty when none exists.
const std::vector<std::vector<int64_t>>& TileCandidates(int64_t extent, int n_lengths,
                                                        const AnnotationOptions& options,
                                                        std::mt19937_64& rng) {
  return SplitFactorizations(internal::TileExtent(extent, options, rng), n_lengths + 1,
                             options.max_innermost_split_factor);
}

// Threads (l1) and vthreads (l0) of a space tile are not tightened below their lengths by the
// split (non-divisible tiles can be), so the cooperative fetch's thread count (which follows the
// lengths) equals the consumer's.
bool KeepsThreadLevels(int64_t extent, const std::vector<int64_t>& l) {
  if (l.size() < 2) return true;
  const int64_t inner = Prod(l, 2);
  return l[1] <= CeilDiv(extent, inner) && l[0] <= CeilDiv(extent, inner * l[1]);
}

int64_t RegisterEstimate(int64_t local_elements, const AnnotationOptions& options) {
  return local_elements + options.gpu_register_overhead;
}

int64_t MaxVthreads(const Target& target, const AnnotationOptions& options) {
  return std::max<int64_t>(1,
                           std::min<int64_t>(target.max_vthread_extent, options.gpu_max_vthread));
}

bool RegistersFit(int64_t threads, int64_t local_elements, const Target& target,
                  const AnnotationOptions& options) {
  const int64_t regs = RegisterEstimate(local_elements, options);
  return regs <= options.gpu_max_registers_per_thread &&
         threads * regs <= target.max_registers_per_block;
}

// Fills plan.dims[*].lengths; returns the number of blocks the space tiles leave.
int64_t SampleTilePlan(TilePlan& plan, const ir::TensorNode& op, const Target& target,
                       const AnnotationOptions& options, std::mt19937_64& rng) {
  std::vector<int> space, reduce;
  int64_t total_space = 1;
  for (int i = 0; i < static_cast<int>(plan.dims.size()); ++i) {
    (plan.dims[i].reduce ? reduce : space).push_back(i);
    if (!plan.dims[i].reduce) total_space *= plan.dims[i].extent;
  }
  std::shuffle(space.begin(), space.end(), rng);
  std::shuffle(reduce.begin(), reduce.end(), rng);
  // The warp axis first, while every thread count is still open to it.
  std::stable_partition(space.begin(), space.end(),
                        [&](int i) { return plan.dims[i].axis == plan.warp_axis; });
  const int64_t max_threads = target.max_threads_per_block;
  const int64_t max_vthreads = MaxVthreads(target, options);
  const int64_t min_threads = total_space >= int64_t{16} * target.warp_size ? target.warp_size : 1;
  const int64_t shared_limit =
      std::max(target.max_shared_memory_per_block, target.max_shared_memory_optin);
  FootprintModel footprint(op, plan.shared_buffers, plan.shared_align);
  std::map<std::string, int64_t> tile;  // axis → span of the block's tile
  // Memoized shared bytes by the span of the dimension being drawn.
  auto shared_ok = [&](const TileDim& d, int64_t span, std::map<int64_t, bool>& memo) {
    if (footprint.empty()) return true;
    auto it = memo.find(span);
    if (it != memo.end()) return it->second;
    std::map<std::string, int64_t> t = tile;
    t[d.axis] = span;
    const int64_t bytes = footprint.Bytes(t);
    return memo[span] = bytes >= 0 && bytes <= shared_limit;
  };
  // Draws one candidate uniformly among those `hard` accepts, preferring those `soft` accepts
  // too (all candidates when `hard` accepts none: tiny or awkward spaces, where validation
  // decides); returns the lengths without the outer rest.
  auto draw = [&](const TileDim& d, const auto& hard, const auto& soft) {
    const auto& cands = TileCandidates(d.extent, d.n_lengths, options, rng);
    if (cands.empty()) return std::vector<int64_t>(d.n_lengths, 1);
    std::vector<int> ok, preferred;
    for (int c = 0; c < static_cast<int>(cands.size()); ++c) {
      if (!hard(cands[c])) continue;
      ok.push_back(c);
      if (soft(cands[c])) preferred.push_back(c);
    }
    const std::vector<int>& pool = preferred.empty() ? ok : preferred;
    const std::vector<int64_t>& f = pool.empty()
                                        ? cands[Pick(rng, static_cast<int64_t>(cands.size()))]
                                        : cands[pool[Pick(rng, static_cast<int64_t>(pool.size()))]];
    return std::vector<int64_t>(f.begin() + 1, f.end());
  };
  const auto any = [](const std::vector<int64_t>&) { return true; };
  int64_t vthreads = 1, threads = 1, local = 1, blocks = 1;
  for (size_t k = 0; k < space.size(); ++k) {
    TileDim& d = plan.dims[space[k]];
    int64_t rest_threads = 1;  // the most threads the remaining dimensions can add
    int64_t rest_blocks = 1;   // the most blocks they can add
    for (size_t r = k + 1; r < space.size(); ++r) {
      rest_threads = std::min(max_threads, rest_threads * plan.dims[space[r]].extent);
      rest_blocks = std::min(options.gpu_min_blocks, rest_blocks * plan.dims[space[r]].extent);
    }
    std::map<int64_t, bool> memo;
    // f = (rest, l0 = vthreads, l1 = threads, l2, ...).
    const auto hard = [&](const std::vector<int64_t>& f) {
      if (d.n_lengths < 2) return true;
      // Registers hold every virtual thread's accumulators (lowering gives each its own copy).
      const int64_t v = vthreads * f[1], t = threads * f[2], a = v * local * Prod(f, 3);
      if (v > max_vthreads || t > max_threads) return false;
      if (t * rest_threads < min_threads) return false;
      if (!RegistersFit(std::max(t, min_threads), a, target, options)) return false;
      const std::vector<int64_t> l(f.begin() + 1, f.end());
      return KeepsThreadLevels(d.extent, l) && shared_ok(d, TileSpan(d.extent, l), memo);
    };
    // Preferred: enough blocks, and along a permuted copy's innermost axis (warp_axis) threads
    // in whole warps with one point each: a warp then stores 32 consecutive elements and reads
    // 32 padded shared rows, one bank each (measured on the H200, transpose 16384²: 64×64 and
    // 64×32 tiles so drawn 0.533 ms, the 16×64 tile with 16 threads × 4 points along it that 64
    // trials found 0.656 ms, half its shared loads bank-conflicted).
    const bool warp_axis =
        d.axis == plan.warp_axis && d.n_lengths >= 3 && d.extent % target.warp_size == 0;
    const auto preferred = [&](const std::vector<int64_t>& f) {
      if (blocks * CeilDiv(d.extent, Prod(f, 1)) * rest_blocks < options.gpu_min_blocks) {
        return false;
      }
      return !warp_axis || (f[2] % target.warp_size == 0 && Prod(f, 3) == 1);
    };
    d.lengths = draw(d, hard, preferred);
    if (d.n_lengths >= 2) {
      vthreads *= d.lengths[0];
      threads *= d.lengths[1];
      local *= Prod(d.lengths, 2);
    } else {
      local *= Prod(d.lengths);
    }
    blocks *= CeilDiv(d.extent, Prod(d.lengths));
    tile[d.axis] = TileSpan(d.extent, d.lengths);
  }
  // Lowering stages each thread's share of the shared tiles in registers (software pipelining,
  // schedule/software_pipeline.h): count it against the register file with the accumulators.
  auto staging_fits = [&](const TileDim& d, int64_t span) {
    if (footprint.empty()) return true;
    std::map<std::string, int64_t> t = tile;
    t[d.axis] = span;
    const int64_t bytes = footprint.Bytes(t);
    if (bytes < 0) return false;
    const int64_t t_threads = std::max(threads, min_threads);
    const int64_t staged = CeilDiv(bytes / 4, t_threads) + 2;  // +1 per buffer of rounding
    return RegistersFit(t_threads, vthreads * local + staged, target, options);
  };
  for (int i : reduce) {
    TileDim& d = plan.dims[i];
    std::map<int64_t, bool> memo;
    d.lengths = draw(
        d,
        [&](const std::vector<int64_t>& f) {
          const int64_t span = TileSpan(d.extent, std::vector<int64_t>(f.begin() + 1, f.end()));
          return shared_ok(d, span, memo) && staging_fits(d, span);
        },
        any);
    tile[d.axis] = TileSpan(d.extent, d.lengths);
  }
  return blocks;
}

// The original axis an iterator comes from: "k.0" -> "k" (split parts end in ".<digits>").
std::string AxisOf(const std::string& name) {
  size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot + 1 == name.size()) return name;
  for (size_t i = dot + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return AxisOf(name.substr(0, dot));
}

// Plans the tiling run of unfilled multi-length splits starting at step `first` (all on one
// stage), replaying them with unit lengths on a scratch copy of `s` to learn each iterator.
absl::StatusOr<TilePlan> PlanGpuTiles(const State& s, const State& sketch,
                                      const std::vector<Step>& steps, int first,
                                      const Target& target, const AnnotationOptions& options,
                                      std::mt19937_64& rng) {
  TilePlan plan;
  const int sid = std::get<schedule::SplitStep>(steps[first]).stage_id;
  State scratch = s;
  for (int i = first; i < static_cast<int>(steps.size()); ++i) {
    const auto* sp = std::get_if<schedule::SplitStep>(&steps[i]);
    if (sp == nullptr || sp->stage_id != sid || sp->lengths.size() < 2 ||
        std::any_of(sp->lengths.begin(), sp->lengths.end(),
                    [](const auto& l) { return l.has_value(); })) {
      break;
    }
    if (sp->iter_id < 0 || sp->iter_id >= static_cast<int>(scratch.stage(sid).iters.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", i, " ", StepToString(steps[i]), " names a missing iterator"));
    }
    const schedule::Iterator& it = scratch.stage(sid).iters[sp->iter_id];
    TileDim d;
    d.step = i;
    d.axis = AxisOf(it.name);
    d.extent = it.extent;
    d.reduce = it.kind == IteratorKind::kReduce;
    d.n_lengths = static_cast<int>(sp->lengths.size());
    plan.dims.push_back(d);
    schedule::SplitStep unit = *sp;
    for (auto& l : unit.lengths) l = 1;
    ASSIGN_OR_RETURN(scratch, schedule::ApplyStep(scratch, unit));
  }
  // Inputs cached in shared memory: the sketch's ".shared" stages attached to this stage.
  const std::string& name = s.stage(sid).name();
  for (int i = 0; i < sketch.num_stages(); ++i) {
    const Stage& st = sketch.stage(i);
    if (st.location == ComputeLocation::kAttached && st.scope == ir::MemoryScope::kShared &&
        sketch.stage(st.attach_stage).name() == name && absl::EndsWith(st.name(), ".shared")) {
      const std::string buffer = st.name().substr(0, st.name().size() - 7);
      plan.shared_buffers.push_back(buffer);
      if (st.storage_align_dim >= 0) {
        plan.shared_align[buffer] = {st.storage_align_dim, st.storage_align_factor,
                                     st.storage_align_offset};
        // Only SharedLayoutTiling pads the rows of a space-only stage's shared copy.
        if (s.stage(sid).op->reduce_axes.empty() && !s.stage(sid).op->axes.empty()) {
          plan.warp_axis = s.stage(sid).op->axes.back().name;
        }
      }
    }
  }
  // The block preference is judged per dimension in a random order, which can leave later
  // dimensions no room: redraw the whole plan a few times (cheap next to lowering).
  for (int attempt = 0; attempt < 8; ++attempt) {
    if (SampleTilePlan(plan, *s.stage(sid).op, target, options, rng) >= options.gpu_min_blocks) {
      break;
    }
  }
  return plan;
}

// Replays a state's steps while filling the unfilled split lengths; `info` gets each step's
// stage name and split kind.
absl::StatusOr<State> FillAndReplay(const State& sketch, TuneContext& ctx,
                                    std::vector<StepInfo>* info) {
  const ir::ComputeDAG& dag = ctx.dag();
  const Target& target = ctx.target();
  const AnnotationOptions& options = ctx.annotation();
  std::mt19937_64& rng = ctx.rng();
  const std::vector<Step>& steps = sketch.steps();
  State s = State::Initial(dag);
  std::map<int, std::vector<int64_t>> planned;
  for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
    Step step = steps[i];
    const int sid = std::visit([](const auto& st) { return st.stage_id; }, step);
    StepInfo si;
    if (sid >= 0 && sid < s.num_stages()) si.stage = s.stage(sid).name();
    if (auto* sp = std::get_if<schedule::SplitStep>(&step)) {
      if (sp->stage_id < 0 || sp->stage_id >= s.num_stages() || sp->iter_id < 0 ||
          sp->iter_id >= static_cast<int>(s.stage(sp->stage_id).iters.size())) {
        return absl::InvalidArgumentError(absl::StrCat("step ", i, " ", StepToString(step),
                                                       " names a missing stage or iterator"));
      }
      si.space_split = s.stage(sp->stage_id).iters[sp->iter_id].kind == IteratorKind::kSpace;
      const bool unfilled = std::any_of(sp->lengths.begin(), sp->lengths.end(),
                                        [](const auto& l) { return !l.has_value(); });
      if (unfilled) {
        const int64_t extent = s.stage(sp->stage_id).iters[sp->iter_id].extent;
        if (internal::IsThreadSplit(steps, i)) {
          sp->lengths = {internal::SampleThreads(extent, options, rng)};
          // A row's thread split after its vector split (CrossThreadReduction) records the rest's
          // extent once the width is drawn, so that mutation can move the thread count within it
          // (and a width mutation updates it: SetVectorWidth).
          if (sp->extent == 0 && FollowsRowVectorSplit(steps, i)) sp->extent = extent;
        } else if (IsUnfilledVectorSplit(steps, i)) {
          // A row's vector (CrossThreadReduction): up to 16 bytes of the widest type the stage
          // writes or reads along the row.
          const Stage& row = s.stage(sp->stage_id);
          const std::vector<int64_t> w = internal::VectorWidths(
              extent, internal::WidestAccessBytes(*row.op, row.iters[sp->iter_id].name), target);
          sp->lengths = {w.empty() ? 1 : w[Pick(rng, static_cast<int64_t>(w.size()))]};
        } else if (internal::IsBlockReductionSplit(steps, i)) {
          const std::vector<int64_t> c = internal::BlockChunkCandidates(extent, options);
          if (c.empty()) return absl::InvalidArgumentError("no block-reduction chunk lengths");
          sp->lengths = {c[Pick(rng, static_cast<int64_t>(c.size()))]};
        } else {
          const bool all_unfilled = std::none_of(sp->lengths.begin(), sp->lengths.end(),
                                                 [](const auto& l) { return l.has_value(); });
          if (target.is_gpu() && all_unfilled && sp->lengths.size() >= 2 && !planned.count(i)) {
            ASSIGN_OR_RETURN(TilePlan plan,
                             PlanGpuTiles(s, sketch, steps, i, target, options, rng));
            for (const TileDim& d : plan.dims) planned[d.step] = d.lengths;
          }
          std::vector<int64_t> tile;
          if (auto it = planned.find(i); it != planned.end()) {
            tile = it->second;
          } else {
            tile = internal::SampleTile(extent, static_cast<int>(sp->lengths.size()), options, rng);
          }
          for (size_t k = 0; k < tile.size(); ++k) {
            if (!sp->lengths[k].has_value()) sp->lengths[k] = tile[k];
          }
        }
      }
    }
    if (auto* tc = std::get_if<schedule::TensorCoreStep>(&step)) {
      // The sketch's tensor_core step holds a placeholder configuration: draw every decision.
      ASSIGN_OR_RETURN(*tc, SampleTensorCoreStep(*tc, s, target, rng));
    }
    ASSIGN_OR_RETURN(s, schedule::ApplyStep(s, step));
    if (info) info->push_back(std::move(si));
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
    if (a.location == ComputeLocation::kAttached && a.attach_stage == sid &&
        a.attach_iter == name) {
      return true;
    }
  }
  return false;
}

// The reduction UntiledLowReuse computed at root stage `sid`'s innermost iterator (a window sum
// whose cast consumer is `sid`), or -1.
int FusedLowReuseProducer(const State& s, int sid) {
  const Stage& st = s.stage(sid);
  if (st.iters.empty() || HasReduceIter(st)) return -1;
  for (int p = 0; p < s.num_stages(); ++p) {
    const Stage& ps = s.stage(p);
    if (ps.location == ComputeLocation::kAttached && ps.attach_stage == sid &&
        ps.attach_iter == st.iters.back().name && ps.scope == ir::MemoryScope::kGlobal &&
        HasReduceIter(ps) && NeedsMultiLevelTiling(s, p) && !ps.op->axes.empty()) {
      return p;
    }
  }
  return -1;
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
// tiling splits whose level-1 lengths give the thread count), from FillAndReplay's step infos.
std::vector<int> SpaceTileSplits(const std::vector<Step>& steps, const std::vector<StepInfo>& info,
                                 const std::string& name) {
  std::vector<int> ids;
  for (int i = 0; i < static_cast<int>(info.size()) && i < static_cast<int>(steps.size()); ++i) {
    const auto* sp = std::get_if<schedule::SplitStep>(&steps[i]);
    if (sp != nullptr && info[i].stage == name && info[i].space_split && sp->lengths.size() >= 2) {
      ids.push_back(i);
    }
  }
  return ids;
}

// The one-length SplitSteps on the space iterators of stage `name` (a cross-thread reduction's
// consumer: [rest, threads]); only the last one, which the thread binding follows.
std::vector<int> ThreadSplits(const std::vector<Step>& steps, const std::vector<StepInfo>& info,
                              const std::string& name) {
  std::vector<int> ids;
  for (int i = 0; i < static_cast<int>(info.size()) && i < static_cast<int>(steps.size()); ++i) {
    const auto* sp = std::get_if<schedule::SplitStep>(&steps[i]);
    if (sp != nullptr && info[i].stage == name && info[i].space_split && sp->lengths.size() == 1) {
      ids = {i};
    }
  }
  return ids;
}

// An untiled stage that tiling would take (UntiledLowReuse: a depthwise convolution), before its
// space iterators `outer` are fused and bound: each thread may compute 1, 2 or 4 consecutive
// points of its innermost space iterator (also 8 for 2-byte types) and 1, 2, 4 or 8 of the one
// outside it, whose overlapping windows then share loads in registers. Measured on the H200
// (depthwise 3x3, [64, 384, 112, 112]), while padding selects were branches: 2 points along w 25 %
// faster than 1, 4 slower (a warp's scalar loads then 16 bytes apart); along h a warp's loads stay
// consecutive: 4 points 0.82 ms, 8 points 0.79, against 1.02 for 2 along w. Since padding
// selects load at clamped indices (codegen), 4 points along w read each window row's middle
// as one 16-byte load. Both splits (and the reorder that puts the per-thread points inside) are
// there even for 1, so mutation can change them.
//
// `reads` is the stage whose loads are the windows: `sid` itself, or the untiled reduction
// UntiledLowReuse computed at `sid`'s innermost iterator (then the per-thread points are `sid`'s
// and the reduction is computed at each of them, its window loads shared once unrolled).
absl::Status SplitPointsPerThread(State& s, int sid, const std::vector<int>& outer, int reads,
                                  std::mt19937_64& rng) {
  const Stage st = s.stage(sid);  // a copy: the steps below replace s's stages
  const int n_outer = static_cast<int>(outer.size());
  const int inner = outer.back();
  bool attached_inside = false;
  for (int i = 0; i < static_cast<int>(st.iters.size()); ++i) {
    attached_inside |= IsAttachPoint(s, sid, i) && !(reads != sid && i == inner);
  }
  const int64_t inner_extent = st.iters[inner].extent;
  const int second = n_outer >= 2 ? outer[n_outer - 2] : -1;
  const int64_t second_extent = second >= 0 ? st.iters[second].extent : 1;
  auto pick_points = [&](int64_t extent, std::initializer_list<int64_t> options) {
    std::vector<int64_t> points;
    for (int64_t v : options) {
      if (extent % v == 0) points.push_back(v);
    }
    return points[Pick(rng, static_cast<int64_t>(points.size()))];
  };
  if (!attached_inside && second_extent > 1 && inner_extent > 1) {
    // [.., h, w, r..] -> [.., h.0, h.1, w, r..] -> [.., h.0, h.1, w.0, w.1, r..]
    // -> [.., h.0, w.0, h.1, w.1, r..]
    schedule::SplitStep along_h;
    along_h.stage_id = sid;
    along_h.iter_id = second;
    along_h.extent = second_extent;
    along_h.lengths = {pick_points(second_extent, {1, 2, 4, 8})};
    RETURN_IF_ERROR(Apply(s, along_h));
    schedule::SplitStep along_w;
    along_w.stage_id = sid;
    along_w.iter_id = inner + 1;
    along_w.extent = inner_extent;
    // 4 points of float32 (8 of a 2-byte type) are a 16-byte load of each window row's middle;
    // the element is the widest input read along w (the stage may compute in float32).
    const ir::TensorNode& window = *s.stage(reads).op;
    int64_t element_bytes = 0;
    for (const ir::LoadNode* l : internal::LoadsUsing(window, window.axes.back().name)) {
      element_bytes = std::max<int64_t>(element_bytes, ir::BytesOf(l->type));
    }
    if (element_bytes == 0) element_bytes = ir::BytesOf(st.op->dtype);
    along_w.lengths = {element_bytes <= 2 ? pick_points(inner_extent, {1, 2, 4, 8})
                                          : pick_points(inner_extent, {1, 2, 4})};
    RETURN_IF_ERROR(Apply(s, along_w));
    schedule::ReorderStep order;
    order.stage_id = sid;
    const int n_iters = static_cast<int>(s.stage(sid).iters.size());
    for (int i = 0; i < n_iters; ++i) order.after_ids.push_back(i);
    std::swap(order.after_ids[second + 1], order.after_ids[second + 2]);
    RETURN_IF_ERROR(Apply(s, order));
  } else if (!attached_inside && inner_extent > 1) {
    schedule::SplitStep per_thread;
    per_thread.stage_id = sid;
    per_thread.iter_id = inner;
    per_thread.extent = inner_extent;
    per_thread.lengths = {pick_points(inner_extent, {1, 2})};
    RETURN_IF_ERROR(Apply(s, per_thread));
  }
  return absl::OkStatus();
}

absl::Status GpuThreadBind(State& s, const std::vector<StepInfo>& info, const Target& target,
                           const AnnotationOptions& options, std::mt19937_64& rng) {
  for (int sid = s.num_stages() - 1; sid >= 0; --sid) {
    // A copy: the steps below replace `s`'s stages, and a reference would dangle.
    const Stage st = s.stage(sid);
    if (st.is_placeholder() || st.location == ComputeLocation::kInlined) continue;
    // A tensor_core kernel binds its own blocks, warps and lanes.
    if (st.tensor_core || st.epilogue_of >= 0) continue;
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
          return absl::FailedPreconditionError(absl::StrCat(
              "invalid_schedule: ", threads, " threads < warp size ", target.warp_size));
        }
        RETURN_IF_ERROR(Bind(s, sid, 0, IteratorAnnotation::kBlockIdxX));
        RETURN_IF_ERROR(Bind(s, sid, 1, IteratorAnnotation::kVThread));
        RETURN_IF_ERROR(Bind(s, sid, 2, IteratorAnnotation::kThreadIdxX));
      } else {
        std::vector<int> outer = OuterSpaceIters(s, sid);
        if (outer.empty()) continue;  // a 1-block, 1-thread kernel
        // A stage of only space iterators with nothing attached inside: each thread may take a
        // vector of 1, 2 or 4 consecutive points (16-byte loads and stores where the accesses are
        // contiguous, codegen/emitter.h); the split is there even for 1, so mutation can widen it.
        bool vectorizable = static_cast<int>(outer.size()) == static_cast<int>(st.iters.size());
        for (int i = 0; i < static_cast<int>(st.iters.size()) && vectorizable; ++i) {
          vectorizable = !IsAttachPoint(s, sid, i);
        }
        const int window = vectorizable ? -1 : FusedLowReuseProducer(s, sid);
        if (!vectorizable && HasReduceIter(st) && NeedsMultiLevelTiling(s, sid)) {
          RETURN_IF_ERROR(SplitPointsPerThread(s, sid, outer, sid, rng));
        } else if (window >= 0) {
          RETURN_IF_ERROR(SplitPointsPerThread(s, sid, outer, window, rng));
        }
        ASSIGN_OR_RETURN(int f, FuseRange(s, sid, outer.front(), static_cast<int>(outer.size())));
        int64_t extent = s.stage(sid).iters[f].extent;
        if (vectorizable) {
          const std::vector<int64_t> widths =
              internal::VectorWidths(extent, ir::BytesOf(st.op->dtype), target);
          schedule::SplitStep vec;
          vec.stage_id = sid;
          vec.iter_id = f;
          vec.extent = extent;
          vec.lengths = {widths[Pick(rng, static_cast<int64_t>(widths.size()))]};
          RETURN_IF_ERROR(Apply(s, vec));
          RETURN_IF_ERROR(Bind(s, sid, f + 1, IteratorAnnotation::kVectorize));
          extent = s.stage(sid).iters[f].extent;
        }
        schedule::SplitStep sp;
        sp.stage_id = sid;
        sp.iter_id = f;
        sp.extent = extent;
        sp.lengths = {internal::SampleThreads(extent, options, rng)};
        RETURN_IF_ERROR(Apply(s, sp));
        RETURN_IF_ERROR(Bind(s, sid, f + 1, IteratorAnnotation::kThreadIdxX));
        RETURN_IF_ERROR(Bind(s, sid, f, IteratorAnnotation::kBlockIdxX));
      }
    } else if (st.location == ComputeLocation::kAttached && absl::EndsWith(st.name(), ".shared")) {
      // Cooperative fetching: all threads of the block load the tile, vectorized.
      const std::string consumer = s.stage(st.attach_stage).name();
      std::vector<int> src = SpaceTileSplits(s.steps(), info, consumer);
      int level = 1;
      if (src.empty() && HasCrossThreadReduction(s, st.attach_stage)) {
        // A row cache (sketch rule AddRowCacheRead): the consumer's thread split (one length, the
        // thread count) gives the fetch's threads.
        src = ThreadSplits(s.steps(), info, consumer);
        level = 0;
      }
      if (src.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("no tiling splits of '", consumer, "' to follow for '", st.name(), "'"));
      }
      ASSIGN_OR_RETURN(int f, FuseRange(s, sid, 0, static_cast<int>(st.iters.size())));
      const int64_t extent = s.stage(sid).iters[f].extent;
      const std::vector<int64_t> widths =
          internal::VectorWidths(extent, ir::BytesOf(st.op->dtype), target);
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
      ffs.level = level;
      ffs.factor_or_nparts = true;
      RETURN_IF_ERROR(Apply(s, ffs));
      RETURN_IF_ERROR(Bind(s, sid, f + 1, IteratorAnnotation::kThreadIdxX));
    }
  }
  return absl::OkStatus();
}

// True when the kernel of root stage `root` has a shared-memory cache_read stage computed inside
// a reduction loop of its consumer (the fetches PipelineSharedFetches stages a step ahead; a
// row cache computed at a space loop, as for softmax, is not pipelined, so a pragma there would
// only duplicate states).
bool HasSharedFetch(const State& s, int root) {
  for (int sid = 0; sid < s.num_stages(); ++sid) {
    const Stage& st = s.stage(sid);
    if (st.is_placeholder() || st.location != ComputeLocation::kAttached ||
        st.scope != ir::MemoryScope::kShared || st.attach_stage < 0 ||
        schedule::KernelRootStage(s, sid) != root) {
      continue;
    }
    const Stage& consumer = s.stage(st.attach_stage);
    const int at = consumer.IterIndex(st.attach_iter);
    if (at >= 0 && consumer.iters[at].kind == IteratorKind::kReduce) return true;
  }
  return false;
}

// auto_unroll_max_step pragmas on the stages with reduce iterators, and on a root stage with a
// window sum computed at its innermost iterator (FusedLowReuseProducer: its per-thread points
// unrolled, the windows' shared loads are one). With `max_pipeline` > 0 (GPU),
// each such stage also gets a software_pipeline pragma, 0..max_pipeline drawn uniformly, when its
// kernel fetches shared tiles in a reduction loop (HasSharedFetch) and no other stage of it got one
// (Lower pipelines a kernel unless a stage of it says 0: schedule/software_pipeline.h
// SoftwarePipelineEnabled).
absl::Status Unroll(State& s, const std::vector<int64_t>& steps, int max_pipeline,
                    std::mt19937_64& rng) {
  std::set<int> pipelined_roots;
  for (int sid = 0; sid < s.num_stages(); ++sid) {
    const Stage& st = s.stage(sid);
    if (st.is_placeholder() || st.location == ComputeLocation::kInlined || st.tensor_core ||
        (!HasReduceIter(st) &&
         (st.location != ComputeLocation::kRoot || FusedLowReuseProducer(s, sid) < 0))) {
      continue;
    }
    schedule::PragmaStep p;
    p.stage_id = sid;
    p.iter_id = 0;
    p.auto_unroll_max_step = steps[Pick(rng, static_cast<int64_t>(steps.size()))];
    RETURN_IF_ERROR(Apply(s, p));
    const int root = schedule::KernelRootStage(s, sid);
    if (max_pipeline > 0 && HasSharedFetch(s, root) && pipelined_roots.insert(root).second) {
      schedule::PragmaStep sp;
      sp.stage_id = sid;
      sp.iter_id = 0;
      sp.software_pipeline = static_cast<int>(Pick(rng, max_pipeline + 1));
      RETURN_IF_ERROR(Apply(s, sp));
    }
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

// A state being annotated: the sketch replayed with its split lengths filled (after the first
// rule) and each step's stage name and split kind, which the thread binding reads.
struct Annotating {
  const State& sketch;
  State state;
  std::vector<StepInfo> info;
};

// One step of random annotation (TVM's init-population rules). Rules run in table order; each
// draws its random choices from ctx.rng().
class AnnotationRule {
 public:
  virtual ~AnnotationRule() = default;
  virtual absl::Status Apply(Annotating& a, TuneContext& ctx) const = 0;
};

// InitFillTileSize: fills the unfilled split lengths while replaying the sketch.
class FillTileSize : public AnnotationRule {
 public:
  absl::Status Apply(Annotating& a, TuneContext& ctx) const override {
    ASSIGN_OR_RETURN(a.state, FillAndReplay(a.sketch, ctx, &a.info));
    return absl::OkStatus();
  }
};

// InitThreadBind (GPU).
class ThreadBind : public AnnotationRule {
 public:
  absl::Status Apply(Annotating& a, TuneContext& ctx) const override {
    return GpuThreadBind(a.state, a.info, ctx.target(), ctx.annotation(), ctx.rng());
  }
};

// InitUnroll: auto_unroll_max_step pragmas (GPU: and software_pipeline pragmas).
class UnrollPragmas : public AnnotationRule {
 public:
  absl::Status Apply(Annotating& a, TuneContext& ctx) const override {
    const AnnotationOptions& o = ctx.annotation();
    if (ctx.target().is_gpu()) {
      return Unroll(a.state, o.gpu_unroll_steps, o.gpu_max_software_pipeline, ctx.rng());
    }
    return Unroll(a.state, o.cpu_unroll_steps, /*max_pipeline=*/0, ctx.rng());
  }
};

// InitChangeComputeLocation (CPU; AnnotationOptions::change_compute_location).
class ChangeComputeLocation : public AnnotationRule {
 public:
  absl::Status Apply(Annotating& a, TuneContext& ctx) const override {
    if (!ctx.annotation().change_compute_location) return absl::OkStatus();
    return CpuChangeComputeLocation(a.state, ctx.rng());
  }
};

// InitParallel (CPU).
class Parallel : public AnnotationRule {
 public:
  absl::Status Apply(Annotating& a, TuneContext& ctx) const override {
    return CpuParallel(a.state, ctx.target());
  }
};

// InitVectorization (CPU).
class Vectorize : public AnnotationRule {
 public:
  absl::Status Apply(Annotating& a, TuneContext& ctx) const override {
    return CpuVectorize(a.state, ctx.annotation(), ctx.rng());
  }
};

struct AnnotationRuleEntry {
  std::unique_ptr<AnnotationRule> rule;
  bool cpu = false;
  bool gpu = false;
};

template <typename Rule>
AnnotationRuleEntry Entry(bool cpu, bool gpu) {
  return AnnotationRuleEntry{std::make_unique<Rule>(), cpu, gpu};
}

// The annotation rules in the order they run, and the targets they run on.
const std::vector<AnnotationRuleEntry>& AnnotationRules() {
  static const std::vector<AnnotationRuleEntry>* rules = [] {
    auto* r = new std::vector<AnnotationRuleEntry>();
    r->push_back(Entry<FillTileSize>(/*cpu=*/true, /*gpu=*/true));
    r->push_back(Entry<ThreadBind>(/*cpu=*/false, /*gpu=*/true));
    r->push_back(Entry<ChangeComputeLocation>(/*cpu=*/true, /*gpu=*/false));
    r->push_back(Entry<Parallel>(/*cpu=*/true, /*gpu=*/false));
    r->push_back(Entry<UnrollPragmas>(/*cpu=*/true, /*gpu=*/true));
    r->push_back(Entry<Vectorize>(/*cpu=*/true, /*gpu=*/false));
    return r;
  }();
  return *rules;
}

}  // namespace

namespace internal {

bool GpuTileRunFits(const TuneContext& ctx, const std::vector<Step>& steps, int i) {
  const ir::ComputeDAG& dag = ctx.dag();
  const Target& target = ctx.target();
  const AnnotationOptions& options = ctx.annotation();
  auto in_run = [&](int j, int sid) {
    const auto* sp = std::get_if<schedule::SplitStep>(&steps[j]);
    return sp != nullptr && sp->stage_id == sid && sp->lengths.size() >= 2 &&
           std::all_of(sp->lengths.begin(), sp->lengths.end(),
                       [](const auto& l) { return l.has_value(); });
  };
  if (!target.is_gpu() || i < 0 || i >= static_cast<int>(steps.size())) return true;
  const auto* split = std::get_if<schedule::SplitStep>(&steps[i]);
  if (split == nullptr || !in_run(i, split->stage_id)) return true;
  const int sid = split->stage_id;
  int begin = i, end = i + 1;
  while (begin > 0 && in_run(begin - 1, sid)) --begin;
  while (end < static_cast<int>(steps.size()) && in_run(end, sid)) ++end;
  absl::StatusOr<State> s =
      schedule::ReplaySteps(dag, std::vector<Step>(steps.begin(), steps.begin() + begin));
  if (!s.ok() || sid >= s->num_stages()) return true;
  int64_t vthreads = 1, threads = 1, local = 1, space = 1;
  bool tiled = false;
  for (int j = begin; j < end; ++j) {
    const auto& sp = std::get<schedule::SplitStep>(steps[j]);
    if (sp.iter_id < 0 || sp.iter_id >= static_cast<int>(s->stage(sid).iters.size())) return true;
    const schedule::Iterator& it = s->stage(sid).iters[sp.iter_id];
    std::vector<int64_t> l;
    for (const auto& v : sp.lengths) l.push_back(*v);
    if (it.kind == IteratorKind::kSpace && l.size() >= 2) {
      tiled = true;
      space *= it.extent;
      vthreads *= l[0];
      threads *= l[1];
      local *= Prod(l, 2);
      if (!KeepsThreadLevels(it.extent, l)) return false;
    }
    absl::StatusOr<State> next = schedule::ApplyStep(*s, steps[j]);
    if (!next.ok()) return true;
    s = *std::move(next);
  }
  if (!tiled) return true;
  const int64_t min_threads = space >= int64_t{16} * target.warp_size ? target.warp_size : 1;
  return vthreads <= MaxVthreads(target, options) && threads <= target.max_threads_per_block &&
         threads >= min_threads && RegistersFit(threads, vthreads * local, target, options);
}

absl::Status CheckRegisterEstimate(const schedule::LoweredKernel& kernel, const Target& target,
                                   const AnnotationOptions& options) {
  if (!target.is_gpu()) return absl::OkStatus();
  // The kernels: the top-level statements under the global allocations.
  ir::Stmt body = kernel.nest.body;
  while (body.defined() && body.as<ir::AllocateNode>()) body = body.as<ir::AllocateNode>()->body;
  std::vector<ir::Stmt> kernels;
  if (body.defined() && body.as<ir::SeqNode>()) {
    kernels = body.as<ir::SeqNode>()->stmts;
  } else if (body.defined()) {
    kernels.push_back(body);
  }
  std::vector<int64_t> local(kernels.size(), 0);
  for (size_t i = 0; i < kernels.size(); ++i) local[i] = ir::LocalElements(kernels[i]);
  for (size_t i = 0; i < kernel.launches.size(); ++i) {
    const auto& l = kernel.launches[i];
    const int64_t threads = l.block[0] * l.block[1] * l.block[2];
    // Launches and statements correspond one to one; if not, use the largest local buffer.
    const int64_t elements = kernels.size() == kernel.launches.size()
                                 ? local[i]
                                 : *std::max_element(local.begin(), local.end());
    if (!RegistersFit(threads, elements, target, options)) {
      const int64_t regs = RegisterEstimate(elements, options);
      return absl::FailedPreconditionError(absl::StrCat(
          "invalid_schedule: about ", regs, " registers per thread (", elements,
          " local elements + ", options.gpu_register_overhead, ") x ", threads,
          " threads exceed the limits ", options.gpu_max_registers_per_thread, " per thread, ",
          target.max_registers_per_block, " per block (kernel ", i, ")"));
    }
  }
  return absl::OkStatus();
}

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
  thread_local std::map<std::tuple<int64_t, int, int64_t>, std::vector<std::vector<int64_t>>> memo;
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

absl::StatusOr<Candidate> AnnotateSketch(const State& sketch, TuneContext& ctx) {
  const bool gpu = ctx.target().is_gpu();
  Annotating a{sketch, sketch, {}};
  for (const AnnotationRuleEntry& e : AnnotationRules()) {
    if (gpu ? e.gpu : e.cpu) RETURN_IF_ERROR(e.rule->Apply(a, ctx));
  }
  return LowerCandidate(std::move(a.state), ctx);
}

const State& PickSketch(const std::vector<State>& sketches, const AnnotationOptions& options,
                        std::mt19937_64& rng) {
  std::vector<const State*> tensor_core, simt;
  for (const State& s : sketches) (HasTensorCoreStep(s) ? tensor_core : simt).push_back(&s);
  if (tensor_core.empty() ||
      (!simt.empty() && internal::Uniform01(rng) >= options.tensor_core_share)) {
    return *simt[Pick(rng, static_cast<int64_t>(simt.size()))];
  }
  // TF32 allowed (both float32 kinds sketched): one-pass tf32 three times as often as 3xTF32,
  // which is only slower wherever one-pass TF32 passes the check (a tune drawing them alike spent
  // three quarters of its trials on 3xTF32, bench/NOTES.md) but stays for the problems where it
  // does not (a gate whose TF32 error moves it off a flat region: swiglu_gate).
  auto kind_of = [](const State* s) -> std::string {
    for (const auto& step : s->steps()) {
      if (const auto* t = std::get_if<schedule::TensorCoreStep>(&step)) return t->kind;
    }
    return "";
  };
  bool one_pass = false;
  for (const State* s : tensor_core) one_pass |= kind_of(s) == "tf32";
  std::vector<double> weight;
  double total = 0;
  for (const State* s : tensor_core) {
    weight.push_back(one_pass && kind_of(s) == "tf32x3" ? 1.0 : 3.0);
    total += weight.back();
  }
  double r = internal::Uniform01(rng) * total;
  for (size_t i = 0; i < tensor_core.size(); ++i) {
    r -= weight[i];
    if (r < 0) return *tensor_core[i];
  }
  return *tensor_core.back();
}

std::vector<State> SampleInitialPopulation(const std::vector<State>& sketches, int n,
                                           TuneContext& ctx) {
  const AnnotationOptions& options = ctx.annotation();
  std::mt19937_64& rng = ctx.rng();
  std::vector<State> out;
  if (sketches.empty() || n <= 0) return out;
  std::set<uint64_t> seen;
  const int64_t max_attempts = int64_t{n} * std::max(1, options.max_attempts_per_state);
  for (int64_t attempt = 0; attempt < max_attempts && static_cast<int>(out.size()) < n; ++attempt) {
    absl::StatusOr<Candidate> c = AnnotateSketch(PickSketch(sketches, options, rng), ctx);
    if (!c.ok()) continue;
    if (seen.insert(c->state.Hash()).second) out.push_back(std::move(c->state));
  }
  return out;
}

}  // namespace tilesearch::search
