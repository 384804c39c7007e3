// Sketch generation: the rule-driven walk over stages (TVM sketch_policy.cc GenerateSketches).
#include "search/sketch.h"

#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"

namespace tilesearch::search {

absl::StatusOr<std::vector<schedule::State>> GenerateSketches(const TuneContext& ctx) {
  const ir::ComputeDAG& dag = ctx.dag();
  const SketchOptions& options = ctx.sketch_options();
  const auto& rules = ctx.target().is_gpu() ? GpuSketchRules() : CpuSketchRules();
  std::vector<std::pair<PartialSketch, int>> pending;
  pending.emplace_back(PartialSketch(dag), dag.num_stages() - 1);
  std::vector<schedule::State> out;
  // Bounds the walk against a rule that never advances (each stage is visited a few times).
  int budget = 4096;
  while (!pending.empty() && static_cast<int>(out.size()) < options.max_sketches) {
    if (--budget < 0) return absl::InternalError("sketch generation did not terminate");
    auto [sketch, sid] = std::move(pending.front());
    pending.erase(pending.begin());
    if (sid < 0) {
      out.push_back(sketch.ToState());
      continue;
    }
    std::vector<std::pair<PartialSketch, int>> next;
    for (const auto& rule : rules) {
      RuleCondition c = rule->Condition(sketch, sid, ctx);
      if (c == RuleCondition::kPass) continue;
      auto derived = rule->Apply(sketch, sid, ctx);
      // A rule whose steps do not apply to this state is treated as not applicable.
      if (!derived.ok() || derived->empty()) continue;
      for (auto& d : *derived) next.push_back(std::move(d));
      if (c == RuleCondition::kApplyAndSkipRest) break;
    }
    // Depth-first keeps the first sketches complete early; order is deterministic.
    pending.insert(pending.begin(), std::make_move_iterator(next.begin()),
                   std::make_move_iterator(next.end()));
  }
  if (out.empty()) return absl::InternalError("no sketch was generated");
  return out;
}

std::vector<schedule::Step> FillUnfilledWithOnes(const std::vector<schedule::Step>& steps) {
  std::vector<schedule::Step> out = steps;
  for (auto& st : out) {
    if (auto* sp = std::get_if<schedule::SplitStep>(&st)) {
      for (auto& l : sp->lengths) {
        if (!l.has_value()) l = 1;
      }
    }
  }
  return out;
}

}  // namespace tilesearch::search
