#include "schedule/wgmma_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tilesearch::schedule {

bool TargetHasWgmma(const Target& target) {
  return target.is_gpu() && (target.arch == "sm_90" || target.arch == "sm_90a");
}

int64_t WgmmaAccumulators(const TensorCoreStep& t) {
  return t.warp_m * t.warp_n / 128 * (t.kind == ir::MmaKindName(ir::MmaKind::kTF32x3) ? 2 : 1);
}

int64_t WgmmaBlockThreads(const TensorCoreStep& t) {
  const int64_t consumers = (t.block_m / t.warp_m) * (t.block_n / t.warp_n) * (t.pingpong ? 2 : 1);
  return 128 * consumers + (t.warp_specialized ? 128 : 0);
}

namespace {
// The per-thread registers ptxas may give every thread of a block of `threads` at one block per
// multiprocessor: 65536 registers in granules of 8 per thread, at most 255.
int64_t RegistersAtLaunch(int64_t threads) {
  return std::min<int64_t>(255, 65536 / threads / 8 * 8);
}
}  // namespace

std::optional<std::pair<int64_t, int64_t>> WsRegisterSplit(const TensorCoreStep& t) {
  constexpr int64_t kProducer = 40;
  if (!t.warpgroup || !t.warp_specialized || t.warp_m <= 0 || t.warp_n <= 0) return std::nullopt;
  const int64_t threads = WgmmaBlockThreads(t);
  const int64_t consumers = threads - 128;
  if (consumers < 256) return std::nullopt;
  // Only where the consumers' registers hold the block to one per multiprocessor anyway: the
  // reallocation compiles it for one, and narrow tiles (64x64: 32 accumulators, ~60 registers)
  // would lose their second block for nothing.
  if (WgmmaAccumulators(t) + kWgmmaRegisterOverhead <= RegistersAtLaunch(2 * threads)) {
    return std::nullopt;
  }
  const int64_t start = RegistersAtLaunch(threads);
  const int64_t consumer =
      std::min<int64_t>(248, (start * threads - kProducer * 128) / consumers / 8 * 8);
  if (consumer <= start) return std::nullopt;
  return std::pair{kProducer, consumer};
}

int64_t WgmmaThreadRegisters(const TensorCoreStep& t) {
  if (std::optional<std::pair<int64_t, int64_t>> split = WsRegisterSplit(t)) return split->second;
  return RegistersAtLaunch(WgmmaBlockThreads(t));
}

bool WgmmaSplitsTf32(const TensorCoreStep& t) {
  const std::optional<ir::MmaKind> kind = ir::ParseMmaKind(t.kind);
  if (!t.warpgroup || !kind) return false;
  // Repacked operands are K-major already: one-pass TF32 reads them from the ring as they are,
  // and tf32x3 reads the two TF32 parts that its repack kernels store (RepackValues::kTf32Split).
  if (*kind == ir::MmaKind::kTF32 || *kind == ir::MmaKind::kTF32x3) return !t.repack;
  return false;
}

absl::StatusOr<WgmmaLayouts> PlanWgmmaLayouts(const TensorCoreStep& t, const MatmulLike& mm) {
  WgmmaLayouts out;
  const bool tf32 = WgmmaSplitsTf32(t);
  const std::optional<ir::MmaKind> kind = ir::ParseMmaKind(t.kind);
  const int64_t element_bytes = kind ? ir::BytesOf(ir::MmaOperandType(*kind)) : 2;
  for (const bool is_a : {true, false}) {
    const bool k_inner = tf32 || t.repack || (is_a ? mm.a_k_inner : mm.b_k_inner);
    const int64_t rows = is_a ? t.block_m : t.block_n;      // the block tile's rows
    const int64_t group_rows = is_a ? t.warp_m : t.warp_n;  // one warpgroup's rows
    const int64_t groups = rows / group_rows;               // warpgroups along them
    const char* name = is_a ? "A" : "B";
    ir::WgmmaLayout& l = is_a ? out.a : out.b;
    l.k_major = k_inner;
    l.element_bytes = element_bytes;
    if (l.k_major) {
      l.swizzle = element_bytes * t.block_k;
      l.sbo = 8 * l.swizzle;
      l.lbo = 16;  // unused by swizzled K-major layouts
    } else {
      l.swizzle = 128;
      l.sbo = 1024;
      l.lbo = t.block_k * 128;
      if (rows % 64 != 0 || (groups > 1 && group_rows % 64 != 0)) {
        return absl::FailedPreconditionError(
            absl::StrCat("wgmma operand ", name, " is ", is_a ? "m" : "n",
                         "-contiguous, so its block tile (", rows, ") and warpgroup tile (",
                         group_rows, ") must be multiples of 64 (128-byte swizzle atoms)"));
      }
    }
    const int64_t tile_bytes = rows * t.block_k * element_bytes;
    const int64_t group_bytes = l.k_major ? group_rows * l.swizzle : (group_rows / 64) * l.lbo;
    if (tile_bytes % 1024 != 0 || (groups > 1 && group_bytes % 1024 != 0)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "wgmma operand ", name, ": its tiles (", tile_bytes, " bytes per stage, ", group_bytes,
          " per warpgroup) do not start on the swizzle's 1024-byte "
          "period"));
    }
  }
  return out;
}

}  // namespace tilesearch::schedule
