#include "search/tensor_core_space.h"

#include <algorithm>
#include <variant>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/stmt.h"
#include "schedule/wgmma_layout.h"

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
// wgmma (TensorCoreStep::warpgroup): warpgroup tiles, warpgroups per block side, k depths.
constexpr int64_t kGroupM[] = {64, 128};
constexpr int64_t kGroupN[] = {32, 64, 128, 256};
constexpr int64_t kGroups[] = {1, 2};
constexpr int64_t kGroupK[] = {16, 32, 64};  // 2-byte elements; 8, 16, 32 for TF32's 4 bytes
constexpr int kGroupPipelines[] = {2, 3, 4, 5, 6};

bool HasWgmma(const Target& target) { return schedule::TargetHasWgmma(target); }

ir::MmaKind KindOf(const TensorCoreStep& t) {
  return ir::ParseMmaKind(t.kind).value_or(ir::MmaKind::kF16);
}

bool IsTf32Kind(const TensorCoreStep& t) {
  const ir::MmaKind k = KindOf(t);
  return k == ir::MmaKind::kTF32 || k == ir::MmaKind::kTF32x3;
}

// Bytes of an operand element: 2 (f16, bf16) or 4 (the TF32 kinds' float32).
int64_t ElementBytes(const TensorCoreStep& t) { return ir::BytesOf(ir::MmaOperandType(KindOf(t))); }

// A wgmma block_k of kGroupK's row bytes for `t`'s element size.
int64_t GroupK(const TensorCoreStep& t, int64_t half_k) { return half_k * 2 / ElementBytes(t); }

// Whether the lowering can place the tiles of wgmma step `t` (schedule/wgmma_layout.h).
bool WgmmaLayoutsFit(const TensorCoreStep& t, const schedule::MatmulLike& mm) {
  return schedule::PlanWgmmaLayouts(t, mm).ok();
}

template <typename T, size_t N>
T PickFrom(const T (&values)[N], std::mt19937_64& rng) {
  return values[rng() % N];
}

int64_t PowerOfTwoAtLeast(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
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

// Whether `t` is a wgmma tf32x3 tiling whose operands repack: with repack, its repack kernels
// store both TF32 parts and the GEMM copies nothing (schedule/tensor_core_lower.cc: presplit).
bool Presplittable(const TensorCoreStep& t, const schedule::MatmulLike& mm) {
  return t.warpgroup && KindOf(t) == ir::MmaKind::kTF32x3 && mm.repack_plannable;
}

// Three in four draws repack the operands where that removes a gather (a convolution's window):
// the hand 3x3 convolution's gathers cost more than its products (bench/NOTES.md); and where a
// wgmma tf32x3 tiling then reads presplit parts instead of splitting each k tile in the kernel
// (the in-kernel split's copies fill the issue slots of the float32 matmul 4096^3: bench/NOTES.md).
bool DrawRepack(const TensorCoreStep& t, const schedule::MatmulLike& mm, std::mt19937_64& rng) {
  return (mm.repackable || Presplittable(t, mm)) && rng() % 4 != 0;
}

// Whether both operands of the stage are placeholders of `s` whose rows are whole 16-byte chunks
// (a tensor map's strides).
bool TmaSources(const schedule::MatmulLike& mm, const schedule::State& s) {
  for (const ir::Expr* factor : {&mm.a, &mm.b}) {
    const ir::LoadNode* load = schedule::PlainOperandLoad(*factor);
    const int id = load ? s.StageId(load->buffer) : -1;
    if (id < 0 || !s.stage(id).is_placeholder()) return false;
    const std::vector<int64_t>& shape = s.stage(id).op->shape;
    if (shape.empty() || shape.back() * ir::BytesOf(load->type) % 16 != 0) return false;
  }
  return true;
}

}  // namespace

bool TmaOperands(const TensorCoreStep& t, const schedule::MatmulLike& mm,
                 const schedule::State& s) {
  const ir::MmaKind kind = KindOf(t);
  return t.warpgroup && !t.repack && (kind == ir::MmaKind::kF16 || kind == ir::MmaKind::kBF16) &&
         mm.m_axes.size() == 1 && mm.n_axes.size() == 1 &&
         schedule::PlainOperandLoad(mm.a) != nullptr &&
         schedule::PlainOperandLoad(mm.b) != nullptr && TmaSources(mm, s);
}

