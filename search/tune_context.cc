// TuneContext and the one lowering of a candidate (see tune_context.h).
#include "search/tune_context.h"

#include <chrono>
#include <utility>

#include "base/status.h"
#include "search/annotation.h"

namespace tilesearch::search {

SearchTask::SearchTask(ir::ComputeDAG dag_in, Target target_in)
    : dag(std::move(dag_in)), target(std::move(target_in)), workload_key(dag.WorkloadKey()) {}

TuneContext::TuneContext(std::shared_ptr<const SearchTask> task, SearchOptions options,
                         uint64_t seed, SketchOptions sketch)
    : shared_(std::make_shared<const Shared>(
          Shared{std::move(task), std::move(options), std::move(sketch)})),
      rng_(seed) {}

TuneContext::TuneContext(ir::ComputeDAG dag, Target target, SearchOptions options, uint64_t seed,
                         SketchOptions sketch)
    : TuneContext(std::make_shared<const SearchTask>(std::move(dag), std::move(target)),
                  std::move(options), seed, std::move(sketch)) {}

TuneContext::TuneContext(ir::ComputeDAG dag, Target target, const AnnotationOptions& annotation,
                         uint64_t seed)
    : TuneContext(std::move(dag), std::move(target), SearchOptions{.annotation = annotation},
                  seed) {}

TuneContext TuneContext::Fork(uint64_t seed) const { return TuneContext(shared_, seed); }

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
