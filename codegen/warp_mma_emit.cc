// Emitter::EmitWarpMma: one warp's tensor-core update of a warp tile (ir/stmt.h WarpMmaNode) as PTX
// mma.sync.aligned.m16n8kK.row.col.f32.<t>.<t>.f32 through the NVVM dialect (nvvm.ldmatrix,
// nvvm.mma.sync), so no extra dialect or conversion pass is needed.
//
// Fragments (PTX ISA, "Matrix fragments for mma.m16n8k16 / mma.m16n8k8"), with g = lane / 4 and
// t = lane % 4, in 32-bit registers (a 16-bit pair keeps its lower k in the low half):
//   f16 / bf16  A (16×16): register q holds (row g + 8 (q % 2), k 2t + 8 (q / 2) + {0, 1})
//               B (16×8):  register q holds (k 2t + 8q + {0, 1}, column g)
//   tf32        A (16×8):  register q holds (row g + 8 (q % 2), k t + 4 (q / 2))
//               B (8×8):   register q holds (k t + 4q, column g)
//   C (f32):    element e is (row g + 8 (e / 2), column 2t + e % 2): WarpMmaNode's acc layout.
//
// ldmatrix.m8n8.b16 (.x2 / .x4) loads 16-bit fragments when every row it reads is 16-byte aligned:
// lanes 8p..8p+7 give the addresses of the eight 8-element rows of matrix p, and matrix p arrives
// in register p with lane l holding row l / 4, elements 2 (l % 4) + {0, 1}; with .trans it holds
// the transposed matrix's row l / 4, i.e. elements (2 (l % 4) + {0, 1}, l / 4) of the rows read.
// So an A fragment is the four 8×8 matrices at (m, k) = (0, 0), (8, 0), (0, 8), (8, 8): read as
// [m][k] rows directly, or as [k][m] rows with .trans. A B fragment is the matrices at (k, n) =
// (0, 0), (8, 0), as [n][k] rows directly or [k][n] rows with .trans, two fragments per .x4.
// Otherwise, and always for tf32 (ldmatrix has no 32-bit transpose), each register is built from
// scalar shared loads.
//
// The hardware distributes fragments by the thread's lane in its warp (%laneid) while the addresses
// and scalar loads here follow the statement's `lane`: the two must agree (threadIdx.x % 32 with
// blockDim.x a multiple of 32, as tensor-core schedules bind it), as WarpMmaNode requires.
#include <array>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "codegen/emitter.h"
#include "ir/simplify.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"

namespace tilesearch::codegen::internal {
namespace {

namespace arith = mlir::arith;
using ir::MmaKind;

// TF32 keeps the sign, the exponent and 10 mantissa bits of a float32.
constexpr int64_t kTf32Mask = 0xFFFFE000;
constexpr int64_t kExponentMask = 0x7F800000;

// One operand as emitted: its binding, the tile origin's indices and how it is read.
struct Operand {
  const BufferBinding* binding = nullptr;
  std::vector<mlir::Value> origin;  // index values, one per dimension
  bool k_inner = true;              // the last dimension is k
  bool ldmatrix = false;            // 16-bit, every row read 16-byte aligned
};

// The 32-bit registers of one fragment (tf32x3: `big` and `small` parts; otherwise `big` only).
struct Fragment {
  std::vector<mlir::Value> big;
  std::vector<mlir::Value> small;
};

// Whether ldmatrix may read the operand: 16-bit elements, rows of the last two dimensions a
// multiple of 8 elements apart and the origin's element offset a multiple of 8 (shared buffers are
// 16-byte aligned), so each 8-element row it reads starts on 16 bytes.
bool LdmatrixAligned(const ir::BufferDecl& decl, const std::vector<ir::Expr>& origin,
                     const ir::RangeMap& ranges) {
  if (ir::BytesOf(decl.dtype) != 2 || decl.shape.back() % 8 != 0) return false;
  ir::Expr offset = ir::IntConst(0);
  int64_t stride = 1;
  for (size_t d = origin.size(); d-- > 0;) {
    offset = offset + origin[d] * ir::IntConst(stride);
    stride *= decl.shape[d];
  }
  if (KnownMultiple(offset) % 8 == 0) return true;
  const std::optional<int64_t> rem = ir::AsConstInt(ir::Simplify(offset % ir::IntConst(8), ranges));
  return rem && *rem == 0;
}

// Emits the update of one WarpMma once its buffers are resolved.
class WarpMmaWriter {
 public:
  // LLVM pointer (address space 3) to an element of a shared operand.
  using PointerFn =
      std::function<mlir::Value(const BufferBinding&, const std::vector<mlir::Value>&)>;