bool HasTensorCoreStep(const std::vector<schedule::Step>& steps) {
  return std::any_of(steps.begin(), steps.end(), [](const schedule::Step& st) {
    return std::holds_alternative<TensorCoreStep>(st);
  });
}

bool HasTensorCoreStep(const schedule::State& s) { return HasTensorCoreStep(s.steps()); }

std::vector<std::string> TensorCoreKinds(const schedule::MatmulLike& mm, bool allow_tf32) {
  if (mm.a_type != mm.b_type) return {};
  switch (mm.a_type) {
    case ir::ScalarType::kFloat16:
      return {"f16"};
    case ir::ScalarType::kBFloat16:
      return {"bf16"};
    case ir::ScalarType::kFloat32:
      // TF32 allowed: both; PickSketch draws one-pass tf32 three times as often.
      if (allow_tf32) return {"tf32x3", "tf32"};
      return {"tf32x3"};
    default:
      return {};
  }
}

bool TensorCoreStepFits(const TensorCoreStep& t, const Target& target) {
  if (t.warpgroup) {
    const int64_t tile = (t.block_m + t.block_n) * t.block_k * ElementBytes(t);
    // TF32 kinds: the ring of float32 tiles, then TF32 tiles (big, and small for tf32x3; two sets
    // of them with a ring of 2 or more; one-pass tf32 copies B at most, counted as the whole) and,
    // for tf32x3, a tile accumulator beside the accumulator (schedule/tensor_core_lower.cc).
    const bool tf32 = schedule::WgmmaSplitsTf32(t);
    const int64_t parts = !tf32 ? 0 : KindOf(t) == ir::MmaKind::kTF32x3 ? 2 : 1;
    const int64_t sets = t.pipeline >= 2 ? 2 : 1;
    // One-pass tf32 without repack pads A's plain ring rows (up to 8 elements of 4 bytes).
    const int64_t a_pad = KindOf(t) == ir::MmaKind::kTF32 && !t.repack
                              ? t.pipeline * std::max(t.block_m, t.block_k) * 8 * 4
                              : 0;
    // tf32x3 with repack: a second ring of the small parts (schedule/tensor_core_lower.cc).
    const int64_t rings = KindOf(t) == ir::MmaKind::kTF32x3 && t.repack ? 2 : 1;
    const int64_t shared = (rings * t.pipeline + parts * sets) * tile + a_pad;
    const int64_t row_bytes = t.block_k * ElementBytes(t);
    return HasWgmma(target) && t.warp_m % 64 == 0 && t.warp_n <= 256 &&
           schedule::WgmmaBlockThreads(t) <= target.max_threads_per_block &&
           shared <= target.max_shared_memory_optin &&
           schedule::WgmmaAccumulators(t) <= kMaxAccumulators &&
           schedule::WgmmaAccumulators(t) + schedule::kWgmmaRegisterOverhead <=
               schedule::WgmmaThreadRegisters(t) &&
           (row_bytes == 32 || row_bytes == 64 || row_bytes == 128);
  }
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
  // On Hopper, three in four draws are wgmma tilings (the best of them ran 1.5x faster than the
  // best mma.sync tiling of bf16 matmul 4096^3 on the H200; bench/NOTES.md).
  if (HasWgmma(target) && rng() % 4 != 0) {
    for (int d = 0; d < kDraws; ++d) {
      TensorCoreStep t = base;
      t.warpgroup = true;
      t.warp_m = PickFrom(kGroupM, rng);
      t.warp_n = PickFrom(kGroupN, rng);
      t.block_m = t.warp_m * PickFrom(kGroups, rng);
      t.block_n = t.warp_n * PickFrom(kGroups, rng);
      t.block_k = GroupK(t, PickFrom(kGroupK, rng));
      t.pipeline = PickFrom(kGroupPipelines, rng);
      t.pad = 0;
      t.raster = PickFrom(kRasters, rng);
      t.split_k = (rng() & 1) ? PickFrom(kSplits, rng) : 1;
      if (t.split_k > 1 && (t.split_k * 4 * t.block_k > mm.k)) t.split_k = 1;
      t.repack = DrawRepack(t, mm, rng);
      // TMA fills three times in four where they apply, a producer warpgroup for one TMA draw in
      // four: on the H200, TMA took the hand bf16 4096^3 tiling from 0.197 to 0.179 ms, while the
      // warp-specialized variant stayed at 0.199 ms (bench/results/h200-2026-12-04-tma-matmul.md).
      t.tma = TmaOperands(t, mm, s) && rng() % 4 != 0;
      t.warp_specialized = t.tma && rng() % 4 == 0;
      // Half the producer warpgroups walk the tiles persistently (one block per multiprocessor).
      t.persistent = t.warp_specialized && t.split_k == 1 && rng() % 2 == 0;
      // Half the persistent blocks of one warpgroup tile take two consumers in turn (ping-pong).
      t.pingpong = t.persistent && t.block_m == t.warp_m && t.block_n == t.warp_n && rng() % 2 == 0;
      // One in eight of the other persistent grids that end in a partial wave splits its last
      // waves' k tiles (stream-k): on the H100 it lost 7-37 % on the bf16 table's GEMMs, its
      // blocks no longer reading the same k slices at the same time (bench/NOTES.md); mutation
      // toggles it too.
      t.stream_k = t.persistent && !t.pingpong && StreamKSplits(t, mm, target) && rng() % 8 == 0;
      // One in eight pairable rings runs in multicast clusters: on the H100 they ran within a
      // few % of their plain twins, either way (bench/NOTES.md); mutation toggles them too.
      t.multicast = MulticastFits(t, mm) && rng() % 8 == 0;
      if (t.multicast) t.stream_k = false;
      if (TensorCoreStepFits(t, target) && WgmmaLayoutsFit(t, mm) && SizedForProblem(t, mm)) {
        return t;
      }
    }
  }
  for (int d = 0; d < kDraws; ++d) {
    TensorCoreStep t = base;
    t.warpgroup = false;
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
    t.repack = DrawRepack(t, mm, rng);
    if (TensorCoreStepFits(t, target) && SizedForProblem(t, mm)) return t;
  }
  TensorCoreStep t = base;
  t.warpgroup = false;
  t.warp_m = t.block_m = 16;
  t.warp_n = t.block_n = 8;
  t.block_k = kk;
  t.pipeline = 1;
  t.pad = pad;
  t.raster = 1;
  t.split_k = 1;
  t.repack = false;
  t.tma = false;
  t.warp_specialized = false;
  t.persistent = false;
  t.stream_k = false;
  t.pingpong = false;
  t.multicast = false;
  return t;
}

