// tensor_core: computes a matmul-like stage with warp-level mma.sync or warpgroup-level wgmma
// (schedule/step.h). Apply
// checks everything that does not depend on the target (roles, kind, tile shapes, the epilogue
// chain); the lowering (schedule/tensor_core_lower.cc) checks the target's limits.
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "schedule/matmul_like.h"
#include "schedule/operand_repack.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"
#include "schedule/wgmma_layout.h"

namespace tilesearch::schedule {
namespace {

// Loads of buffer `name` in an expression.
class LoadsOf : public ir::ExprVisitor {
 public:
  explicit LoadsOf(const std::string& name) : name_(name) {}
  std::vector<const ir::LoadNode*> loads;

 protected:
  void VisitLoad(const ir::LoadNode* op, const ir::Expr& e) override {
    if (op->buffer == name_) loads.push_back(op);
    ir::ExprVisitor::VisitLoad(op, e);
  }

 private:
  const std::string& name_;
};

// The ids of the stages whose bodies read `name`.
std::vector<int> Readers(const State& s, const std::string& name) {
  std::vector<int> out;
  for (int i = 0; i < s.num_stages(); ++i) {
    const Stage& st = s.stage(i);
    if (st.is_placeholder()) continue;
    LoadsOf l(name);
    l.Visit(st.op->body);
    if (!l.loads.empty()) out.push_back(i);
  }
  return out;
}

// Whether every Load of `producer` in `reader`'s body indexes it with the reader's own axes.
bool ReadsAtOwnIndex(const ir::TensorNode& reader, const std::string& producer) {
  LoadsOf l(producer);
  l.Visit(reader.body);
  for (const ir::LoadNode* ld : l.loads) {
    if (ld->indices.size() != reader.axes.size()) return false;
    for (size_t d = 0; d < ld->indices.size(); ++d) {
      const auto* v = ld->indices[d].as<ir::VarNode>();
      if (v == nullptr || v->name != reader.axes[d].name) return false;
    }
  }
  return !l.loads.empty();
}

absl::Status CheckTensorCoreShape(const TensorCoreStep& t, const std::string& text) {
  const std::optional<ir::MmaKind> kind = ir::ParseMmaKind(t.kind);
  if (!kind) {
    return internal::StepError(
        text, absl::StrCat("unknown mma kind '", t.kind, "' (expected f16, bf16, tf32 or tf32x3)"));
  }
  const int64_t kk = ir::MmaK(*kind);
  // Bounds first, so that no product below can overflow: a block has at most 1024 threads, and
  // no tile side, depth, padding or raster group beyond these fits any GPU's limits.
  constexpr int64_t kMaxSide = 1024;
  struct Bound {
    const char* name;
    int64_t value, lo, hi;
  };
  const Bound bounds[] = {{"block_m", t.block_m, 16, kMaxSide}, {"block_n", t.block_n, 8, kMaxSide},
                          {"block_k", t.block_k, 8, kMaxSide},  {"warp_m", t.warp_m, 16, kMaxSide},
                          {"warp_n", t.warp_n, 8, kMaxSide},    {"pad", t.pad, 0, 64},
                          {"raster", t.raster, 1, 4096}};
  for (const Bound& b : bounds) {
    if (b.value < b.lo || b.value > b.hi) {
      return internal::StepError(
          text, absl::StrCat(b.name, " ", b.value, " is outside ", b.lo, "..", b.hi));
    }
  }
  if (t.warp_m < 16 || t.warp_m % 16 != 0 || t.warp_n < 8 || t.warp_n % 8 != 0) {
    return internal::StepError(
        text,
        absl::StrCat("warp tile ", t.warp_m, "x", t.warp_n,
                     " is not made of m16n8 fragments (warp_m a multiple of 16, warp_n of 8)"));
  }
  if (t.block_m < t.warp_m || t.block_m % t.warp_m != 0 || t.block_n < t.warp_n ||
      t.block_n % t.warp_n != 0) {
    return internal::StepError(
        text, absl::StrCat("block tile ", t.block_m, "x", t.block_n,
                           " is not a multiple of the warp tile ", t.warp_m, "x", t.warp_n));
  }
  if (t.block_k < kk || t.block_k % kk != 0) {
    return internal::StepError(text,
                               absl::StrCat("block_k ", t.block_k, " is not a multiple of ", kk,
                                            ", the k of an m16n8k", kk, " ", t.kind, " mma"));
  }
  if (t.pipeline < 1 || t.pipeline > 8) {
    return internal::StepError(text, absl::StrCat("pipeline ", t.pipeline, " is outside 1..8"));
  }
  const int64_t bytes = ir::BytesOf(ir::MmaOperandType(*kind));
  if (t.pad < 0 || (t.pad * bytes) % 16 != 0) {
    return internal::StepError(
        text, absl::StrCat("pad ", t.pad, " elements is not a multiple of 16 bytes"));
  }
  if (t.split_k < 1 || t.split_k > 64) {
    return internal::StepError(text, absl::StrCat("split_k ", t.split_k, " is outside 1..64"));
  }
  if (t.epilogue < 0) {
    return internal::StepError(text, absl::StrCat("epilogue ", t.epilogue, " < 0"));
  }
  if (t.warpgroup) {
    if (t.warp_m % 64 != 0 || t.warp_n > 256) {
      return internal::StepError(
          text,
          absl::StrCat("warpgroup tile ", t.warp_m, "x", t.warp_n, " is not made of m64nNk", kk,
                       " wgmma tiles (warp_m a multiple of 64, warp_n a multiple of 8 "
                       "up to 256)"));
    }
    // Each thread of a warpgroup holds warp_m · warp_n / 128 float32 accumulators (twice that for
    // tf32x3, which sums each k tile apart in a tile accumulator); past 128 they cannot stay in
    // the 255 registers a thread has (ptxas spills a 128x256 tile's 256). A rule of thumb: one-pass
    // tf32's A fragments (4 per k step and 64 rows) come on top, and a tiling that spills is slow,
    // not wrong.
    // A block has at most 1024 threads (checked before the registers, which it would explain).
    if (const int64_t threads = WgmmaBlockThreads(t); threads > 1024) {
      return internal::StepError(
          text,
          absl::StrCat("block tile ", t.block_m, "x", t.block_n, " over warpgroup tiles ", t.warp_m,
                       "x", t.warp_n, " needs a block of ", threads, " threads (at most 1024)"));
    }
    const int64_t registers = WgmmaAccumulators(t);
    if (registers > 128) {
      return internal::StepError(
          text, absl::StrCat("warpgroup tile ", t.warp_m, "x", t.warp_n, " needs ", registers,
                             " accumulator registers per thread (at most 128)"));
    }
    // And they must fit what a thread of this block gets, beside the rest it needs.
    const int64_t available = WgmmaThreadRegisters(t);
    if (registers + kWgmmaRegisterOverhead > available) {
      return internal::StepError(
          text,
          absl::StrCat("warpgroup tile ", t.warp_m, "x", t.warp_n, " needs ", registers,
                       " accumulator registers per thread, and a block of ", WgmmaBlockThreads(t),
                       " threads gives each consumer thread ", available, " (at least ",
                       kWgmmaRegisterOverhead, " of them for addresses and counters)"));
    }
    const int64_t row_bytes = t.block_k * bytes;
    if (row_bytes != 32 && row_bytes != 64 && row_bytes != 128) {
      return internal::StepError(text,
                                 absl::StrCat("block_k ", t.block_k, " of ", bytes,
                                              "-byte elements is not 32, 64 "
                                              "or 128 bytes (one swizzle atom of k for wgmma)"));
    }
    if (t.pad != 0) {
      return internal::StepError(
          text, absl::StrCat("pad ", t.pad, " with wgmma (its layouts are swizzled, not padded)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> TensorCoreEpilogue(const State& s, int stage_id, int count,
                                                    const std::string& text) {
  std::vector<int> chain;
  int prev = stage_id;
  for (int e = 0; e < count; ++e) {
    const Stage& p = s.stage(prev);
    if (internal::IsOutput(s, p)) {
      // Most often the count runs past the program's last stage: say how many fit.
      return internal::StepError(
          text, absl::StrCat("epilogue ", count, " asks for ", count, " elementwise stage",
                             count == 1 ? "" : "s", " after '", s.stage(stage_id).name(), "'; ",
                             e == 0 ? absl::StrCat("'", p.name(), "' itself")
                                    : absl::StrCat("after ", e, ", '", p.name(), "'"),
                             " is a program output, which the epilogue cannot fuse away: at most ",
                             e, " fit here"));
    }
    const std::vector<int> readers = Readers(s, p.name());
    if (readers.size() != 1) {
      return internal::StepError(
          text, absl::StrCat("epilogue stage ", e, ": '", p.name(), "' has ", readers.size(),
                             " readers (the epilogue needs exactly one)"));
    }
    const Stage& r = s.stage(readers[0]);
    RETURN_IF_ERROR(internal::CheckSchedulable(r, text));
    if (r.op->reduce != ir::ReduceKind::kNone || r.op->shape != p.op->shape ||
        r.location != ComputeLocation::kRoot || !internal::HasInitialIterators(r) ||
        !ReadsAtOwnIndex(*r.op, p.name())) {
      return internal::StepError(
          text, absl::StrCat("epilogue stage ", e, ": '", r.name(), "' is not an untransformed ",
                             "elementwise root stage reading '", p.name(), "' at its own index"));
    }
    chain.push_back(readers[0]);
    prev = readers[0];
  }
  return chain;
}

}  // namespace

absl::StatusOr<State> TensorCoreStep::Apply(const State& s) const {
  const std::string text = ToString();
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  const Stage& stage = s.stage(stage_id);
  RETURN_IF_ERROR(internal::CheckSchedulable(stage, text));
  if (stage.location != ComputeLocation::kRoot || !internal::HasInitialIterators(stage) ||
      internal::HasAttachedStages(s, stage_id)) {
    return internal::StepError(
        text, absl::StrCat("invalid_schedule: stage '", stage.name(),
                           "' must be an untransformed root stage with nothing attached to it"));
  }
  RETURN_IF_ERROR(CheckTensorCoreShape(*this, text));
  absl::StatusOr<MatmulLike> mm = AnalyzeMatmulLike(*stage.op, stage.op->body);
  if (!mm.ok()) {
    return internal::StepError(text, absl::StrCat("invalid_schedule: ", mm.status().message()));
  }
  const ir::MmaKind k = *ir::ParseMmaKind(kind);
  const ir::ScalarType want = ir::MmaOperandType(k);
  if (mm->a_type != want || mm->b_type != want) {
    return internal::StepError(
        text,
        absl::StrCat("invalid_schedule: stage '", stage.name(), "' (", mm->m, "x", mm->n, "x",
                     mm->k, ") reads ", ir::TypeName(mm->a_type), " and ", ir::TypeName(mm->b_type),
                     " operands; mma kind ", kind, " needs ", ir::TypeName(want)));
  }
  if (tma && !warpgroup) {
    return internal::StepError(text,
                               "invalid_schedule: tma loads feed warpgroup (wgmma) tiles only");
  }
  if (tma && (repack || (kind != "f16" && kind != "bf16"))) {
    return internal::StepError(
        text, absl::StrCat("invalid_schedule: tma fills f16 / bf16 tiles of the parameters as they "
                           "are; not ",
                           repack ? "repacked operands (they are workspaces)" : "kind " + kind));
  }
  if (warp_specialized && !tma) {
    return internal::StepError(
        text, "invalid_schedule: a producer warpgroup (ws) issues TMA fills: it needs tma");
  }
  if (persistent && (!warp_specialized || split_k > 1)) {
    return internal::StepError(
        text, absl::StrCat("invalid_schedule: persistent blocks walk the tiles of a producer "
                           "warpgroup's ring: ",
                           !warp_specialized ? "they need ws" : "not with split_k"));
  }
  if (stream_k && (!persistent || pingpong || multicast)) {
    return internal::StepError(
        text, absl::StrCat("invalid_schedule: stream-k splits the last waves of a persistent "
                           "grid's tiles: ",
                           !persistent ? "it needs persistent blocks"
                           : pingpong  ? "not with pingpong"
                                       : "not with multicast"));
  }
  if (pingpong && (!persistent || warp_m != block_m || warp_n != block_n)) {
    return internal::StepError(
        text, absl::StrCat("invalid_schedule: ping-pong consumers each compute whole block tiles "
                           "in turn: ",
                           !persistent
                               ? "they need persistent blocks"
                               : absl::StrCat("the warp tile ", warp_m, "x", warp_n,
                                              " must be the block tile ", block_m, "x", block_n)));
  }
  if (multicast && (!tma || pingpong || split_k > 1)) {
    return internal::StepError(
        text, absl::StrCat("invalid_schedule: multicast pairs the blocks of the TMA-fed ring "
                           "in clusters of two: ",
                           !tma       ? "it needs tma"
                           : pingpong ? "not with pingpong"
                                      : "not with split_k"));
  }
  if (repack) {
    absl::StatusOr<OperandRepack> plan = PlanOperandRepack(*stage.op, *mm);
    if (!plan.ok()) {
      return internal::StepError(text, absl::StrCat("invalid_schedule: ", plan.status().message()));
    }
  }
  ASSIGN_OR_RETURN(std::vector<int> chain, TensorCoreEpilogue(s, stage_id, epilogue, text));
  State out = s;
  out.MutableStage(stage_id).tensor_core = *this;
  for (int e : chain) out.MutableStage(e).epilogue_of = stage_id;
  out.AppendStep(*this);
  return out;
}

nlohmann::json TensorCoreStep::ToJson() const {
  nlohmann::json j = {
      "TC", stage_id, kind,    {block_m, block_n, block_k}, {warp_m, warp_n}, pipeline,
      pad,  raster,   epilogue};
  if (split_k > 1 || warpgroup || repack || tma) j.push_back(split_k);
  if (warpgroup || repack || tma) j.push_back(warpgroup ? "wgmma" : "mma.sync");
  if (repack) j.push_back("repack");
  if (tma) j.push_back("tma");
  if (warp_specialized) j.push_back("ws");
  if (persistent) j.push_back("persistent");
  if (stream_k) j.push_back("streamk");
  if (pingpong) j.push_back("pingpong");
  if (multicast) j.push_back("multicast");
  return j;
}

absl::StatusOr<TensorCoreStep> TensorCoreStep::FromJson(const nlohmann::json& j) {
  if (!j.is_array() || j.size() < 9 || j.size() > 18) {
    return absl::InvalidArgumentError(
        absl::StrCat("step 'TC' needs 9 fields (10 with split_k, 11 with the instruction, then "
                     "\"repack\", \"tma\", \"ws\", \"persistent\", \"streamk\", \"pingpong\", "
                     "\"multicast\" as set), got ",
                     j.is_array() ? j.size() : 0, ": ", j.dump().substr(0, 200)));
  }
  TensorCoreStep t;
  ASSIGN_OR_RETURN(t.stage_id, internal::JsonId(j, 1, "TC"));
  ASSIGN_OR_RETURN(t.kind, internal::JsonString(j, 2, "TC"));
  ASSIGN_OR_RETURN(std::vector<int> block, internal::JsonIntList(j, 3, "TC"));
  ASSIGN_OR_RETURN(std::vector<int> warp, internal::JsonIntList(j, 4, "TC"));
  if (block.size() != 3 || warp.size() != 2) {
    return absl::InvalidArgumentError(
        "TC step: the block tile is [block_m, block_n, block_k] and the warp tile [warp_m, "
        "warp_n]");
  }
  t.block_m = block[0];
  t.block_n = block[1];
  t.block_k = block[2];
  t.warp_m = warp[0];
  t.warp_n = warp[1];
  ASSIGN_OR_RETURN(int64_t pipeline, internal::JsonInt(j, 5, "TC"));
  ASSIGN_OR_RETURN(t.pad, internal::JsonInt(j, 6, "TC"));
  ASSIGN_OR_RETURN(t.raster, internal::JsonInt(j, 7, "TC"));
  ASSIGN_OR_RETURN(int64_t epilogue, internal::JsonInt(j, 8, "TC"));
  if (pipeline < 0 || pipeline > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("TC step: pipeline ", pipeline, " is out of range (0..64)"));
  }
  if (epilogue < 0 || epilogue > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("TC step: epilogue ", epilogue, " is out of range (0..64)"));
  }
  t.pipeline = static_cast<int>(pipeline);
  t.epilogue = static_cast<int>(epilogue);
  if (j.size() >= 10) {
    ASSIGN_OR_RETURN(int64_t split, internal::JsonInt(j, 9, "TC"));
    const int64_t lo = j.size() >= 11 ? 1 : 2;
    if (split < lo || split > 64) {
      return absl::InvalidArgumentError(
          absl::StrCat("TC step: split_k ", split, " out of range (", lo,
                       "..64; 1 is written as absent unless an instruction follows)"));
    }
    t.split_k = static_cast<int>(split);
  }
  if (j.size() >= 11) {
    ASSIGN_OR_RETURN(std::string instruction, internal::JsonString(j, 10, "TC"));
    if (instruction != "wgmma" && instruction != "mma.sync") {
      return absl::InvalidArgumentError(absl::StrCat(
          "TC step: instruction '", instruction, "' is not \"mma.sync\" or \"wgmma\"",
          instruction == "repack" ? " (\"repack\" comes after split_k and the instruction)" : ""));
    }
    t.warpgroup = instruction == "wgmma";
  }
  // The options after the instruction, in this order: "repack", "tma", "ws", "persistent",
  // "streamk", "pingpong", "multicast".
  for (size_t f = 11; f < j.size(); ++f) {
    ASSIGN_OR_RETURN(std::string option, internal::JsonString(j, f, "TC"));
    const bool later = t.persistent || t.stream_k || t.pingpong || t.multicast;
    if (option == "repack" && !t.repack && !t.tma && !t.warp_specialized && !later) {
      t.repack = true;
    } else if (option == "tma" && !t.tma && !t.warp_specialized && !later) {
      t.tma = true;
    } else if (option == "ws" && !t.warp_specialized && !later) {
      t.warp_specialized = true;
    } else if (option == "persistent" && !t.persistent && !t.stream_k && !t.pingpong &&
               !t.multicast) {
      t.persistent = true;
    } else if (option == "streamk" && !t.stream_k && !t.pingpong && !t.multicast) {
      t.stream_k = true;
    } else if (option == "pingpong" && !t.pingpong && !t.multicast) {
      t.pingpong = true;
    } else if (option == "multicast" && !t.multicast) {
      t.multicast = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "TC step: field ", f, " '", option,
          "' is not an option in place (\"repack\", then \"tma\", then \"ws\", then "
          "\"persistent\", then \"streamk\", then \"pingpong\", then \"multicast\", each at "
          "most once)"));
    }
  }
  return t;
}

std::string TensorCoreStep::ToString() const {
  return absl::StrCat("tensor_core(", stage_id, ", ", kind, ", block ", block_m, "x", block_n, "x",
                      block_k, ", warp ", warp_m, "x", warp_n, ", pipeline ", pipeline, ", pad ",
                      pad, ", raster ", raster, ", epilogue ", epilogue,
                      split_k > 1 ? absl::StrCat(", split_k ", split_k) : std::string(),
                      warpgroup ? ", wgmma" : "", repack ? ", repack" : "", tma ? ", tma" : "",
                      warp_specialized ? ", ws" : "", persistent ? ", persistent" : "",
                      stream_k ? ", stream_k" : "", pingpong ? ", pingpong" : "",
                      multicast ? ", multicast" : "", ")");
}

std::optional<StreamKSplit> PlanStreamKSplit(int64_t tiles, int64_t grid, int64_t k_tiles) {
  if (grid < 1 || k_tiles < 1 || tiles <= grid || tiles % grid == 0) return std::nullopt;
  StreamKSplit split;
  split.whole = (tiles / grid - 1) * grid;
  split.iters = (tiles - split.whole) * k_tiles;
  for (int64_t b = 1; b < grid; ++b) {
    if (b * split.iters / grid % k_tiles != 0) return split;
  }
  return std::nullopt;
}

}  // namespace tilesearch::schedule
