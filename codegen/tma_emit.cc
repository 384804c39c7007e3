// Emitter::EmitTmaLoad and Emitter::EmitMbarrier: TMA box copies and the mbarriers that track them
// (ir/stmt.h TmaLoadNode, MbarrierNode) as inline PTX for sm_90 (PTX ISA 8.0: cp.async.bulk.tensor,
// mbarrier.*). Shared addresses are the 32-bit shared-window addresses ("r" operands); the tensor
// map is passed by its generic (global) address ("l"), as the runtime keeps it in global memory.
//
// - init: mbarrier.init, then fence.mbarrier_init.release.cluster, which makes the initialized
//   barrier visible to the async proxy (the TMA unit) before the Barrier that the IR requires
//   after it publishes it to the other threads.
// - arrive_expect_tx: the thread arrives and raises the phase's expected transaction bytes;
//   arrive: it only arrives (over a cluster: mapa to each block's copy of the barrier, then
//   mbarrier.arrive.shared::cluster, release at CTA scope).
// - wait: a try_wait.parity loop (labels scoped by braces, so each inlined copy has its own).
// - setmaxnreg (EmitSetMaxNReg): the NVVM intrinsic.
// - tma_load: cp.async.bulk.tensor.<rank>d.shared::cluster.global.mbarrier::complete_tx::bytes
//   with the box coordinates innermost first (the IR's are outermost first), as 32-bit integers;
//   a multicast one (TmaLoadNode::multicast) adds .multicast::cluster with the mask of every block
//   of the cluster, under a predicate on %cluster_ctarank (only the issuer starts it).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "codegen/emitter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"

