#include "codegen/kernel_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tilesearch::codegen::internal {
namespace {

using ir::ForKind;
using ir::ForNode;
using ir::MemoryScope;
using ir::Stmt;
using ir::StmtKind;

const char* kDimNames[3] = {"x", "y", "z"};

// Splits the body: global Allocates (anywhere in the top-level chain of Allocates and Seqs)
// become scratch buffers, everything else is a kernel.
void SplitKernels(const Stmt& s, std::vector<KernelArg>& scratch, std::vector<Stmt>& kernels) {
  if (!s.defined()) return;
  if (const auto* a = s.as<ir::AllocateNode>(); a && a->buffer.scope == MemoryScope::kGlobal) {
    scratch.push_back(KernelArg{
        a->buffer, a->buffer.tensor_map ? KernelArg::Kind::kTensorMap : KernelArg::Kind::kScratch});
    SplitKernels(a->body, scratch, kernels);
    return;
  }
  if (const auto* seq = s.as<ir::SeqNode>()) {
    for (const Stmt& c : seq->stmts) SplitKernels(c, scratch, kernels);
    return;
  }
  kernels.push_back(s);
}

// Facts about one kernel statement, and the first structural error found in it.
class KernelScan : public ir::StmtVisitor {
 public:
  std::array<int64_t, 3> block_extent = {0, 0, 0};
  std::array<int64_t, 3> thread_extent = {0, 0, 0};
  bool has_thread_loops = false;
  bool has_barrier = false;
  bool local_encloses_thread_loop = false;
  std::string local_name;
  absl::Status status;

 protected:
  void VisitFor(const ForNode* op, const Stmt& s) override {
    const int dim = BoundDim(op->for_kind);
    if (dim >= 0 && status.ok()) {
      const std::optional<int64_t> extent = ir::AsConstInt(op->extent);
      if (!extent) {
        status = absl::InvalidArgumentError(
            absl::StrCat(ir::ForKindName(op->for_kind), " loop '", op->var_name(),
                         "' has a non-constant extent ", ir::ToString(op->extent)));
      } else if (*extent < 1) {
        status = absl::InvalidArgumentError(absl::StrCat(ir::ForKindName(op->for_kind), " loop '",
                                                         op->var_name(), "' has extent ", *extent));
      } else if (ir::IsBlockBound(op->for_kind)) {
        block_extent[dim] = std::max(block_extent[dim], *extent);
      } else {
        thread_extent[dim] = std::max(thread_extent[dim], *extent);
        has_thread_loops = true;
        if (local_depth_ > 0 && !local_encloses_thread_loop) {
          local_encloses_thread_loop = true;
          local_name = local_stack_.back();
        }
      }
    }
    ir::StmtVisitor::VisitFor(op, s);
  }
  void VisitAllocate(const ir::AllocateNode* op, const Stmt& s) override {
    if (op->buffer.scope == MemoryScope::kGlobal && status.ok()) {
      status = absl::UnimplementedError(absl::StrCat(
          "global allocate '", op->buffer.name,
          "' inside a kernel (global intermediates must be allocated at the top of the nest)"));
    }
    const bool local = op->buffer.scope == MemoryScope::kLocal;
    if (local) {
      ++local_depth_;
      local_stack_.push_back(op->buffer.name);
    }
    ir::StmtVisitor::VisitAllocate(op, s);
    if (local) {
      --local_depth_;
      local_stack_.pop_back();
    }
  }
  void VisitBarrier(const ir::BarrierNode* op, const Stmt&) override {
    has_barrier = true;
    Cluster(op->cluster, "cluster barrier");
  }
  void VisitTmaLoad(const ir::TmaLoadNode* op, const Stmt& s) override {
    Cluster(op->multicast, "multicast tma load");
    ir::StmtVisitor::VisitTmaLoad(op, s);
  }

 public:
  // Blocks per cluster along blockIdx.x (1: no cluster), from the cluster barriers and multicast
  // copies; they must agree.
  int64_t cluster = 1;

 private:
  void Cluster(int64_t size, const char* what) {
    if (size <= 1 || !status.ok()) return;
    if (cluster > 1 && cluster != size) {
      status = absl::InvalidArgumentError(absl::StrCat(
          what, " over a cluster of ", size, " blocks in a kernel of clusters of ", cluster));
    }
    cluster = size;
  }
  int local_depth_ = 0;
  std::vector<std::string> local_stack_;
};

// Finds a Barrier under a threadIdx loop whose extent is smaller than the block (a guarded
// barrier: the threads outside the guard would never reach it).
class GuardedBarrierScan : public ir::StmtVisitor {
 public:
  explicit GuardedBarrierScan(const std::array<int64_t, 3>& block) : block_(block) {}
  std::string guard;  // the loop, when found

