// GPU kernels of a lowered program: shared-memory placement, launch configuration and the
// validity checks against the target's limits.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "schedule/lower_internal.h"

namespace tilesearch::schedule::lower_internal {
namespace {

using ir::ForKind;
using ir::Stmt;

constexpr int64_t kMaxGridDim[3] = {2147483647, 65535, 65535};
constexpr int64_t kMaxBlockDim[3] = {1024, 1024, 64};
// Per-thread local buffers (registers, spilled to local memory) above 16 KiB: 16 times the register
// file a thread can have. No fast kernel needs them; a cache_write computed at the wrong loop does
// (a 128x128 float32 tile per thread: 64 KiB, whose fully unrolled loops took ptxas minutes).
constexpr int64_t kMaxLocalBytesPerThread = 16 * 1024;

int BlockDim(ForKind k) { return static_cast<int>(k) - static_cast<int>(ForKind::kBlockIdxX); }
int ThreadDim(ForKind k) { return static_cast<int>(k) - static_cast<int>(ForKind::kThreadIdxX); }

Stmt Wrap(const std::vector<ir::BufferDecl>& decls, Stmt body) {
  for (auto it = decls.rbegin(); it != decls.rend(); ++it) body = ir::AllocateNode::Make(*it, body);
  return body;
}

Stmt Hoist(const Stmt& s, std::vector<ir::BufferDecl>* out) {
  if (!s.defined()) return s;
  switch (s.kind()) {
    case ir::StmtKind::kAllocate: {
      const auto* op = s.as<ir::AllocateNode>();
      Stmt body = Hoist(op->body, out);
      if (op->buffer.scope == ir::MemoryScope::kShared) {
        out->push_back(op->buffer);
        return body;
      }
      return body.same_as(op->body) ? s : ir::AllocateNode::Make(op->buffer, body);
    }
    case ir::StmtKind::kFor: {
      const auto* op = s.as<ir::ForNode>();
      if (ir::IsBlockBound(op->for_kind)) {
        std::vector<ir::BufferDecl> mine;
        Stmt inner = Hoist(op->body, &mine);
        Stmt body = Wrap(mine, inner);
        return ir::ForNode::Make(op->var, op->min, op->extent, op->for_kind, body);
      }
      Stmt body = Hoist(op->body, out);
      return body.same_as(op->body)
                 ? s
                 : ir::ForNode::Make(op->var, op->min, op->extent, op->for_kind, body);
    }
    case ir::StmtKind::kSeq: {
      std::vector<Stmt> stmts;
      for (const Stmt& c : s.as<ir::SeqNode>()->stmts) stmts.push_back(Hoist(c, out));
      return ir::SeqNode::Make(std::move(stmts));
    }
    case ir::StmtKind::kIfThenElse: {
      const auto* op = s.as<ir::IfThenElseNode>();
      return ir::IfThenElseNode::Make(op->cond, Hoist(op->then_case, out),
                                      Hoist(op->else_case, out));
    }
    default:
      return s;
  }
}

// Drops barriers that order nothing: one directly after another (of two, the one over the wider
// group stays: a cluster barrier orders the block too), and block barriers at the very end of a
// block's work (the body of a blockIdx loop, or the kernel; a cluster barrier there still keeps
// the cluster's blocks together).
Stmt CleanBarriers(const Stmt& s, bool at_block_end) {
  if (!s.defined()) return s;
  switch (s.kind()) {
    case ir::StmtKind::kSeq: {
      const auto& in = s.as<ir::SeqNode>()->stmts;
      std::vector<Stmt> out;
      for (size_t i = 0; i < in.size(); ++i) {
        Stmt c = CleanBarriers(in[i], at_block_end && i + 1 == in.size());
        const auto* bar = c.as<ir::BarrierNode>();
        const auto* last = out.empty() ? nullptr : out.back().as<ir::BarrierNode>();
        if (bar != nullptr && last != nullptr) {
          if (bar->cluster > last->cluster) out.back() = c;
          continue;
        }
        out.push_back(c);
      }
      while (at_block_end && !out.empty() && out.back().as<ir::BarrierNode>() &&
             out.back().as<ir::BarrierNode>()->cluster == 1) {
        out.pop_back();
      }
      if (out.empty()) return ir::SeqNode::Make({});
      return ir::SeqNode::Make(std::move(out));
    }
    case ir::StmtKind::kAllocate: {
      const auto* op = s.as<ir::AllocateNode>();
      Stmt body = CleanBarriers(op->body, at_block_end);
      return body.same_as(op->body) ? s : ir::AllocateNode::Make(op->buffer, body);
    }
    case ir::StmtKind::kFor: {
      const auto* op = s.as<ir::ForNode>();
      Stmt body = CleanBarriers(op->body, ir::IsBlockBound(op->for_kind));
      return body.same_as(op->body)
                 ? s
                 : ir::ForNode::Make(op->var, op->min, op->extent, op->for_kind, body);
    }
    case ir::StmtKind::kIfThenElse: {
      const auto* op = s.as<ir::IfThenElseNode>();
      return ir::IfThenElseNode::Make(op->cond, CleanBarriers(op->then_case, false),
                                      CleanBarriers(op->else_case, false));
    }
    default:
      return s;
  }
}

struct EnclosingThread {
  int dim;
  int64_t extent;
  std::string var;
};

class KernelWalker {
 public:
  absl::Status Walk(const Stmt& s) {
    if (!s.defined()) return absl::OkStatus();
    switch (s.kind()) {
      case ir::StmtKind::kFor: {
        const auto* op = s.as<ir::ForNode>();
        auto extent = ir::AsConstInt(op->extent);
        if (!extent) {
          return absl::InvalidArgumentError(
              absl::StrCat("loop '", op->var_name(), "' has a non-constant extent"));
        }
        if (ir::IsBlockBound(op->for_kind)) {
          if (!path_.empty()) {
            return absl::FailedPreconditionError(
                absl::StrCat("invalid_schedule: ", ir::ForKindName(op->for_kind), " loop '",
                             op->var_name(), "' is nested inside loop '", path_.back(),
                             "'; block bindings must be the outermost loops of a kernel"));
          }
          int d = BlockDim(op->for_kind);
          if (block_bound_[d]) {
            return absl::FailedPreconditionError(
                absl::StrCat("invalid_schedule: ", ir::ForKindName(op->for_kind),
                             " is bound twice in one kernel (loop '", op->var_name(), "')"));
          }
          if (block_depth_ == 0 && has_block_) {
            return absl::FailedPreconditionError(absl::StrCat(
                "invalid_schedule: a kernel has several separate block-bound loop nests (loop '",
                op->var_name(), "'); each must be its own root stage"));
          }
          block_bound_[d] = true;
          has_block_ = true;
          launch_.grid[d] = std::max(launch_.grid[d], *extent);
          ++block_depth_;
          RETURN_IF_ERROR(Walk(op->body));
          --block_depth_;
          block_bound_[d] = false;
          return absl::OkStatus();
        }
        if (ir::IsThreadBound(op->for_kind)) {
          int d = ThreadDim(op->for_kind);
          has_thread_ = true;
          launch_.block[d] = std::max(launch_.block[d], *extent);
          threads_.push_back({d, *extent, op->var_name()});
        }
        path_.push_back(op->var_name());
        RETURN_IF_ERROR(Walk(op->body));
        path_.pop_back();
        if (ir::IsThreadBound(op->for_kind)) threads_.pop_back();
        return absl::OkStatus();
      }
      case ir::StmtKind::kSeq:
        for (const Stmt& c : s.as<ir::SeqNode>()->stmts) RETURN_IF_ERROR(Walk(c));
        return absl::OkStatus();
      case ir::StmtKind::kAllocate: {
        const auto* op = s.as<ir::AllocateNode>();
        if (op->buffer.scope == ir::MemoryScope::kShared) {
          launch_.shared_memory_bytes += op->buffer.Bytes();
        }
        if (op->buffer.scope == ir::MemoryScope::kLocal) {
          local_bytes_ += op->buffer.Bytes();
          if (local_bytes_ > kMaxLocalBytesPerThread) {
            return absl::FailedPreconditionError(absl::StrCat(
                "invalid_schedule: local buffer '", op->buffer.name,
                "' brings a thread's local buffers to ", local_bytes_, " bytes, above ",
                kMaxLocalBytesPerThread,
                " (a thread has at most 255 registers, 1020 bytes; the rest would live in DRAM, "
                "and unrolling loops over it makes compiling take minutes): compute the cache at "
                "an inner loop"));
          }
        }
        RETURN_IF_ERROR(Walk(op->body));
        if (op->buffer.scope == ir::MemoryScope::kLocal) local_bytes_ -= op->buffer.Bytes();
        return absl::OkStatus();
      }
      case ir::StmtKind::kIfThenElse: {
        const auto* op = s.as<ir::IfThenElseNode>();
        path_.push_back("if");
        ++if_depth_;
        RETURN_IF_ERROR(Walk(op->then_case));
        RETURN_IF_ERROR(Walk(op->else_case));
        --if_depth_;
        path_.pop_back();
        return absl::OkStatus();
      }
      case ir::StmtKind::kBarrier:
        barriers_.push_back({threads_, if_depth_ > 0});
        return absl::OkStatus();
      case ir::StmtKind::kStore:
        if (block_depth_ == 0) store_outside_blocks_ = true;
        return absl::OkStatus();
      default:
        return absl::OkStatus();
    }
  }