  WarpMmaWriter(mlir::OpBuilder& b, mlir::Location loc, const ir::WarpMmaNode& n, PointerFn ptr)
      : b_(b), loc_(loc), n_(n), pointer_(std::move(ptr)), kk_(ir::MmaK(n.kind)) {}

  // `lane`: the thread's lane as an index value.
  void Emit(mlir::Value acc, const Operand& a, const Operand& b, mlir::Value lane) {
    SetLane(lane);
    const int64_t frags = n_.m_frags * n_.n_frags;
    std::vector<std::array<mlir::Value, 4>> c(frags);
    for (int64_t f = 0; f < frags; ++f) {
      for (int64_t e = 0; e < 4; ++e) {
        c[f][e] = mlir::memref::LoadOp::create(b_, loc_, acc, AccIndices(f, e));
      }
    }
    const bool x3 = n_.kind == MmaKind::kTF32x3;
    // The fragments of k step ks + 1 are loaded before the mma's of step ks are issued (the
    // register double buffering of CUTLASS's warp-level mainloop): shared-memory latency hides
    // behind the tensor-core work instead of stalling the first mma of every step.
    auto load_a = [&](int64_t ks) {
      std::vector<Fragment> out;
      for (int64_t i = 0; i < n_.m_frags; ++i) out.push_back(LoadA(a, ks, i));
      return out;
    };
    std::vector<Fragment> next_a = load_a(0);
    std::vector<Fragment> next_b = LoadB(b, 0);
    for (int64_t ks = 0; ks < n_.k_steps; ++ks) {
      const std::vector<Fragment> af = std::move(next_a);
      const std::vector<Fragment> bf = std::move(next_b);
      if (ks + 1 < n_.k_steps) {
        next_a = load_a(ks + 1);
        next_b = LoadB(b, ks + 1);
      }
      for (int64_t i = 0; i < n_.m_frags; ++i) {
        for (int64_t j = 0; j < n_.n_frags; ++j) {
          std::array<mlir::Value, 4>& cij = c[i * n_.n_frags + j];
          if (x3) {
            // Small terms first, as WarpMmaNode defines it (CUTLASS's 3xTF32 order).
            cij = Mma(af[i].small, bf[j].big, cij);
            cij = Mma(af[i].big, bf[j].small, cij);
          }
          cij = Mma(af[i].big, bf[j].big, cij);
        }
      }
    }
    for (int64_t f = 0; f < frags; ++f) {
      for (int64_t e = 0; e < 4; ++e) {
        mlir::memref::StoreOp::create(b_, loc_, c[f][e], acc, AccIndices(f, e));
      }
    }
  }

 private:
  mlir::Value Index(int64_t v) { return arith::ConstantIndexOp::create(b_, loc_, v); }
  mlir::Value I32(int64_t v) {
    return arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(static_cast<int32_t>(v)));
  }
  mlir::Value Add(mlir::Value a, mlir::Value b) { return arith::AddIOp::create(b_, loc_, a, b); }
  mlir::Value Add(mlir::Value a, int64_t c) { return c == 0 ? a : Add(a, Index(c)); }
  mlir::Value Div(mlir::Value a, int64_t c) {
    return arith::DivUIOp::create(b_, loc_, a, Index(c));
  }
  mlir::Value Rem(mlir::Value a, int64_t c) {
    return arith::RemUIOp::create(b_, loc_, a, Index(c));
  }
  mlir::Value Mul(mlir::Value a, int64_t c) { return arith::MulIOp::create(b_, loc_, a, Index(c)); }

  void SetLane(mlir::Value lane) {
    g_ = Div(lane, 4);
    t_ = Rem(lane, 4);
    l8_ = Rem(lane, 8);
    l16_ = Rem(lane, 16);
    q2x8_ = Mul(Rem(Div(lane, 8), 2), 8);
    hx8_ = Mul(Div(lane, 16), 8);
    zero_ = Index(0);
  }

  std::vector<mlir::Value> AccIndices(int64_t frag, int64_t e) {
    return {Index(frag / n_.n_frags), Index(frag % n_.n_frags), Index(e)};
  }

  // Memref indices of operand element (outer, k): outer is m for A and n for B.
  std::vector<mlir::Value> ElementIndices(const Operand& o, mlir::Value outer, mlir::Value k) {
    std::vector<mlir::Value> idx = o.origin;
    const size_t nd = idx.size();
    idx[nd - 2] = Add(idx[nd - 2], o.k_inner ? outer : k);
    idx[nd - 1] = Add(idx[nd - 1], o.k_inner ? k : outer);
    return idx;
  }