namespace {

// The candidates that differ from `t` and fit the target and the problem, their options made
// consistent: persistent blocks need their producer warpgroup (they go with it) and one k range
// (a split_k move is not offered to persistent blocks); ping-pong consumers need persistent
// blocks (they go with them), and a move to several warpgroups per block tile is not offered to
// ping-pong blocks.
std::vector<TensorCoreStep> FittingVariants(std::vector<TensorCoreStep> candidates,
                                            const TensorCoreStep& t, const schedule::MatmulLike& mm,
                                            const Target& target) {
  std::vector<TensorCoreStep> options;
  for (TensorCoreStep& c : candidates) {
    c.persistent = c.persistent && c.warp_specialized;
    c.pingpong = c.pingpong && c.persistent;
    if (c.persistent && c.split_k > 1) continue;
    if (c.pingpong && (c.block_m != c.warp_m || c.block_n != c.warp_n)) continue;
    c.multicast = c.multicast && MulticastFits(c, mm);
    c.stream_k =
        c.stream_k && c.persistent && !c.pingpong && !c.multicast && StreamKSplits(c, mm, target);
    if (!(c == t) && TensorCoreStepFits(c, target) && SizedForProblem(c, mm) &&
        (!c.warpgroup || WgmmaLayoutsFit(c, mm))) {
      options.push_back(c);
    }
  }
  return options;
}

// TensorCoreStepVariants' decisions 11..16: how a wgmma tiling's TMA ring is filled and walked
// (the fills, a producer warpgroup, persistent blocks, ping-pong consumers, multicast clusters,
// stream-k).
std::vector<TensorCoreStep> TmaVariants(const TensorCoreStep& t, const schedule::MatmulLike& mm,
                                        const schedule::State& s, int decision) {
  std::vector<TensorCoreStep> candidates;
  switch (decision) {
    case 11:  // TMA fills or per-thread copies
      if (t.tma || TmaOperands(t, mm, s)) {
        TensorCoreStep c = t;
        c.tma = !t.tma;
        c.warp_specialized = false;
        candidates.push_back(c);
      }
      break;
    case 12:  // with TMA: a producer warpgroup or the computing threads issue the fills
      if (t.tma) {
        TensorCoreStep c = t;
        c.warp_specialized = !t.warp_specialized;
        candidates.push_back(c);
      }
      break;
    case 13:  // with a producer warpgroup: persistent blocks or one block per tile
      if (t.warp_specialized && t.split_k == 1) {
        TensorCoreStep c = t;
        c.persistent = !t.persistent;
        candidates.push_back(c);
      }
      break;
    case 14:  // persistent blocks of one warpgroup tile: two consumers in turn or one
      if (t.persistent && t.block_m == t.warp_m && t.block_n == t.warp_n) {
        TensorCoreStep c = t;
        c.pingpong = !t.pingpong;
        candidates.push_back(c);
      }
      break;
    case 15:  // TMA: clusters of two blocks sharing B's tiles, or single blocks
      if (t.multicast || MulticastFits(t, mm)) {
        TensorCoreStep c = t;
        c.multicast = !t.multicast;
        candidates.push_back(c);
      }
      break;
    case 16: {  // persistent blocks: the last waves' k tiles split between them (stream-k) or not
      // (FittingVariants keeps stream-k only where it applies: elsewhere the toggle is `t` again.)
      TensorCoreStep c = t;
      c.stream_k = !t.stream_k;
      candidates.push_back(c);
      break;
    }
    default:
      break;
  }
  return candidates;
}

}  // namespace

