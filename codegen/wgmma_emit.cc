// Emitter::EmitWgmma: one warpgroup's tensor-core update (ir/stmt.h WgmmaNode) as PTX
// wgmma.mma_async.sync.aligned.m64nNkK.f32.<t>.<t> (k16 for f16 / bf16, k8 for tf32) through
// the NVVM dialect (nvvm.wgmma.*; the mma itself becomes inline PTX in convert-nvvm-to-llvm, which
// gpu_compile.cc runs for modules that use it). Needs sm_90a.
//
// Matrix descriptors (PTX ISA, "Matrix Descriptor Format"), 64 bits: start address >> 4 in bits
// 0–13, leading byte offset >> 4 in 16–29, stride byte offset >> 4 in 32–45, the base offset
// (bits 49–51) 0 because every tile origin is on the swizzle's 1024-byte period, and the swizzle
// mode in 62–63 (1: 128 bytes, 2: 64, 3: 32). A k step or a 64-row tile further is the same
// descriptor with the start address moved by ir::WgmmaLayoutOffset of that element: the hardware
// swizzles the absolute address bits, as WgmmaNode defines.
//
// A tf32 A with WgmmaLayout::registers: each thread loads its four values per 64 × 8 block from
// the plain shared tile, rounds them to TF32 and passes them as registers to the register form
// of the instruction (inline PTX: nvvm.wgmma.mma_async takes descriptors only). The loads come
// before the fence, pinned there like the accumulators.
//
// Order per statement: fence.proxy.async (the operands were written by the generic proxy:
// st.shared / cp.async, and a barrier; wgmma reads them through the async proxy), wgmma.fence
// (the accumulator registers were written by ordinary instructions), the m_tiles × k_steps
// wgmma's chained through their accumulators, commit, then wait_group `pending`: 0 keeps the
// statement synchronous; 1 lets this group run on while the warpgroup issues the next tile's fills
// (the lowering keeps those off the tiles in flight).
//
// No accumulator register may be written between wgmma.fence and the wgmma's that read it, nor
// while another wgmma is in flight: ptxas then injects warpgroup.arrive / warpgroup.wait (its
// notes C7519 / C7517) and serializes the wgmma's. The values are loaded before the fence, but
// LLVM materializes a constant operand of the wgmma's inline asm right before the asm: the zeros
// of a freshly cleared accumulator (the TF32 kinds clear theirs every k tile; a bf16 k loop that
// LLVM unrolls hands the first wgmma the initial zeros) landed after the fence, one 64-row half's
// after the other half's wgmma was issued. So the loaded values pass through an empty volatile
// asm ("+f" on every register, as CUTLASS's warpgroup_fence_operand) before the fence: whatever
// defines them is placed before it, and the asm itself emits nothing. (scale-d = 0 on a cleared
// accumulator's first wgmma would drop the zeroing, but its undefined input registers stay live
// for ptxas across the k loop: up to 15 registers more, and no faster on the H200.)
#include <functional>
#include <string>
#include <utility>
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

int64_t SwizzleMode(int64_t swizzle) {
  switch (swizzle) {
    case 128:
      return 1;
    case 64:
      return 2;
    default:
      return 3;
  }
}

class WgmmaWriter {
 public:
  // `round`: a float32 value rounded to TF32 (as the interpreter's MmaOperandValue), for A read
  // into registers.
  WgmmaWriter(mlir::OpBuilder& b, mlir::Location loc, const ir::WgmmaNode& n,
              std::function<mlir::Value(mlir::Value)> round)
      : b_(b), loc_(loc), n_(n), round_(std::move(round)) {}