  // One ldmatrix.m8n8.b16 of `num` matrices; this lane gives the address of element (outer, k).
  std::vector<mlir::Value> Ldmatrix(const Operand& o, mlir::Value outer, mlir::Value k, int num,
                                    bool trans) {
    mlir::MLIRContext* ctx = b_.getContext();
    mlir::Value ptr = pointer_(*o.binding, ElementIndices(o, outer, k));
    const std::vector<mlir::Type> fields(num, b_.getI32Type());
    auto type = mlir::LLVM::LLVMStructType::getLiteral(ctx, fields);
    mlir::Value regs = mlir::NVVM::LdMatrixOp::create(
        b_, loc_, type, ptr, static_cast<uint32_t>(num),
        trans ? mlir::NVVM::MMALayout::col : mlir::NVVM::MMALayout::row,
        mlir::NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8), mlir::NVVM::LdStMatrixEltType::B16);
    std::vector<mlir::Value> out;
    for (int q = 0; q < num; ++q) {
      out.push_back(mlir::LLVM::ExtractValueOp::create(b_, loc_, regs, q));
    }
    return out;
  }

  // Elements (outer, k) and (outer, k + 1) of a 16-bit operand as one register (k in the low half).
  mlir::Value Pair16(const Operand& o, mlir::Value outer, mlir::Value k) {
    auto half = [&](mlir::Value kk) -> mlir::Value {
      mlir::Value v =
          mlir::memref::LoadOp::create(b_, loc_, o.binding->memref, ElementIndices(o, outer, kk));
      mlir::Value bits = arith::BitcastOp::create(b_, loc_, b_.getI16Type(), v);
      return arith::ExtUIOp::create(b_, loc_, b_.getI32Type(), bits);
    };
    mlir::Value lo = half(k);
    mlir::Value hi = arith::ShLIOp::create(b_, loc_, half(Add(k, 1)), I32(16));
    return arith::OrIOp::create(b_, loc_, lo, hi);
  }