namespace tilesearch::codegen::internal {
namespace {

namespace arith = mlir::arith;

// An inline PTX statement without results.
void Asm(mlir::OpBuilder& b, mlir::Location loc, const std::string& text,
         const std::string& constraints, const std::vector<mlir::Value>& operands) {
  mlir::LLVM::InlineAsmOp::create(
      b, loc, mlir::TypeRange(), operands, text, constraints, /*has_side_effects=*/true,
      /*is_align_stack=*/false, mlir::LLVM::tailcallkind::TailCallKind::None,
      mlir::LLVM::AsmDialectAttr::get(b.getContext(), mlir::LLVM::AsmDialect::AD_ATT),
      mlir::ArrayAttr());
}

mlir::Value ToI32(mlir::OpBuilder& b, mlir::Location loc, mlir::Value v) {
  return arith::TruncIOp::create(b, loc, b.getI32Type(), v);
}

}  // namespace

absl::StatusOr<mlir::Value> Emitter::SharedAddress32(const std::string& what,
                                                     const std::string& name,
                                                     const ir::Expr& element) {
  const BufferBinding* bb = FindBuffer(name);
  if (bb == nullptr || bb->decl.scope != ir::MemoryScope::kShared) {
    return absl::InvalidArgumentError(what + ": '" + name + "' is not a shared buffer in scope");
  }
  std::vector<mlir::Value> zeros(bb->decl.shape.size(),
                                 arith::ConstantIndexOp::create(b_, loc_, 0));
  mlir::Value base = mlir::LLVM::PtrToIntOp::create(
      b_, loc_, b_.getI64Type(), ElementPointer(*bb, zeros, /*address_space=*/3));
  ASSIGN_OR_RETURN(mlir::Value off, EmitExpr(element));
  mlir::Value bytes = arith::MulIOp::create(b_, loc_, off, I64(ir::BytesOf(bb->decl.dtype)));
  return ToI32(b_, loc_, arith::AddIOp::create(b_, loc_, base, bytes));
}

absl::Status Emitter::EmitMbarrier(const ir::MbarrierNode* op) {
  const std::string what =
      absl::StrCat("mbarrier ", ir::MbarrierOpName(op->op), " on '", op->buffer, "'");
  if (config_.target != EmitTarget::kGpu) {
    return absl::InvalidArgumentError(what + ": mbarriers are GPU-only (sm_90)");
  }
  if (lane_.active) return absl::InvalidArgumentError(what + " inside a vectorized loop");
  const BufferBinding* bb = FindBuffer(op->buffer);
  if (bb == nullptr || bb->decl.dtype != ir::ScalarType::kInt64) {
    return absl::InvalidArgumentError(what + ": not an int64 shared buffer in scope");
  }
  b_.getContext()->getOrLoadDialect<mlir::LLVM::LLVMDialect>();
  ASSIGN_OR_RETURN(mlir::Value bar, SharedAddress32(what, op->buffer, op->index));
  auto i32 = [&](int64_t v) {
    return mlir::Value(
        arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(static_cast<int32_t>(v))));
  };
  switch (op->op) {
    case ir::MbarrierNode::Op::kInit:
      Asm(b_, loc_,
          "mbarrier.init.shared::cta.b64 [$0], $1;\n\tfence.mbarrier_init.release.cluster;", "r,r",
          {bar, i32(op->count)});
      return absl::OkStatus();
    case ir::MbarrierNode::Op::kArriveExpectTx:
      Asm(b_, loc_, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r",
          {bar, i32(op->count)});
      return absl::OkStatus();
    case ir::MbarrierNode::Op::kArrive:
      if (op->count > 1) {
        // The barrier at the same offset in each block of the cluster (mapa: its
        // shared::cluster address in the block of rank r), with the default semantics (release
        // at CTA scope), as CUTLASS's ClusterBarrier::arrive(cta_id): what it orders is this
        // block's reads of the slot, complete at the wgmma wait before it, against the TMA refill
        // the other block's producer starts only after its wait on this barrier. A .release
        // .cluster arrival puts a cluster-scope fence (MEMBAR) before every one, which waits for
        // the thread's outstanding memory operations: ncu found 53 % of the multicast kernel's
        // warp cycles stalled on it (bench/NOTES.md). (In the PTX memory model a CTA-scope
        // release does not synchronize with the other block's wait; what is relied on is the
        // write-after-read causality: the reads completed before the arrival, and the write
        // that may replace their data is started only after the arrival is observed.)
        for (int64_t r = 0; r < op->count; ++r) {
          Asm(b_, loc_,
              "{\n\t.reg .b32 ra;\n\tmapa.shared::cluster.u32 ra, $0, $1;\n\t"
              "mbarrier.arrive.shared::cluster.b64 _, [ra];\n\t}",
              "r,r", {bar, i32(r)});
        }
        return absl::OkStatus();
      }
      Asm(b_, loc_, "mbarrier.arrive.shared::cta.b64 _, [$0];", "r", {bar});
      return absl::OkStatus();
    case ir::MbarrierNode::Op::kWait: {
      ASSIGN_OR_RETURN(mlir::Value parity, EmitExpr(op->parity));
      Asm(b_, loc_,
          "{\n\t.reg .pred p;\n\tTS_WAIT:\n\t"
          "mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\n\t"
          "@!p bra TS_WAIT;\n\t}",
          "r,r", {bar, ToI32(b_, loc_, parity)});
      return absl::OkStatus();
    }
  }
  return absl::InternalError(what + ": unknown operation");
}

// A warpgroup's register reallocation (sm_90a; ptxas compiles the code it dominates within the
// new limit, and with one in the kernel allocates the most registers the block size allows).
absl::Status Emitter::EmitSetMaxNReg(const ir::SetMaxNRegNode* op) {
  const std::string what = absl::StrCat("setmaxnreg.", op->increase ? "inc " : "dec ", op->count);
  if (config_.target != EmitTarget::kGpu) {
    return absl::InvalidArgumentError(what + ": register reallocation is GPU-only (sm_90a)");
  }
  if (lane_.active) return absl::InvalidArgumentError(what + " inside a vectorized loop");
  // The NVVM intrinsic, not inline PTX: it is convergent, so LLVM does not move it across the
  // warpgroup-uniform branch it sits in.
  b_.getContext()->getOrLoadDialect<mlir::NVVM::NVVMDialect>();
  mlir::NVVM::SetMaxRegisterOp::create(b_, loc_, static_cast<int32_t>(op->count),
                                       op->increase ? mlir::NVVM::SetMaxRegisterAction::increase
                                                    : mlir::NVVM::SetMaxRegisterAction::decrease);
  return absl::OkStatus();
}