  absl::StatusOr<LaunchConfig> Finish(const Target& target) const {
    if (has_thread_ && !has_block_) {
      return absl::FailedPreconditionError(
          "invalid_schedule: a kernel binds threadIdx but no blockIdx (bind its outermost loops "
          "to blockIdx, or bind nothing for a one-thread kernel)");
    }
    if (has_block_ && store_outside_blocks_) {
      return absl::FailedPreconditionError(
          "invalid_schedule: a kernel stores outside its block-bound loops");
    }
    int64_t threads = launch_.block[0] * launch_.block[1] * launch_.block[2];
    if (threads > target.max_threads_per_block) {
      return absl::FailedPreconditionError(
          absl::StrCat("invalid_schedule: ", threads, " threads per block exceed the limit ",
                       target.max_threads_per_block, " (", launch_.ToString(), ")"));
    }
    // CUDA's grid and block dimension limits (the same for every compute capability >= 3.0; the
    // driver rejects larger launches with CUDA_ERROR_INVALID_VALUE).
    for (int d = 0; d < 3; ++d) {
      if (launch_.grid[d] > kMaxGridDim[d]) {
        return absl::FailedPreconditionError(
            absl::StrCat("invalid_schedule: blockIdx.", std::string(1, static_cast<char>('x' + d)),
                         " extent ", launch_.grid[d], " exceeds the hardware grid limit ",
                         kMaxGridDim[d], " (", launch_.ToString(), ")"));
      }
      if (launch_.block[d] > kMaxBlockDim[d]) {
        return absl::FailedPreconditionError(
            absl::StrCat("invalid_schedule: threadIdx.", std::string(1, static_cast<char>('x' + d)),
                         " extent ", launch_.block[d], " exceeds the hardware block limit ",
                         kMaxBlockDim[d], " (", launch_.ToString(), ")"));
      }
    }
    // Above the static 48 KiB the kernel uses dynamic shared memory, which the runtime opts in to
    // (cuFuncSetAttribute) up to the device's opt-in maximum.
    const int64_t shared_limit =
        std::max(target.max_shared_memory_per_block, target.max_shared_memory_optin);
    if (launch_.shared_memory_bytes > shared_limit) {
      return absl::FailedPreconditionError(
          absl::StrCat("invalid_schedule: ", launch_.shared_memory_bytes,
                       " bytes of shared memory per block exceed the limit ", shared_limit,
                       " (the target's opt-in maximum)"));
    }
    for (const BarrierSite& b : barriers_) {
      if (b.under_if) {
        return absl::FailedPreconditionError(
            "invalid_schedule: a barrier is placed under a condition (threads would diverge)");
      }
      for (const EnclosingThread& t : b.threads) {
        if (t.extent != launch_.block[t.dim]) {
          return absl::FailedPreconditionError(
              absl::StrCat("invalid_schedule: a barrier inside loop '", t.var, "' (threadIdx.",
                           std::string(1, static_cast<char>('x' + t.dim)), " of extent ", t.extent,
                           ") is skipped by the block's other ", launch_.block[t.dim] - t.extent,
                           " threads of that dimension (threads would diverge)"));
        }
      }
    }
    return launch_;
  }

 private:
  struct BarrierSite {
    std::vector<EnclosingThread> threads;
    bool under_if = false;
  };
  LaunchConfig launch_;
  int64_t local_bytes_ = 0;  // local buffers live at the statement walked (per thread)
  std::vector<std::string> path_;
  std::vector<EnclosingThread> threads_;
  std::vector<BarrierSite> barriers_;
  bool block_bound_[3] = {false, false, false};
  bool has_block_ = false;
  bool has_thread_ = false;
  bool store_outside_blocks_ = false;
  int block_depth_ = 0;
  int if_depth_ = 0;
};

}  // namespace

Stmt HoistSharedAllocations(const Stmt& kernel) {
  std::vector<ir::BufferDecl> top;
  Stmt body = Hoist(kernel, &top);
  return Wrap(top, body);
}

Stmt RemoveRedundantBarriers(const Stmt& kernel) { return CleanBarriers(kernel, true); }

absl::StatusOr<LaunchConfig> AnalyzeKernel(const Stmt& kernel, const Target& target) {
  KernelWalker w;
  RETURN_IF_ERROR(w.Walk(kernel));
  return w.Finish(target);
}

}  // namespace tilesearch::schedule::lower_internal