  // `a_addr` / `b_addr`: the tiles' origins as i64 shared-window byte addresses; `thread`: the
  // thread's index in the warpgroup (i64).
  void Emit(mlir::Value acc, mlir::Value a_addr, mlir::Value b_addr, mlir::Value thread) {
    mlir::MLIRContext* ctx = b_.getContext();
    const int64_t regs = n_.n / 2;
    auto f32 = b_.getF32Type();
    auto st = mlir::LLVM::LLVMStructType::getLiteral(ctx, llvm::SmallVector<mlir::Type>(regs, f32));
    std::vector<mlir::Value> d(n_.m_tiles);
    for (int64_t i = 0; i < n_.m_tiles; ++i) {
      std::vector<mlir::Value> v(regs);
      for (int64_t r = 0; r < regs; ++r) {
        v[r] = mlir::memref::LoadOp::create(b_, loc_, acc, AccIndices(i, r));
      }
      d[i] = InRegisters(st, v, "f");
    }
    // A in registers: every fragment loaded and rounded before the fence (which must follow the
    // last write of a register a wgmma reads).
    std::vector<mlir::Value> a_regs;
    if (n_.a_layout.registers) {
      // An earlier wgmma may still be reading A registers, and the loop's next fragments land in
      // the same PTX registers (the loads of each iteration reuse them), which ptxas does not
      // guard as it guards accumulators: wrong results on the H200 with 4 or more stages. Wait
      // for every wgmma in flight first.
      mlir::NVVM::WgmmaWaitGroupSyncOp::create(b_, loc_, b_.getI64IntegerAttr(0));
      a_regs = AFragments(a_addr, thread);
    }
    if (n_.proxy_fence) {
      mlir::NVVM::FenceProxyOp::create(
          b_, loc_, mlir::NVVM::ProxyKindAttr::get(ctx, mlir::NVVM::ProxyKind::async_shared),
          mlir::NVVM::SharedSpaceAttr::get(ctx, mlir::NVVM::SharedSpace::shared_cta));
    }
    mlir::NVVM::WgmmaFenceAlignedOp::create(b_, loc_);
    const auto type = n_.kind == ir::MmaKind::kBF16   ? mlir::NVVM::WGMMATypes::bf16
                      : n_.kind == ir::MmaKind::kTF32 ? mlir::NVVM::WGMMATypes::tf32
                                                      : mlir::NVVM::WGMMATypes::f16;
    const int64_t depth = ir::MmaK(n_.kind);
    // PTX's A is "row" when K-major, B "col" when K-major; the other layouts are the transposes.
    const auto layout_a =
        n_.a_layout.k_major ? mlir::NVVM::MMALayout::row : mlir::NVVM::MMALayout::col;
    const auto layout_b =
        n_.b_layout.k_major ? mlir::NVVM::MMALayout::col : mlir::NVVM::MMALayout::row;
    const DescriptorBase a_base =
        n_.a_layout.registers ? DescriptorBase{} : Base(a_addr, n_.a_layout);
    const DescriptorBase b_base = Base(b_addr, n_.b_layout);
    for (int64_t ks = 0; ks < n_.k_steps; ++ks) {
      const mlir::Value db = Descriptor(b_base, n_.b_layout, 0, depth * ks);
      for (int64_t i = 0; i < n_.m_tiles; ++i) {
        if (n_.a_layout.registers) {
          d[i] = RegisterWgmma(st, d[i], a_regs, (ks * n_.m_tiles + i) * 4, db);
          continue;
        }
        const mlir::Value da = Descriptor(a_base, n_.a_layout, 64 * i, depth * ks);
        d[i] = mlir::NVVM::WgmmaMmaAsyncOp::create(
            b_, loc_, st, d[i], da, db, mlir::NVVM::MMAShapeAttr::get(ctx, 64, n_.n, depth), type,
            type, mlir::NVVM::WGMMATypes::f32, mlir::NVVM::WGMMAScaleOut::one,
            mlir::NVVM::WGMMAScaleIn::one, mlir::NVVM::WGMMAScaleIn::one, layout_a, layout_b,
            mlir::NVVM::MMAIntOverflowAttr());
      }
    }
    mlir::NVVM::WgmmaGroupSyncAlignedOp::create(b_, loc_);
    mlir::NVVM::WgmmaWaitGroupSyncOp::create(b_, loc_, b_.getI64IntegerAttr(n_.pending));
    for (int64_t i = 0; i < n_.m_tiles; ++i) {
      for (int64_t r = 0; r < regs; ++r) {
        mlir::Value v = mlir::LLVM::ExtractValueOp::create(b_, loc_, d[i], r);
        mlir::memref::StoreOp::create(b_, loc_, v, acc, AccIndices(i, r));
      }
    }
  }