  // Element (outer, k) of a float32 operand as the kind's TF32 register(s) (ir::MmaOperandValue).
  void AddTf32(Fragment& f, const Operand& o, mlir::Value outer, mlir::Value k) {
    mlir::Value x =
        mlir::memref::LoadOp::create(b_, loc_, o.binding->memref, ElementIndices(o, outer, k));
    mlir::Value bits = arith::BitcastOp::create(b_, loc_, b_.getI32Type(), x);
    auto truncate = [&](mlir::Value v) {
      return arith::AndIOp::create(b_, loc_, v, I32(kTf32Mask));
    };
    if (n_.kind == MmaKind::kTF32) {
      // cvt.rna.tf32.f32 on finite values: round half away from zero in the magnitude bits.
      mlir::Value rounded = truncate(Add32(bits, 0x1000));
      mlir::Value exponent = arith::AndIOp::create(b_, loc_, bits, I32(kExponentMask));
      mlir::Value finite =
          arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::ne, exponent, I32(kExponentMask));
      f.big.push_back(arith::SelectOp::create(b_, loc_, finite, rounded, bits));
      return;
    }
    // tf32x3: big = x truncated; small = (x − big) truncated (the difference is exact).
    mlir::Value big = truncate(bits);
    mlir::Value big_f = arith::BitcastOp::create(b_, loc_, b_.getF32Type(), big);
    mlir::Value rest = arith::SubFOp::create(b_, loc_, x, big_f);
    f.big.push_back(big);
    f.small.push_back(truncate(arith::BitcastOp::create(b_, loc_, b_.getI32Type(), rest)));
  }
  mlir::Value Add32(mlir::Value a, int64_t c) { return arith::AddIOp::create(b_, loc_, a, I32(c)); }

  // A fragment (ks, i): rows 16 i.., k ks·K...
  Fragment LoadA(const Operand& a, int64_t ks, int64_t i) {
    const int64_t r0 = 16 * i;
    const int64_t k0 = ks * kk_;
    Fragment f;
    if (a.ldmatrix) {
      // Lane l reads row (l % 8) of matrix p = l / 8 at (m, k) = (8 (p % 2), 8 (p / 2)).
      mlir::Value outer = a.k_inner ? Add(l8_, q2x8_) : q2x8_;
      mlir::Value k = a.k_inner ? hx8_ : Add(l8_, hx8_);
      f.big = Ldmatrix(a, Add(outer, r0), Add(k, k0), 4, /*trans=*/!a.k_inner);
      return f;
    }
    for (int64_t q = 0; q < 4; ++q) {
      mlir::Value row = Add(g_, r0 + 8 * (q % 2));
      if (n_.kind == MmaKind::kF16 || n_.kind == MmaKind::kBF16) {
        f.big.push_back(Pair16(a, row, Add(Mul(t_, 2), k0 + 8 * (q / 2))));
      } else {
        AddTf32(f, a, row, Add(t_, k0 + 4 * (q / 2)));
      }
    }
    return f;
  }

  // The B fragments of k step ks, one per j.
  std::vector<Fragment> LoadB(const Operand& b, int64_t ks) {
    const int64_t k0 = ks * kk_;
    std::vector<Fragment> out(n_.n_frags);
    if (b.ldmatrix) {
      for (int64_t j = 0; j < n_.n_frags;) {
        // .x4 for fragments j and j + 1 (matrices at (k, n) = (8 (p % 2), 8 (p / 2))), .x2 for a
        // last one; lane l reads row l % 8 of matrix p = l / 8.
        const int num = j + 1 < n_.n_frags ? 4 : 2;
        mlir::Value outer =
            b.k_inner ? (num == 4 ? Add(l8_, hx8_) : l8_) : (num == 4 ? hx8_ : zero_);
        mlir::Value k = b.k_inner ? q2x8_ : l16_;
        std::vector<mlir::Value> regs =
            Ldmatrix(b, Add(outer, 8 * j), Add(k, k0), num, /*trans=*/!b.k_inner);
        for (int p = 0; p < num; ++p) out[j + p / 2].big.push_back(regs[p]);
        j += num / 2;
      }
      return out;
    }
    for (int64_t j = 0; j < n_.n_frags; ++j) {
      mlir::Value col = Add(g_, 8 * j);
      for (int64_t q = 0; q < 2; ++q) {
        if (n_.kind == MmaKind::kF16 || n_.kind == MmaKind::kBF16) {
          out[j].big.push_back(Pair16(b, col, Add(Mul(t_, 2), k0 + 8 * q)));
        } else {
          AddTf32(out[j], b, col, Add(t_, k0 + 4 * q));
        }
      }
    }
    return out;
  }

  // One mma.sync.aligned.m16n8kK.row.col.f32.<t>.<t>.f32: c + a·b.
  std::array<mlir::Value, 4> Mma(const std::vector<mlir::Value>& a,
                                 const std::vector<mlir::Value>& b,
                                 const std::array<mlir::Value, 4>& c) {
    mlir::MLIRContext* ctx = b_.getContext();
    const mlir::Type f32 = b_.getF32Type();
    auto result = mlir::LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
    std::vector<mlir::Value> av = a;
    std::vector<mlir::Value> bv = b;
    mlir::NVVM::MMATypes type = mlir::NVVM::MMATypes::tf32;
    if (n_.kind == MmaKind::kF16) {
      // f16 multiplicands are f16x2 vectors; bf16 and tf32 ones are i32.
      type = mlir::NVVM::MMATypes::f16;
      const auto pair = mlir::VectorType::get({2}, b_.getF16Type());
      for (auto* regs : {&av, &bv}) {
        for (mlir::Value& v : *regs) v = mlir::LLVM::BitcastOp::create(b_, loc_, pair, v);
      }
    } else if (n_.kind == MmaKind::kBF16) {
      type = mlir::NVVM::MMATypes::bf16;
    }
    auto mma = mlir::NVVM::MmaOp::create(
        b_, loc_, result, av, bv, llvm::ArrayRef<mlir::Value>(c), {16, 8, kk_}, std::nullopt,
        std::nullopt, std::array<mlir::NVVM::MMATypes, 2>{type, type},
        std::array<mlir::NVVM::MMALayout, 2>{mlir::NVVM::MMALayout::row,
                                             mlir::NVVM::MMALayout::col});
    std::array<mlir::Value, 4> d;
    for (int64_t e = 0; e < 4; ++e) {
      d[e] = mlir::LLVM::ExtractValueOp::create(b_, loc_, mma.getResult(), e);
    }
    return d;
  }

  mlir::OpBuilder& b_;
  mlir::Location loc_;
  const ir::WarpMmaNode& n_;
  PointerFn pointer_;
  const int64_t kk_;
  // Lane decomposition (index values): g, t, l % 8, l % 16, 8 ((l / 8) % 2), 8 (l / 16), 0.
  mlir::Value g_, t_, l8_, l16_, q2x8_, hx8_, zero_;
};

}  // namespace

