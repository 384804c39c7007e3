// TuneContext and the one lowering of a candidate (see tune_context.h).
#include "search/tune_context.h"

#include <chrono>
#include <utility>

#include "base/status.h"
#include "search/annotation.h"

namespace tilesearch::search {

SearchTask::SearchTask(ir::ComputeDAG dag_in, Target target_in, measure::Fp32Precision precision)
    : dag(std::move(dag_in)),
      target(std::move(target_in)),
      workload_key(measure::PrecisionWorkloadKey(dag.WorkloadKey(), precision)) {}

namespace {

// The tf32 precision draws the one-pass TF32 MMA kind too.
SketchOptions WithPrecision(SketchOptions sketch, const SearchOptions& options) {
  if (options.precision == measure::Fp32Precision::kTf32) sketch.allow_tf32 = true;
  return sketch;
}

}  // namespace

TuneContext::TuneContext(std::shared_ptr<const SearchTask> task, SearchOptions options,
                         uint64_t seed, SketchOptions sketch)
    : shared_(std::make_shared<const Shared>(
          Shared{std::move(task), options, WithPrecision(std::move(sketch), options)})),
      rng_(seed) {}

TuneContext::TuneContext(ir::ComputeDAG dag, Target target, SearchOptions options, uint64_t seed,
                         SketchOptions sketch)
    : TuneContext(
          std::make_shared<const SearchTask>(std::move(dag), std::move(target), options.precision),
          std::move(options), seed, std::move(sketch)) {}

TuneContext::TuneContext(ir::ComputeDAG dag, Target target, const AnnotationOptions& annotation,
                         uint64_t seed)
    : TuneContext(std::move(dag), std::move(target), SearchOptions{.annotation = annotation},
                  seed) {}

TuneContext TuneContext::Fork(uint64_t seed) const {
  return TuneContext(shared_, seed, lowering_cache_);
}

TuneContext TuneContext::WithTensorCoreShare(double share) const {
  SearchOptions options = shared_->options;
  options.annotation.tensor_core_share = share;
  return WithOptions(std::move(options));
}

TuneContext TuneContext::WithEpsGreedy(double eps) const {
  SearchOptions options = shared_->options;
  options.eps_greedy = eps;
  return WithOptions(std::move(options));
}

TuneContext TuneContext::WithOptions(SearchOptions options) const {
  Shared shared = *shared_;
  shared.options = std::move(options);
  TuneContext out = *this;
  out.shared_ = std::make_shared<const Shared>(std::move(shared));
  return out;
}

TuneContext TuneContext::WithLoweringCache(std::shared_ptr<LoweringCache> cache) const {
  TuneContext out = *this;
  out.lowering_cache_ = std::move(cache);
  return out;
}

std::optional<absl::StatusOr<Candidate>> LoweringCache::Find(uint64_t hash) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = outcomes_.find(hash);
  if (it == outcomes_.end()) return std::nullopt;
  ++hits_;
  return it->second;
}

void LoweringCache::Insert(uint64_t hash, const absl::StatusOr<Candidate>& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  outcomes_.emplace(hash, outcome);
}

std::vector<absl::StatusOr<Candidate>> LoweringCache::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<absl::StatusOr<Candidate>> out;
  out.reserve(outcomes_.size());
  for (auto& [hash, outcome] : outcomes_) out.push_back(std::move(outcome));
  outcomes_.clear();
  return out;
}

int64_t LoweringCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

absl::StatusOr<Candidate> LowerCandidate(schedule::State state, const TuneContext& ctx) {
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(schedule::LoweredKernel kernel, schedule::Lower(ctx.dag(), state, ctx.target()));
  const double lower_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  RETURN_IF_ERROR(internal::CheckRegisterEstimate(kernel, ctx.target(), ctx.annotation()));
  return Candidate{std::move(state),
                   std::make_shared<const schedule::LoweredKernel>(std::move(kernel)), lower_ms};
}

}  // namespace tilesearch::search