 private:
  // The struct `st` of `values`, which an empty volatile asm (each register read and written in
  // place, "+f") holds in their registers from here on: what defines them (a constant, say) is
  // placed before this point, not next to the wgmma that reads them.
  mlir::Value InRegisters(mlir::Type st, const std::vector<mlir::Value>& values,
                          const char* letter) {
    std::string constraints;
    for (size_t r = 0; r < values.size(); ++r) {
      absl::StrAppend(&constraints, r ? "," : "", "=", letter);
    }
    for (size_t r = 0; r < values.size(); ++r) absl::StrAppend(&constraints, ",", r);
    return mlir::LLVM::InlineAsmOp::create(
               b_, loc_, st, values, "", constraints, /*has_side_effects=*/true,
               /*is_align_stack=*/false, mlir::LLVM::tailcallkind::TailCallKind::None,
               mlir::LLVM::AsmDialectAttr::get(b_.getContext(), mlir::LLVM::AsmDialect::AD_ATT),
               mlir::ArrayAttr())
        .getRes();
  }

  // The thread's A fragments of every k step and 64-row tile, [k step][tile][4] flattened, as
  // TF32 bit patterns (i32): the PTX ISA's register fragment of wgmma .tf32 A, register r of
  // thread t holding element (16 (t / 32) + (t % 32) / 4 + 8 (r % 2), t % 4 + 4 (r / 2)) of the
  // 64 × 8 block, read from the plain layout.
  std::vector<mlir::Value> AFragments(mlir::Value a_addr, mlir::Value thread) {
    const ir::WgmmaLayout& l = n_.a_layout;
    const int64_t e = l.element_bytes;
    auto mul = [&](mlir::Value x, int64_t c) -> mlir::Value {
      return arith::MulIOp::create(b_, loc_, x, I64(c));
    };
    auto div = [&](mlir::Value x, int64_t c) -> mlir::Value {
      return arith::DivUIOp::create(b_, loc_, x, I64(c));
    };
    auto rem = [&](mlir::Value x, int64_t c) -> mlir::Value {
      return arith::RemUIOp::create(b_, loc_, x, I64(c));
    };
    const mlir::Value row =
        arith::AddIOp::create(b_, loc_, mul(div(thread, 32), 16), div(rem(thread, 32), 4));
    const mlir::Value base =
        arith::AddIOp::create(b_, loc_, a_addr,
                              mul(arith::AddIOp::create(b_, loc_, mul(row, l.row_stride),
                                                        mul(rem(thread, 4), l.k_stride)),
                                  e));
    auto ptr_type = mlir::LLVM::LLVMPointerType::get(b_.getContext(), 3);
    std::vector<mlir::Value> out;
    for (int64_t ks = 0; ks < n_.k_steps; ++ks) {
      for (int64_t i = 0; i < n_.m_tiles; ++i) {
        for (int64_t r = 0; r < 4; ++r) {
          const int64_t at = e * ((64 * i + 8 * (r % 2)) * l.row_stride +
                                  (ir::MmaK(n_.kind) * ks + 4 * (r / 2)) * l.k_stride);
          const mlir::Value addr = arith::AddIOp::create(b_, loc_, base, I64(at));
          mlir::Value p = mlir::LLVM::IntToPtrOp::create(b_, loc_, ptr_type, addr);
          mlir::Value x = mlir::LLVM::LoadOp::create(b_, loc_, b_.getF32Type(), p);
          out.push_back(arith::BitcastOp::create(b_, loc_, b_.getI32Type(), round_(x)));
        }
      }
    }
    auto st = mlir::LLVM::LLVMStructType::getLiteral(
        b_.getContext(), llvm::SmallVector<mlir::Type>(out.size(), b_.getI32Type()));
    mlir::Value held = InRegisters(st, out, "r");
    for (size_t r = 0; r < out.size(); ++r) {
      out[r] = mlir::LLVM::ExtractValueOp::create(b_, loc_, held, r);
    }
    return out;
  }