absl::Status Emitter::EmitWarpMma(const ir::WarpMmaNode* op) {
  const std::string what = absl::StrCat("warp mma on '", op->acc, "'");
  if (config_.target != EmitTarget::kGpu) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": warp mma is GPU-only (mma.sync); the host target cannot run it"));
  }
  if (lane_.active) return absl::InvalidArgumentError(what + " inside a vectorized loop");
  ASSIGN_OR_RETURN(const BufferBinding* acc,
                   MmaAccumulator(what, op->acc, {op->m_frags, op->n_frags, 4}));
  auto operand = [&](const char* role, const std::string& name, const std::vector<ir::Expr>& origin,
                     bool k_inner, int64_t outer_extent) -> absl::StatusOr<Operand> {
    const std::string which = absl::StrCat(what, ": operand ", role, " '", name, "'");
    ASSIGN_OR_RETURN(const BufferBinding* bb, SharedMmaOperand(what, role, name, op->kind));
    const ir::BufferDecl& d = bb->decl;
    const size_t nd = d.shape.size();
    const int64_t depth = op->k_steps * ir::MmaK(op->kind);
    if (nd < 2 || d.shape[k_inner ? nd - 2 : nd - 1] < outer_extent ||
        d.shape[k_inner ? nd - 1 : nd - 2] < depth) {
      return absl::InvalidArgumentError(absl::StrCat(which, " cannot hold its ", outer_extent, "x",
                                                     depth, " tile in its last two dimensions"));
    }
    Operand o;
    const BufferBinding* bound = nullptr;
    ASSIGN_OR_RETURN(o.origin, EmitIndices(name, origin, &bound, "warp mma operand"));
    o.binding = bb;
    o.k_inner = k_inner;
    o.ldmatrix = LdmatrixAligned(d, origin, ranges_);
    return o;
  };
  ASSIGN_OR_RETURN(Operand a, operand("A", op->a, op->a_origin, op->a_k_inner, 16 * op->m_frags));
  ASSIGN_OR_RETURN(Operand b, operand("B", op->b, op->b_origin, op->b_k_inner, 8 * op->n_frags));
  ASSIGN_OR_RETURN(mlir::Value lane64, EmitExpr(op->lane));
  b_.getContext()->getOrLoadDialect<mlir::NVVM::NVVMDialect>();
  b_.getContext()->getOrLoadDialect<mlir::LLVM::LLVMDialect>();
  mlir::Value lane = arith::IndexCastOp::create(b_, loc_, b_.getIndexType(), lane64);
  WarpMmaWriter writer(b_, loc_, *op,
                       [this](const BufferBinding& bb, const std::vector<mlir::Value>& idx) {
                         return ElementPointer(bb, idx, /*address_space=*/3);
                       });
  writer.Emit(acc->memref, a, b, lane);
  return absl::OkStatus();
}

absl::StatusOr<const BufferBinding*> Emitter::MmaAccumulator(const std::string& what,
                                                             const std::string& name,
                                                             const std::vector<int64_t>& shape) {
  const BufferBinding* acc = FindBuffer(name);
  if (acc == nullptr || acc->decl.scope != ir::MemoryScope::kLocal ||
      acc->decl.dtype != ir::ScalarType::kFloat32 || acc->decl.shape != shape) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the accumulator '", name, "' must be a local float32[",
                     absl::StrJoin(shape, ", "), "] buffer in scope"));
  }
  return acc;
}

absl::StatusOr<const BufferBinding*> Emitter::SharedMmaOperand(const std::string& what,
                                                               const char* role,
                                                               const std::string& name,
                                                               ir::MmaKind kind) {
  const std::string which = absl::StrCat(what, ": operand ", role, " '", name, "'");
  const BufferBinding* bb = FindBuffer(name);
  if (bb == nullptr) return absl::InvalidArgumentError(which + " is not a buffer in scope");
  const ir::BufferDecl& d = bb->decl;
  if (d.scope != ir::MemoryScope::kShared) {
    return absl::InvalidArgumentError(absl::StrCat(which, " is in ", ir::MemoryScopeName(d.scope),
                                                   " memory; mma operands are shared buffers"));
  }
  const ir::ScalarType dtype = ir::MmaOperandType(kind);
  if (d.dtype != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(which, " is ", ir::TypeName(d.dtype),
                                                   " but mma kind ", ir::MmaKindName(kind),
                                                   " reads ", ir::TypeName(dtype)));
  }
  return bb;
}

}  // namespace tilesearch::codegen::internal