absl::Status Emitter::EmitTmaLoad(const ir::TmaLoadNode* op) {
  const std::string what = absl::StrCat("tma load into '", op->dst, "'");
  if (config_.target != EmitTarget::kGpu) {
    return absl::InvalidArgumentError(what + ": TMA is GPU-only (sm_90)");
  }
  if (lane_.active) return absl::InvalidArgumentError(what + " inside a vectorized loop");
  const BufferBinding* map = FindBuffer(op->tensor_map);
  if (map == nullptr || !map->decl.tensor_map || map->decl.scope != ir::MemoryScope::kGlobal) {
    return absl::InvalidArgumentError(what + ": '" + op->tensor_map +
                                      "' is not a tensor map buffer in scope");
  }
  const size_t rank = op->coords.size();
  if (rank != map->decl.tensor_map->dims.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", rank, " coordinates for a map of rank ", map->decl.tensor_map->dims.size()));
  }
  const BufferBinding* dst_buf = FindBuffer(op->dst);
  const BufferBinding* bar_buf = FindBuffer(op->barrier);
  const BufferBinding* src_buf = FindBuffer(map->decl.tensor_map->source);
  if (dst_buf == nullptr || src_buf == nullptr || dst_buf->decl.dtype != src_buf->decl.dtype) {
    return absl::InvalidArgumentError(what + ": the destination's element type is not that of '" +
                                      map->decl.tensor_map->source + "'");
  }
  if (bar_buf == nullptr || bar_buf->decl.dtype != ir::ScalarType::kInt64) {
    return absl::InvalidArgumentError(what + ": the mbarrier buffer '" + op->barrier +
                                      "' is not an int64 buffer in scope");
  }
  b_.getContext()->getOrLoadDialect<mlir::LLVM::LLVMDialect>();
  ASSIGN_OR_RETURN(mlir::Value dst, SharedAddress32(what, op->dst, op->dst_offset));
  ASSIGN_OR_RETURN(mlir::Value bar, SharedAddress32(what, op->barrier, op->barrier_index));
  std::vector<mlir::Value> zeros(map->decl.shape.size(),
                                 arith::ConstantIndexOp::create(b_, loc_, 0));
  mlir::Value desc = mlir::LLVM::PtrToIntOp::create(
      b_, loc_, b_.getI64Type(), ElementPointer(*map, zeros, /*address_space=*/1));
  std::vector<mlir::Value> operands = {dst, desc};
  std::string coords;
  for (size_t i = 0; i < rank; ++i) {
    ASSIGN_OR_RETURN(mlir::Value c, EmitExpr(op->coords[rank - 1 - i]));
    operands.push_back(ToI32(b_, loc_, c));
    absl::StrAppend(&coords, i ? ", $" : "$", i + 2);
  }
  operands.push_back(bar);
  std::string constraints = "r,l";
  for (size_t i = 0; i < rank; ++i) constraints += ",r";
  constraints += ",r";
  std::string text =
      absl::StrCat("cp.async.bulk.tensor.", rank,
                   "d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {", coords,
                   "}], [$", rank + 2, "];");
  if (op->multicast > 1) {  // (2..8 with an issuer: TmaLoadNode::Make and the codec check it)
    // Only the block of cluster rank `issuer` starts the copy, for every block of the cluster
    // (ctaMask: all of them); each block's barrier at the same offset counts the bytes.
    ASSIGN_OR_RETURN(mlir::Value issuer, EmitExpr(op->issuer));
    operands.push_back(
        arith::ConstantOp::create(b_, loc_, b_.getI16IntegerAttr((1 << op->multicast) - 1)));
    operands.push_back(ToI32(b_, loc_, issuer));
    text = absl::StrCat(
        "{\n\t.reg .pred p;\n\t.reg .b32 r;\n\tmov.u32 r, %cluster_ctarank;\n\t"
        "setp.eq.u32 p, r, $",
        rank + 4, ";\n\t@p cp.async.bulk.tensor.", rank,
        "d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [$0], [$1, {",
        coords, "}], [$", rank + 2, "], $", rank + 3, ";\n\t}");
    constraints += ",h,r";
  }
  Asm(b_, loc_, text, constraints, operands);
  return absl::OkStatus();
}

}  // namespace tilesearch::codegen::internal