  // One wgmma .tf32 with A from registers a_regs[first .. first + 4) and B through descriptor
  // `db`, accumulating into the struct `d` (inline PTX: the NVVM op takes descriptors only).
  mlir::Value RegisterWgmma(mlir::Type st, mlir::Value d, const std::vector<mlir::Value>& a_regs,
                            int64_t first, mlir::Value db) {
    const int64_t regs = n_.n / 2;
    std::string text =
        absl::StrCat("wgmma.mma_async.sync.aligned.m64n", n_.n, "k8.f32.tf32.tf32 {");
    std::string constraints;
    for (int64_t r = 0; r < regs; ++r) {
      absl::StrAppend(&text, r ? ", " : "", "$", r);
      absl::StrAppend(&constraints, r ? "," : "", "=f");
    }
    absl::StrAppend(&text, "}, {$", regs, ", $", regs + 1, ", $", regs + 2, ", $", regs + 3, "}, $",
                    regs + 4, ", 1, 1, 1;");
    absl::StrAppend(&constraints, ",r,r,r,r,l");
    std::vector<mlir::Value> operands(a_regs.begin() + first, a_regs.begin() + first + 4);
    operands.push_back(db);
    for (int64_t r = 0; r < regs; ++r) {
      absl::StrAppend(&constraints, ",", r);
      operands.push_back(mlir::LLVM::ExtractValueOp::create(b_, loc_, d, r));
    }
    return mlir::LLVM::InlineAsmOp::create(
               b_, loc_, st, operands, text, constraints, /*has_side_effects=*/true,
               /*is_align_stack=*/false, mlir::LLVM::tailcallkind::TailCallKind::None,
               mlir::LLVM::AsmDialectAttr::get(b_.getContext(), mlir::LLVM::AsmDialect::AD_ATT),
               mlir::ArrayAttr())
        .getRes();
  }

  mlir::Value I64(int64_t v) {
    return arith::ConstantOp::create(b_, loc_, b_.getI64IntegerAttr(v));
  }
  mlir::Value Index(int64_t v) { return arith::ConstantIndexOp::create(b_, loc_, v); }

  // acc[i, r / 4, r % 4]: register r of the 64-row tile i (the D fragment's order).
  std::vector<mlir::Value> AccIndices(int64_t i, int64_t r) {
    return {Index(i), Index(r / 4), Index(r % 4)};
  }

  // A tile's descriptor split in its two 32-bit halves: `low` (the start address field and the
  // leading byte offset) computed once per statement, `high` (stride byte offset, swizzle mode) a
  // constant. `origin` is the tile's origin (i64 shared-window byte address).
  struct DescriptorBase {
    mlir::Value origin;
    mlir::Value low;  // i32
    int64_t high = 0;
  };
  DescriptorBase Base(mlir::Value origin, const ir::WgmmaLayout& l) {
    const int64_t fixed = ((l.lbo >> 4) & 0x3FFF) << 16 | ((l.sbo >> 4) & 0x3FFF) << 32 |
                          SwizzleMode(l.swizzle) << 62;
    mlir::Value start = arith::ShRUIOp::create(
        b_, loc_, arith::AndIOp::create(b_, loc_, origin, I64(0x3FFFF)), I64(4));
    mlir::Value low = arith::OrIOp::create(b_, loc_, start, I64(fixed & 0xFFFFFFFF));
    return {origin, arith::TruncIOp::create(b_, loc_, b_.getI32Type(), low),
            fixed & ~int64_t{0xFFFFFFFF}};
  }