bool StreamKSplits(const TensorCoreStep& t, const schedule::MatmulLike& mm, const Target& target) {
  const int64_t tiles = (mm.m + t.block_m - 1) / t.block_m * ((mm.n + t.block_n - 1) / t.block_n) *
                        std::max<int64_t>(mm.batch, 1);
  const int64_t grid = std::min<int64_t>(tiles, std::max(1, target.sm_count));
  const int64_t k_tiles = (mm.k + t.block_k - 1) / std::max<int64_t>(t.block_k, 1);
  return schedule::PlanStreamKSplit(tiles, grid, k_tiles).has_value();
}

bool MulticastFits(const TensorCoreStep& t, const schedule::MatmulLike& mm) {
  return t.tma && !t.pingpong && t.split_k == 1 && (mm.m + t.block_m - 1) / t.block_m % 2 == 0;
}

std::vector<TensorCoreStep> TensorCoreStepVariants(const TensorCoreStep& t,
                                                   const schedule::MatmulLike& mm,
                                                   const schedule::State& s, const Target& target,
                                                   int decision) {
  const int64_t kk = ir::MmaK(KindOf(t));
  const int64_t pad = 16 / ir::BytesOf(ir::MmaOperandType(KindOf(t)));
  const int64_t warps_m = t.block_m / t.warp_m;
  const int64_t warps_n = t.block_n / t.warp_n;
  const bool wg = t.warpgroup;
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
  auto tile_rows = [&](const auto& values) {
    return variants(values, [&](TensorCoreStep& c, int64_t v) {
      c.warp_m = v;
      c.block_m = v * warps_m;
    });
  };
  auto tile_cols = [&](const auto& values) {
    return variants(values, [&](TensorCoreStep& c, int64_t v) {
      c.warp_n = v;
      c.block_n = v * warps_n;
    });
  };
  auto along_m = [&](const auto& values) {
    return variants(values, [&](TensorCoreStep& c, int64_t v) { c.block_m = t.warp_m * v; });
  };
  auto along_n = [&](const auto& values) {
    return variants(values, [&](TensorCoreStep& c, int64_t v) { c.block_n = t.warp_n * v; });
  };
  const int64_t pads[] = {0, pad};
  const int64_t no_pad[] = {0};
  const int64_t splits[] = {1, 2, 4, 8, 16};
  std::vector<TensorCoreStep> candidates;
  switch (decision) {
    case 0:  // warp (group) tile rows, warps (groups) per block kept
      candidates = wg ? tile_rows(kGroupM) : tile_rows(kWarpM);
      break;
    case 1:  // warp (group) tile columns
      candidates = wg ? tile_cols(kGroupN) : tile_cols(kWarpN);
      break;
    case 2:  // warps (groups) along m
      candidates = wg ? along_m(kGroups) : along_m(kWarps);
      break;
    case 3:  // warps (groups) along n
      candidates = wg ? along_n(kGroups) : along_n(kWarps);
      break;
    case 4:
      candidates =
          wg ? variants(kGroupK, [&](TensorCoreStep& c, int64_t v) { c.block_k = GroupK(t, v); })
             : variants(kKMultiples, [&](TensorCoreStep& c, int64_t v) {
                 c.block_k = kk * v * (kk == 8 ? 2 : 1);
               });
      break;
    case 5: {
      auto set = [](TensorCoreStep& c, int64_t v) { c.pipeline = static_cast<int>(v); };
      candidates = wg ? variants(kGroupPipelines, set) : variants(kPipelines, set);
      break;
    }
    case 6: {
      auto set = [](TensorCoreStep& c, int64_t v) { c.pad = v; };
      candidates = wg ? variants(no_pad, set) : variants(pads, set);
      break;
    }
    case 7:
      candidates =
          variants(splits, [](TensorCoreStep& c, int64_t v) { c.split_k = static_cast<int>(v); });
      break;
    case 8:
      candidates = variants(kRasters, [](TensorCoreStep& c, int64_t v) { c.raster = v; });
      break;
    case 9: {  // the instruction: the other family's tiling closest to this block tile
      if (!HasWgmma(target)) break;
      TensorCoreStep c = t;
      c.warpgroup = !wg;
      c.tma = c.warp_specialized = false;
      // Repack stays where it still does something (mma.sync tf32x3 would only copy).
      c.repack = t.repack && (mm.repackable || Presplittable(c, mm));
      if (c.warpgroup) {
        c.block_m = std::max<int64_t>(64, t.block_m / 64 * 64);
        c.warp_m = 64;
        c.warp_n = std::min<int64_t>(IsTf32Kind(t) ? 128 : 256, std::max<int64_t>(32, t.block_n));
        c.block_n = c.warp_n;
        c.block_k = std::clamp<int64_t>(t.block_k, GroupK(t, 16), GroupK(t, 64));
        c.pad = 0;
      } else {
        c.warp_m = 64;
        c.warp_n = 64;
        c.block_m = std::max<int64_t>(64, std::min<int64_t>(t.block_m, 256));
        c.block_n = std::max<int64_t>(64, std::min<int64_t>(t.block_n, 256));
        c.block_k = 32 * 2 / ElementBytes(t);
        c.pad = pad;
        c.pipeline = std::min(c.pipeline, 4);
      }
      candidates.push_back(c);
      break;
    }
    case 10:  // operands repacked or read in place
      if (mm.repackable || t.repack || Presplittable(t, mm)) {
        TensorCoreStep c = t;
        c.repack = !t.repack;
        c.tma = c.tma && !c.repack;
        c.warp_specialized = c.warp_specialized && c.tma;
        candidates.push_back(c);
      }
      break;
    case 11:
    case 12:
    case 13:
    case 14:
    case 15:
    case 16:
      candidates = TmaVariants(t, mm, s, decision);
      break;
    default:
      break;
  }
  return FittingVariants(std::move(candidates), t, mm, target);
}

bool MutateTensorCoreStep(TensorCoreStep& t, const schedule::MatmulLike& mm,
                          const schedule::State& s, const Target& target, std::mt19937_64& rng) {
  const std::vector<TensorCoreStep> options =
      TensorCoreStepVariants(t, mm, s, target, static_cast<int>(rng() % kTensorCoreDecisions));
  if (options.empty()) return false;
  t = options[rng() % options.size()];
  return true;
}

}  // namespace tilesearch::search