 protected:
  void VisitFor(const ForNode* op, const Stmt& s) override {
    const int dim = BoundDim(op->for_kind);
    const bool guarded =
        ir::IsThreadBound(op->for_kind) && ir::AsConstInt(op->extent).value_or(0) < block_[dim];
    if (guarded)
      guards_.push_back(absl::StrCat(ir::ForKindName(op->for_kind), " loop '", op->var_name(),
                                     "' (extent ", ir::AsConstInt(op->extent).value_or(0), " < ",
                                     block_[dim], " threads)"));
    ir::StmtVisitor::VisitFor(op, s);
    if (guarded) guards_.pop_back();
  }
  void VisitBarrier(const ir::BarrierNode*, const Stmt&) override {
    if (!guards_.empty() && guard.empty()) guard = guards_.back();
  }

 private:
  std::array<int64_t, 3> block_;
  std::vector<std::string> guards_;
};

absl::StatusOr<ModulePlan> PlanCommon(const ir::LoopNest& nest) {
  ModulePlan plan;
  plan.name = SanitizeName(nest.name.empty() ? "kernel" : nest.name);
  ASSIGN_OR_RETURN(plan.args, KernelArgs(nest));
  return plan;
}

}  // namespace

int BoundDim(ForKind kind) {
  switch (kind) {
    case ForKind::kBlockIdxX:
    case ForKind::kThreadIdxX:
      return 0;
    case ForKind::kBlockIdxY:
    case ForKind::kThreadIdxY:
      return 1;
    case ForKind::kBlockIdxZ:
    case ForKind::kThreadIdxZ:
      return 2;
    default:
      return -1;
  }
}

std::string SanitizeName(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out.push_back(ok ? c : '_');
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out.insert(out.begin(), '_');
  return out;
}

absl::StatusOr<ModulePlan> PlanGpuModule(const ir::LoopNest& nest,
                                         const std::vector<LaunchConfig>& launches) {
  ASSIGN_OR_RETURN(ModulePlan plan, PlanCommon(nest));
  std::vector<KernelArg> scratch;
  std::vector<Stmt> kernels;
  SplitKernels(nest.body, scratch, kernels);
  if (kernels.empty()) return absl::InvalidArgumentError("the loop nest has no kernel statement");
  if (!launches.empty() && launches.size() != kernels.size()) {
    return absl::InvalidArgumentError(absl::StrCat("got ", launches.size(),
                                                   " launch configurations for ", kernels.size(),
                                                   " kernels of '", nest.name, "'"));
  }
  for (size_t k = 0; k < kernels.size(); ++k) {
    KernelScan scan;
    scan.Visit(kernels[k]);
    RETURN_IF_ERROR(scan.status);
    KernelPlan kp;
    kp.body = kernels[k];
    kp.name = kernels.size() == 1 ? plan.name : absl::StrCat(plan.name, "_", k);
    kp.has_thread_loops = scan.has_thread_loops;
    kp.has_barrier = scan.has_barrier;
    if (!launches.empty()) {
      kp.min_blocks_per_sm = launches[k].min_blocks_per_sm;
      if (kp.min_blocks_per_sm < 0 || kp.min_blocks_per_sm > 32) {
        return absl::InvalidArgumentError(absl::StrCat("kernel ", k, " of '", nest.name,
                                                       "': min_blocks_per_sm ",
                                                       kp.min_blocks_per_sm, " is not in 0..32"));
      }
    }
    for (int d = 0; d < 3; ++d) {
      const int64_t need_grid = std::max<int64_t>(scan.block_extent[d], 1);
      const int64_t need_block = std::max<int64_t>(scan.thread_extent[d], 1);
      if (launches.empty()) {
        kp.grid[d] = need_grid;
        kp.block[d] = need_block;
        continue;
      }
      kp.grid[d] = launches[k].grid[d];
      kp.block[d] = launches[k].block[d];
      if (kp.grid[d] < need_grid || kp.block[d] < need_block) {
        const bool grid = kp.grid[d] < need_grid;
        return absl::InvalidArgumentError(absl::StrCat(
            "kernel ", k, " of '", nest.name, "': ", grid ? "blockIdx." : "threadIdx.",
            kDimNames[d], " loops need ", grid ? need_grid : need_block, " but the launch has ",
            grid ? "gridDim." : "blockDim.", kDimNames[d], " = ", grid ? kp.grid[d] : kp.block[d]));
      }
    }
    kp.cluster = scan.cluster;
    if (kp.grid[0] % kp.cluster != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel ", k, " of '", nest.name, "': gridDim.x = ", kp.grid[0],
                       " is not a multiple of its cluster of ", kp.cluster, " blocks"));
    }
    GuardedBarrierScan guarded(kp.block);
    guarded.Visit(kernels[k]);
    if (!guarded.guard.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kernel ", k, " of '", nest.name, "': barrier under the guard of ", guarded.guard));
    }
    plan.kernels.push_back(std::move(kp));
  }
  return plan;
}