  // The descriptor of the operand tile whose element (row, k) is at the base's origin + the
  // layout's offset of (row, k). A shared-window address is below 2^18 and every tile origin and
  // offset here is a multiple of 16, so the start field (address >> 4) of the moved tile is the
  // origin's plus offset >> 4, within its 14 bits: one 32-bit add on the low half per wgmma
  // instead of the address's mask, shift and or in 64 bits (CUTLASS's descriptor iterator moves
  // the start address the same way). An offset that is not a multiple of 16 (no layout makes
  // one) is encoded from the address.
  mlir::Value Descriptor(const DescriptorBase& base, const ir::WgmmaLayout& l, int64_t row,
                         int64_t k) {
    const int64_t offset = ir::WgmmaLayoutOffset(l, row, k);
    mlir::Value low = base.low;
    if (offset % 16 != 0) {
      const DescriptorBase moved =
          Base(arith::AddIOp::create(b_, loc_, base.origin, I64(offset)), l);
      low = moved.low;
    } else if (offset != 0) {
      low = arith::AddIOp::create(
          b_, loc_, low, arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(offset >> 4)));
    }
    mlir::Value wide = arith::ExtUIOp::create(b_, loc_, b_.getI64Type(), low);
    return arith::OrIOp::create(b_, loc_, wide, I64(base.high));
  }

  mlir::OpBuilder& b_;
  mlir::Location loc_;
  const ir::WgmmaNode& n_;
  std::function<mlir::Value(mlir::Value)> round_;
};

}  // namespace

absl::Status Emitter::EmitWgmma(const ir::WgmmaNode* op) {
  const std::string what = absl::StrCat("wgmma on '", op->acc, "'");
  if (config_.target != EmitTarget::kGpu) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": wgmma is GPU-only (sm_90a); the host target cannot run it"));
  }
  if (lane_.active) return absl::InvalidArgumentError(what + " inside a vectorized loop");
  ASSIGN_OR_RETURN(const BufferBinding* acc,
                   MmaAccumulator(what, op->acc, {op->m_tiles, op->n / 8, 4}));
  b_.getContext()->getOrLoadDialect<mlir::NVVM::NVVMDialect>();
  b_.getContext()->getOrLoadDialect<mlir::LLVM::LLVMDialect>();
  auto address = [&](const char* role, const std::string& name,
                     const ir::Expr& offset) -> absl::StatusOr<mlir::Value> {
    ASSIGN_OR_RETURN(const BufferBinding* bb, SharedMmaOperand(what, role, name, op->kind));
    const ir::BufferDecl& d = bb->decl;
    std::vector<mlir::Value> zeros(d.shape.size(), arith::ConstantIndexOp::create(b_, loc_, 0));
    mlir::Value base = mlir::LLVM::PtrToIntOp::create(
        b_, loc_, b_.getI64Type(), ElementPointer(*bb, zeros, /*address_space=*/3));
    ASSIGN_OR_RETURN(mlir::Value off, EmitExpr(offset));
    const int64_t element_bytes = op->kind == ir::MmaKind::kTF32 ? 4 : 2;
    mlir::Value bytes = arith::MulIOp::create(
        b_, loc_, off, arith::ConstantOp::create(b_, loc_, b_.getI64IntegerAttr(element_bytes)));
    return mlir::Value(arith::AddIOp::create(b_, loc_, base, bytes));
  };
  ASSIGN_OR_RETURN(mlir::Value a, address("A", op->a, op->a_offset));
  ASSIGN_OR_RETURN(mlir::Value b, address("B", op->b, op->b_offset));
  ASSIGN_OR_RETURN(mlir::Value thread, EmitExpr(op->thread));
  WgmmaWriter(b_, loc_, *op, [this](mlir::Value x) {
    return Tf32Value(x, /*round=*/true);
  }).Emit(acc->memref, a, b, thread);
  return absl::OkStatus();
}

}  // namespace tilesearch::codegen::internal
