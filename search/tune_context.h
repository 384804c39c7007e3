// What the rules of the search see (after MetaSchedule's TuneContext, tvm/meta_schedule/
// tune_context.h): the task (the computation, the target it is scheduled for, the workload key its
// records are logged under), the options of sketch generation, annotation, mutation and evolution,
// and a random generator. Sketch rules (search/sketch_rules.h), annotation rules
// (search/annotation.h), mutation rules (search/mutation.h), the evolutionary search and local
// search take one instead of separate (dag, target, options, rng) arguments.
//
// A candidate of the search (Candidate) is a state together with its lowering: the search lowers
// each state once, to check that it is a valid program, and the lowered kernel travels with the
// state to the cost model's features and to the build.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "schedule/lower.h"
#include "schedule/state.h"
#include "search/search_options.h"

namespace tilesearch::search {

/// One tuning task: the computation, the hardware it is scheduled for, and the key its records
/// are logged under (measure::PrecisionWorkloadKey(dag.WorkloadKey(), precision): the DAG's key
/// under the default ieee precision).
struct SearchTask {
  SearchTask(ir::ComputeDAG dag, Target target,
             measure::Fp32Precision precision = measure::Fp32Precision::kIeee);
  ir::ComputeDAG dag;
  Target target;
  std::string workload_key;
};

class LoweringCache;

/// The task, the options and a random generator. Copies share the task and the options (both
/// immutable once the context is made); each copy has its own generator state. Fork gives a
/// context with a freshly seeded generator: the per-item work that the evolutionary search runs
/// on worker threads gets one each, so results do not depend on the thread count.
class TuneContext {
 public:
  /// A context for `task` with `options` (SearchOptions::annotation are the annotation and
  /// mutation options) and sketch options, its generator seeded with `seed`.
  explicit TuneContext(std::shared_ptr<const SearchTask> task, SearchOptions options = {},
                       uint64_t seed = 0, SketchOptions sketch = {});
  /// As above, for a task made of `dag` and `target`.
  TuneContext(ir::ComputeDAG dag, Target target, SearchOptions options = {}, uint64_t seed = 0,
              SketchOptions sketch = {});
  /// As above, with default search options but `annotation` as annotation / mutation options.
  TuneContext(ir::ComputeDAG dag, Target target, const AnnotationOptions& annotation,
              uint64_t seed = 0);

  const SearchTask& task() const { return *shared_->task; }
  const ir::ComputeDAG& dag() const { return shared_->task->dag; }
  const Target& target() const { return shared_->task->target; }
  const std::string& workload_key() const { return shared_->task->workload_key; }
  const SearchOptions& options() const { return shared_->options; }
  /// The annotation and mutation options (options().annotation).
  const AnnotationOptions& annotation() const { return shared_->options.annotation; }
  const SketchOptions& sketch_options() const { return shared_->sketch; }

  /// The generator every random choice of a rule draws from.
  std::mt19937_64& rng() { return rng_; }
  /// The same task and options with a generator seeded with `seed` (and the same lowering
  /// cache, if any).
  TuneContext Fork(uint64_t seed) const;

  /// A copy of this context (same task, generator state and lowering cache) whose annotation
  /// draws tensor-core sketches with probability `share` (AnnotationOptions::tensor_core_share);
  /// the tuner's measured family shares (search/sketch_family.h).
  TuneContext WithTensorCoreShare(double share) const;
  /// A copy of this context (same task, generator state and lowering cache) whose evolutionary
  /// search draws `eps` of its output at random (SearchOptions::eps_greedy).
  TuneContext WithEpsGreedy(double eps) const;

  /// A copy of this context (same task, options and generator state) whose edited step lists
  /// are lowered through `cache` (internal::FinishEdit); null: no cache.
  TuneContext WithLoweringCache(std::shared_ptr<LoweringCache> cache) const;
  /// The cache edited step lists are lowered through; null when none.
  LoweringCache* lowering_cache() const { return lowering_cache_.get(); }

 private:
  struct Shared {
    std::shared_ptr<const SearchTask> task;
    SearchOptions options;
    SketchOptions sketch;
  };
  TuneContext(std::shared_ptr<const Shared> shared, uint64_t seed,
              std::shared_ptr<LoweringCache> cache)
      : shared_(std::move(shared)), rng_(seed), lowering_cache_(std::move(cache)) {}
  // A copy (same task, generator state and lowering cache) with `options` as its search options.
  TuneContext WithOptions(SearchOptions options) const;

  std::shared_ptr<const Shared> shared_;
  std::mt19937_64 rng_;
  std::shared_ptr<LoweringCache> lowering_cache_;
};

/// A candidate program: a state and its lowering for the context's target, made once when the
/// state was validated (LowerCandidate) and reused for features and the build.
struct Candidate {
  schedule::State state;
  /// Null for a state replayed from a log that no longer lowers (it then has no features and is
  /// not built); lower_ms is then 0.
  std::shared_ptr<const schedule::LoweredKernel> lowered;
  /// Wall-clock milliseconds the lowering took (reported as part of the record's compile time).
  double lower_ms = 0;
};

/// The outcome of lowering each step list tried (a Candidate or the error), by StepsHash of the
/// steps (search/measure_record.h), for one context's task and options. Mutation picks its
/// parents by fitness, so the same few edits of the best states come up again and again within
/// one search call (half of the children of an fp32 matmul 4096³ generation had been seen
/// before); replaying and lowering one is deterministic, so the stored outcome is what lowering
/// it again would give (but lower_ms, the first lowering's). Safe to share between threads.
/// Like the tuning log, it takes equal StepsHash for equal steps.
class LoweringCache {
 public:
  /// The outcome stored for `hash`; nullopt when none.
  std::optional<absl::StatusOr<Candidate>> Find(uint64_t hash) const;
  /// Stores `outcome` for `hash`; a second outcome for one hash (two threads lowering the same
  /// steps at once) keeps the first.
  void Insert(uint64_t hash, const absl::StatusOr<Candidate>& outcome);
  /// Lookups answered by a stored outcome.
  int64_t hits() const;
  /// Empties the cache and returns its outcomes (so that the caller decides where the last
  /// references to their lowerings are dropped).
  std::vector<absl::StatusOr<Candidate>> Take();

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, absl::StatusOr<Candidate>> outcomes_;
  mutable int64_t hits_ = 0;
};

/// Lowers `state` for ctx.target() and checks the register estimate (internal::
/// CheckRegisterEstimate with ctx.annotation()): the one lowering of a search candidate. Errors:
/// schedule::Lower's (kInvalidArgument, kFailedPrecondition "invalid_schedule: ...") or the
/// register check's.
[[nodiscard]] absl::StatusOr<Candidate> LowerCandidate(schedule::State state,
                                                       const TuneContext& ctx);

}  // namespace tilesearch::search