absl::StatusOr<ModulePlan> PlanHostModule(const ir::LoopNest& nest) {
  ASSIGN_OR_RETURN(ModulePlan plan, PlanCommon(nest));
  std::vector<KernelArg> scratch;
  std::vector<Stmt> kernels;
  SplitKernels(nest.body, scratch, kernels);
  for (size_t k = 0; k < kernels.size(); ++k) {
    KernelScan scan;
    scan.Visit(kernels[k]);
    RETURN_IF_ERROR(scan.status);
    if (scan.has_thread_loops && scan.has_barrier) {
      return absl::UnimplementedError(
          absl::StrCat("host code for kernel ", k, " of '", nest.name,
                       "': threadIdx loops with barriers cannot run as serial loops"));
    }
    if (scan.local_encloses_thread_loop) {
      return absl::UnimplementedError(absl::StrCat(
          "host code for kernel ", k, " of '", nest.name, "': local buffer '", scan.local_name,
          "' encloses a threadIdx loop (it would be shared by the serialized threads)"));
    }
    KernelPlan kp;
    kp.body = kernels[k];
    kp.name = plan.name;
    kp.has_thread_loops = scan.has_thread_loops;
    kp.has_barrier = scan.has_barrier;
    plan.kernels.push_back(std::move(kp));
  }
  return plan;
}

}  // namespace tilesearch::codegen::internal

namespace tilesearch::codegen {

const char* KernelArgKindName(KernelArg::Kind kind) {
  switch (kind) {
    case KernelArg::Kind::kInput:
      return "input";
    case KernelArg::Kind::kOutput:
      return "output";
    case KernelArg::Kind::kScratch:
      return "scratch";
    case KernelArg::Kind::kTensorMap:
      return "tensor_map";
  }
  return "?";
}

absl::StatusOr<std::vector<KernelArg>> KernelArgs(const ir::LoopNest& nest) {
  std::vector<KernelArg> args;
  for (size_t i = 0; i < nest.params.size(); ++i) {
    const bool input = static_cast<int>(i) < nest.num_inputs;
    args.push_back(
        KernelArg{nest.params[i], input ? KernelArg::Kind::kInput : KernelArg::Kind::kOutput});
  }
  std::vector<KernelArg> scratch;
  std::vector<ir::Stmt> kernels;
  internal::SplitKernels(nest.body, scratch, kernels);
  for (KernelArg& a : scratch) {
    if (a.buffer.tensor_map) {
      // The map's source must be a parameter the runtime allocates, of the map's size.
      const ir::TensorMapSpec& map = *a.buffer.tensor_map;
      const ir::BufferDecl* source = nullptr;
      for (const ir::BufferDecl& p : nest.params) {
        if (p.name == map.source) source = &p;
      }
      if (source == nullptr) {
        return absl::InvalidArgumentError("tensor map '" + a.buffer.name + "' describes '" +
                                          map.source + "', which is not a parameter of the nest");
      }
      if (a.buffer.Bytes() != 8 * ir::kTensorMapWords) {
        return absl::InvalidArgumentError("tensor map '" + a.buffer.name + "' is " +
                                          std::to_string(a.buffer.Bytes()) +
                                          " bytes, not the 128 of a CUtensorMap");
      }
      if (absl::Status ok = ir::CheckTensorMap(map, *source); !ok.ok()) return ok;
    }
    args.push_back(std::move(a));
  }
  return args;
}

}  // namespace tilesearch::codegen
