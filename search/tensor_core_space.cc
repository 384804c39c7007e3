#include "search/tensor_core_space.h"

#include <algorithm>
#include <variant>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/stmt.h"

namespace tilesearch::search {
namespace {

using schedule::TensorCoreStep;

constexpr int64_t kWarpM[] = {16, 32, 64};
constexpr int64_t kWarpN[] = {8, 16, 32, 64};
constexpr int64_t kWarps[] = {1, 2, 4};
constexpr int64_t kKMultiples[] = {1, 2, 4};
constexpr int kPipelines[] = {1, 2, 3, 4};
constexpr int64_t kRasters[] = {1, 2, 4, 8, 16};
constexpr int kSplits[] = {2, 4, 8, 16};  // drawn when a draw splits k
// Accumulator registers a thread may hold (64x64 warp tiles: 128, CUTLASS's largest).
constexpr int64_t kMaxAccumulators = 128;

template <typename T, size_t N>
T PickFrom(const T (&values)[N], std::mt19937_64& rng) {
  return values[rng() % N];
}

int64_t PowerOfTwoAtLeast(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

ir::MmaKind KindOf(const TensorCoreStep& t) {
  return ir::ParseMmaKind(t.kind).value_or(ir::MmaKind::kF16);
}

// Tiles larger than twice the problem (rounded to a power of two) only add idle warps; a k
// range of split_k should keep at least 4 k tiles.
bool SizedForProblem(const TensorCoreStep& t, const schedule::MatmulLike& mm) {
  const int64_t k_tiles = (mm.k + t.block_k - 1) / t.block_k;
  return (t.split_k == 1 || k_tiles >= 4 * static_cast<int64_t>(t.split_k)) &&
         t.block_m <= std::max<int64_t>(16, PowerOfTwoAtLeast(mm.m)) &&
         t.block_n <= std::max<int64_t>(8, PowerOfTwoAtLeast(mm.n)) &&
         t.block_k <= std::max<int64_t>(ir::MmaK(KindOf(t)), PowerOfTwoAtLeast(mm.k));
}

}  // namespace

bool HasTensorCoreStep(const schedule::State& s) {
  return std::any_of(s.steps().begin(), s.steps().end(), [](const schedule::Step& st) {
    return std::holds_alternative<TensorCoreStep>(st);
  });
}

std::vector<std::string> TensorCoreKinds(const schedule::MatmulLike& mm, bool allow_tf32) {
  if (mm.a_type != mm.b_type) return {};
  switch (mm.a_type) {
    case ir::ScalarType::kFloat16:
      return {"f16"};
    case ir::ScalarType::kBFloat16:
      return {"bf16"};
    case ir::ScalarType::kFloat32:
      if (allow_tf32) return {"tf32x3", "tf32"};
      return {"tf32x3"};
    default:
      return {};
  }
}

bool TensorCoreStepFits(const TensorCoreStep& t, const Target& target) {
  const ir::MmaKind kind = KindOf(t);
  const int64_t bytes = ir::BytesOf(ir::MmaOperandType(kind));
  const int64_t warps = (t.block_m / t.warp_m) * (t.block_n / t.warp_n);
  const int64_t a_tile = t.block_m * (t.block_k + t.pad);
  const int64_t b_tile = std::max(t.block_n * (t.block_k + t.pad), t.block_k * (t.block_n + t.pad));
  const int64_t shared = t.pipeline * (a_tile + b_tile) * bytes;
  // TF32 kinds keep a second fragment set per k tile (tensor_core_lower.cc: tile_acc).
  const int64_t fragments = kind == ir::MmaKind::kTF32 || kind == ir::MmaKind::kTF32x3 ? 2 : 1;
  return warps * 32 <= target.max_threads_per_block && shared <= target.max_shared_memory_optin &&
         fragments * t.warp_m * t.warp_n / 32 <= kMaxAccumulators;
}

absl::StatusOr<TensorCoreStep> SampleTensorCoreStep(TensorCoreStep base, const schedule::State& s,
                                                    const Target& target, std::mt19937_64& rng) {
  if (base.stage_id < 0 || base.stage_id >= s.num_stages()) {
    return absl::InvalidArgumentError(absl::StrCat(base.ToString(), ": no such stage"));
  }
  const schedule::Stage& st = s.stage(base.stage_id);
  ASSIGN_OR_RETURN(schedule::MatmulLike mm, schedule::AnalyzeMatmulLike(*st.op, st.op->body));
  const ir::MmaKind kind = KindOf(base);
  const int64_t kk = ir::MmaK(kind);
  const int64_t pad = 16 / ir::BytesOf(ir::MmaOperandType(kind));
  constexpr int kDraws = 32;
  for (int d = 0; d < kDraws; ++d) {
    TensorCoreStep t = base;
    t.warp_m = PickFrom(kWarpM, rng);
    t.warp_n = PickFrom(kWarpN, rng);
    t.block_m = t.warp_m * PickFrom(kWarps, rng);
    t.block_n = t.warp_n * PickFrom(kWarps, rng);
    t.block_k = kk * PickFrom(kKMultiples, rng) * (kk == 8 ? 2 : 1);
    t.pipeline = PickFrom(kPipelines, rng);
    t.pad = (rng() & 1) ? pad : 0;
    t.raster = PickFrom(kRasters, rng);
    t.split_k = (rng() & 1) ? PickFrom(kSplits, rng) : 1;
    if (t.split_k > 1 && (t.split_k * 4 * t.block_k > mm.k)) t.split_k = 1;
    if (TensorCoreStepFits(t, target) && SizedForProblem(t, mm)) return t;
  }
  TensorCoreStep t = base;
  t.warp_m = t.block_m = 16;
  t.warp_n = t.block_n = 8;
  t.block_k = kk;
  t.pipeline = 1;
  t.pad = pad;
  t.raster = 1;
  t.split_k = 1;
  return t;
}

std::vector<TensorCoreStep> TensorCoreStepVariants(const TensorCoreStep& t,
                                                   const schedule::MatmulLike& mm,
                                                   const Target& target, int decision) {
  const int64_t kk = ir::MmaK(KindOf(t));
  const int64_t pad = 16 / ir::BytesOf(ir::MmaOperandType(KindOf(t)));
  const int64_t warps_m = t.block_m / t.warp_m;
  const int64_t warps_n = t.block_n / t.warp_n;
  // `t` with the decision set to each of `values` by `set`.
  auto variants = [&](const auto& values, const auto& set) {
    std::vector<TensorCoreStep> out;
    for (const auto v : values) {
      TensorCoreStep c = t;
      set(c, static_cast<int64_t>(v));
      out.push_back(c);
    }
    return out;
  };
  const int64_t pads[] = {0, pad};
  const int64_t splits[] = {1, 2, 4, 8, 16};
  std::vector<TensorCoreStep> candidates;
  switch (decision) {
    case 0:  // warp tile rows, warps per block kept
      candidates = variants(kWarpM, [&](TensorCoreStep& c, int64_t v) {
        c.warp_m = v;
        c.block_m = v * warps_m;
      });
      break;
    case 1:  // warp tile columns
      candidates = variants(kWarpN, [&](TensorCoreStep& c, int64_t v) {
        c.warp_n = v;
        c.block_n = v * warps_n;
      });
      break;
    case 2:  // warps along m
      candidates =
          variants(kWarps, [&](TensorCoreStep& c, int64_t v) { c.block_m = t.warp_m * v; });
      break;
    case 3:  // warps along n
      candidates =
          variants(kWarps, [&](TensorCoreStep& c, int64_t v) { c.block_n = t.warp_n * v; });
      break;
    case 4:
      candidates = variants(kKMultiples, [&](TensorCoreStep& c, int64_t v) {
        c.block_k = kk * v * (kk == 8 ? 2 : 1);
      });
      break;
    case 5:
      candidates = variants(kPipelines,
                            [](TensorCoreStep& c, int64_t v) { c.pipeline = static_cast<int>(v); });
      break;
    case 6:
      candidates = variants(pads, [](TensorCoreStep& c, int64_t v) { c.pad = v; });
      break;
    case 7:
      candidates =
          variants(splits, [](TensorCoreStep& c, int64_t v) { c.split_k = static_cast<int>(v); });
      break;
    case 8:
      candidates = variants(kRasters, [](TensorCoreStep& c, int64_t v) { c.raster = v; });
      break;
    default:
      break;
  }
  std::vector<TensorCoreStep> options;
  for (const TensorCoreStep& c : candidates) {
    if (!(c == t) && TensorCoreStepFits(c, target) && SizedForProblem(c, mm)) options.push_back(c);
  }
  return options;
}

bool MutateTensorCoreStep(TensorCoreStep& t, const schedule::MatmulLike& mm, const Target& target,
                          std::mt19937_64& rng) {
  const std::vector<TensorCoreStep> options =
      TensorCoreStepVariants(t, mm, target, static_cast<int>(rng() % kTensorCoreDecisions));
  if (options.empty()) return false;
  t = options[rng() % options.size()];
  return true;
}

}  // namespace tilesearch::search
