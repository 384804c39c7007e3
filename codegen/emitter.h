// Internal to codegen: translation of loop-nest statements and expressions into MLIR ops (scf,
// arith, math, memref, vector, gpu) at a builder's insertion point. The GPU and host structure
// builders (gpu_compile.cc, host_jit.cc) create the functions, bind the kernel arguments and hand
// each kernel statement to an Emitter.
//
// Warp exchanges: a shared buffer whose name ends in ".shfl" (made by the cross-thread reduction
// lowering, schedule/thread_allreduce.cc) is read and written only in exchange windows, four
// statements of one Seq:
//   for t in threadIdx.x [0, T): X[g.., t] = A[c..];   barrier;
//   for u in threadIdx.x [0, T): S = f(.., X[g.., u ^ m], ..);   barrier (optional)
// with A a local buffer, m < 32 a power of two (u ^ m in any arithmetic form; it is checked for
// every u) and T a multiple of 32. The window's barriers order only the exchange. On the GPU, when
// T is blockDim.x and every access of X is in such windows, the window becomes
// `S = f(.., shfl.sync.bfly(A[c..], m), ..)` with no memory and no barrier (lane u of a warp reads
// the value lane u ^ m holds); otherwise it is emitted as written (the same result, slower).
//
// Async copies (GPU only; the host reports kInvalidArgument): a Store with async_copy becomes one
// cp.async.shared.global per vector (or scalar) of 4, 8 or 16 bytes whose shared and global
// addresses are aligned to its size (16 bytes: .cg, else .ca), and the plain store otherwise;
// AsyncGroup statements become cp.async.commit_group / cp.async.wait_group N.
//
// Warp MMA (GPU only; the host reports kInvalidArgument): a WarpMma statement (ir/stmt.h) becomes,
// per k step, one ldmatrix per A fragment and per pair of B fragments (16-bit operands whose rows
// are 16-byte aligned) or scalar shared loads, then m_frags·n_frags
// mma.sync.aligned.m16n8kK.row.col.f32 instructions (three per fragment pair for tf32x3) on the
// accumulator values, which are loaded from and stored back to the thread's local buffer once per
// statement (warp_mma_emit.cc).
//
// Value representation: int64 → i64, int32 → i32, bool → i1, every float type → f32 (float16 and
// bfloat16 are storage types: loads widen, stores and casts round). Buffers are memrefs of their
// shape with storage element types f32 / f16 / bf16 / i32 / i64 / i8 (bool).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/simplify.h"
#include "ir/stmt.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace tilesearch::codegen::internal {

enum class EmitTarget : uint8_t { kGpu, kHost };

struct EmitConfig {
  EmitTarget target = EmitTarget::kGpu;
  bool vectorize = true;
  int64_t max_unroll = 1024;
  /// Budget of an unrolled loop nest in loop-nest nodes (UnrolledNodes): an unrolled loop whose
  /// full unrolling would exceed it is emitted as a plain loop instead (LLVM may unroll it), and
  /// the unrolled loops inside it are judged on their own. 0: no budget.
  int64_t unroll_budget = 0;
  /// Float add / sub / mul may be contracted into fma by LLVM.
  bool contract = false;
  std::array<int64_t, 3> grid = {1, 1, 1};  // GPU: the kernel's launch
  std::array<int64_t, 3> block = {1, 1, 1};
};

/// A buffer visible to the statements being emitted.
struct BufferBinding {
  ir::BufferDecl decl;
  mlir::Value memref;
};

/// A loop variable visible to the statements being emitted (an i64 value).
struct VarBinding {
  std::string name;
  mlir::Value value;
};

/// Element type a buffer of `t` stores (f32, f16, bf16, i32, i64, i8).
mlir::Type StorageType(mlir::MLIRContext* ctx, ir::ScalarType t);
/// Type an expression of `t` is computed in (f32 for floats, i32, i64, i1).
mlir::Type ValueType(mlir::MLIRContext* ctx, ir::ScalarType t);

class Emitter {
 public:
  /// Creates the parallel-loop outlining for the host (implemented in host_jit.cc): emits `op`
  /// as a call into the runtime's thread pool, given the emitter's scope.
  using ParallelHook = std::function<absl::Status(Emitter& emitter, const ir::ForNode* op)>;
  /// Returns the memref for a shared Allocate on the GPU (a workgroup buffer of the kernel).
  using SharedHook = std::function<absl::StatusOr<mlir::Value>(const ir::BufferDecl& decl)>;

  /// `alloca_block`: where local buffers are allocated (the function's entry block).
  Emitter(mlir::OpBuilder& builder, mlir::Location loc, const EmitConfig& config,
          mlir::Block* alloca_block);

  void set_parallel_hook(ParallelHook hook) { parallel_hook_ = std::move(hook); }
  void set_shared_hook(SharedHook hook) { shared_hook_ = std::move(hook); }
  /// Inside an outlined parallel body: nested parallel loops run serially.
  void set_in_parallel(bool v) { in_parallel_ = v; }

  void BindBuffer(const ir::BufferDecl& decl, mlir::Value memref);
  /// Scoped bindings: Unbind* removes the latest binding (and restores a shadowed range).
  void BindVar(const std::string& name, mlir::Value value, std::optional<ir::Interval> range);
  void UnbindVar();
  void UnbindBuffer() { bufs_.pop_back(); }
  const std::vector<BufferBinding>& buffers() const { return bufs_; }
  const std::vector<VarBinding>& vars() const { return vars_; }
  const ir::RangeMap& ranges() const { return ranges_; }
  const EmitConfig& config() const { return config_; }
  mlir::OpBuilder& builder() { return b_; }
  mlir::Block* alloca_block() const { return alloca_block_; }
  mlir::Location loc() const { return loc_; }

  /// Emits `s` at the builder's insertion point.
  absl::Status EmitStmt(const ir::Stmt& s);
  /// Emits `e` and returns its value (a vector inside a vectorized loop when it varies).
  absl::StatusOr<mlir::Value> EmitExpr(const ir::Expr& e);

  /// Host heap buffers allocated by this emitter (freed by the structure builder at the end).
  const std::vector<mlir::Value>& heap_buffers() const { return heap_; }

  /// Emits the loop body for variable value `iv` (used by the host outlining as well).
  absl::Status EmitLoopBody(const ir::ForNode* op, mlir::Value iv);
  /// i64 constant.
  mlir::Value I64(int64_t v);

 private:
  struct VectorLane {
    bool active = false;
    std::string var;
    int64_t width = 0;
    mlir::Value min;  // i64 scalar: the variable's value in lane 0
    ir::Expr min_expr;
  };

  absl::Status EmitFor(const ir::ForNode* op);
  absl::Status EmitSerialFor(const ir::ForNode* op, mlir::Value min, mlir::Value extent,
                             mlir::Attribute loop_annotation);
  absl::Status EmitUnrolled(const ir::ForNode* op, int64_t min, int64_t extent);
  /// Whether unrolled loop `op` may be unrolled here under EmitConfig::unroll_budget.
  bool WithinUnrollBudget(const ir::ForNode* op);
  absl::Status EmitBoundFor(const ir::ForNode* op);
  absl::Status EmitVectorized(const ir::ForNode* op, int64_t extent);
  absl::Status EmitAllocate(const ir::AllocateNode* op);
  absl::Status EmitStore(const ir::StoreNode* op);
  /// An async_copy Store as one cp.async.shared.global (4 / 8 bytes: .ca; 16: .cg) when it copies
  /// a global Load of the same dtype into a shared buffer, contiguously in a vector lane and
  /// aligned to the copy's size; false (nothing emitted) otherwise.
  absl::StatusOr<bool> EmitAsyncCopy(const ir::StoreNode* op);
  /// LLVM pointer in `address_space` (3: a shared memref; 1: a global one, whose memref holds
  /// generic addresses) to the element at `idx` of `bb`.
  mlir::Value ElementPointer(const BufferBinding& bb, const std::vector<mlir::Value>& idx,
                             unsigned address_space);
  /// A WarpMma statement (warp_mma_emit.cc). Errors (kInvalidArgument): the host target, an
  /// accumulator that is not a local float32 [m_frags, n_frags, 4] buffer, an operand that is not a
  /// shared buffer of MmaOperandType(kind) with at least two dimensions holding the tile.
  absl::Status EmitWarpMma(const ir::WarpMmaNode* op);
  /// The local float32 accumulator `name` of an mma statement, shaped `shape` (kInvalidArgument
  /// naming `what` otherwise).
  absl::StatusOr<const BufferBinding*> MmaAccumulator(const std::string& what,
                                                      const std::string& name,
                                                      const std::vector<int64_t>& shape);
  /// Operand `role` ("A" / "B") `name` of an mma statement: a shared buffer of
  /// MmaOperandType(kind) (kInvalidArgument naming `what` otherwise).
  absl::StatusOr<const BufferBinding*> SharedMmaOperand(const std::string& what, const char* role,
                                                        const std::string& name, ir::MmaKind kind);
  /// A Wgmma statement (wgmma_emit.cc). Errors (kInvalidArgument): the host target, an
  /// accumulator that is not a local float32 [m_tiles, n / 8, 4] buffer, an operand that is not a
  /// shared buffer of MmaOperandType(kind).
  absl::Status EmitWgmma(const ir::WgmmaNode* op);
  /// TmaLoad and Mbarrier statements (tma_emit.cc). Errors (kInvalidArgument): the host target, a
  /// vectorized loop around them, buffers that are not what the nodes require (a tensor map
  /// buffer, shared destinations, an int64 barrier buffer), a coordinate count off the map's rank.
  absl::Status EmitTmaLoad(const ir::TmaLoadNode* op);
  absl::Status EmitMbarrier(const ir::MbarrierNode* op);
  /// SetMaxNReg (tma_emit.cc): setmaxnreg.{inc,dec}.sync.aligned.u32. Errors (kInvalidArgument):
  /// the host target, a vectorized loop around it.
  absl::Status EmitSetMaxNReg(const ir::SetMaxNRegNode* op);
  /// The 32-bit shared-window byte address (i32) of element `element` of the flat view of shared
  /// buffer `name` (kInvalidArgument naming `what` when it is not a shared buffer in scope).
  absl::StatusOr<mlir::Value> SharedAddress32(const std::string& what, const std::string& name,
                                              const ir::Expr& element);
  absl::Status EmitIf(const ir::IfThenElseNode* op);
  absl::Status EmitSeq(const ir::SeqNode* op);
  /// Emits the exchange window at stmts[i] as a warp shuffle and returns how many statements it
  /// covered, or 0 when there is none there (or it cannot be a shuffle).
  absl::StatusOr<size_t> EmitShuffleWindow(const std::vector<ir::Stmt>& stmts, size_t i);
  /// shfl.sync.bfly of a scalar value of any value type (i1, i32, i64, f32) with lane offset `m`.
  mlir::Value ShuffleXor(mlir::Value v, int64_t m);

  absl::StatusOr<mlir::Value> EmitBinary(const ir::Expr& e);
  absl::StatusOr<mlir::Value> EmitIntDivMod(ir::ExprKind kind, const ir::Expr& a_expr,
                                            const ir::Expr& b_expr, mlir::Value a, mlir::Value b);
  absl::StatusOr<mlir::Value> EmitSelect(const ir::SelectNode* op);
  absl::StatusOr<mlir::Value> EmitCast(ir::ScalarType to, const ir::Expr& value);
  absl::StatusOr<mlir::Value> EmitCall(const ir::CallNode* op);
  absl::StatusOr<mlir::Value> EmitLoad(const ir::LoadNode* op);
  /// Whether `op` (not eager by EagerSelect) may evaluate both branches with each load clamped
  /// into its buffer: the branches call no function, hold no select and divide integers by
  /// constants only, and every load they perform is of a global buffer without an empty
  /// dimension, at scalar indices that load nothing.
  bool ClampsBranchLoads(const ir::SelectNode* op) const;
  /// Clamps each of `idx` (the emitted `indices` of a global buffer) into [0, extent - 1] of its
  /// dimension, where the known ranges do not already keep it there.
  void ClampIndices(const BufferBinding& bb, const std::vector<ir::Expr>& indices,
                    std::vector<mlir::Value>& idx);
  /// Converts `v` of value type `from` into value type `to` (ir Cast semantics).
  mlir::Value Convert(mlir::Value v, ir::ScalarType from, ir::ScalarType to);
  mlir::Value ToStorage(mlir::Value v, ir::ScalarType value_type, ir::ScalarType storage);
  mlir::Value FromStorage(mlir::Value v, ir::ScalarType storage, ir::ScalarType value_type);

  const BufferBinding* FindBuffer(const std::string& name) const;
  absl::StatusOr<std::vector<mlir::Value>> EmitIndices(const std::string& buffer,
                                                       const std::vector<ir::Expr>& indices,
                                                       const BufferBinding** binding,
                                                       const char* what);
  /// Constant of `type` (scalar or vector splat).
  mlir::Value Const(mlir::Type type, double value);
  /// Broadcasts scalar `v` to the vector width when `like` is a vector.
  mlir::Value Splat(mlir::Value v, mlir::Value like);
  mlir::Value SplatTo(mlir::Value v, int64_t width);
  /// Whether `e` depends on the vectorized loop variable (false outside vector mode).
  bool Varying(const ir::Expr& e) const;
  /// Power-of-two alignment in bytes of the vector access at lane 0, from the flattened offset.
  int64_t VectorAlignment(const ir::BufferDecl& decl, const std::vector<ir::Expr>& indices,
                          int64_t width) const;
  mlir::Type MaybeVector(mlir::Type elem, bool vector) const;
  mlir::arith::FastMathFlags Fastmath() const;
  /// Whether `v` (scalar or vector) is f32 on the GPU target, where exp and division use the
  /// fast hardware approximations (Exp, FloatDiv); the host keeps the accurate lowering.
  bool FastGpuF32(mlir::Value v) const;
  /// exp(x): CUDA's __expf (ex2.approx.ftz of x * log2 e) for GPU f32, math.exp otherwise.
  mlir::Value Exp(mlir::Value x);
  /// ir::Tf32RoundValue (`round`) or ir::Tf32TruncateValue of f32 `x` (scalar or vector), in
  /// integer operations on the bits.
  mlir::Value Tf32Value(mlir::Value x, bool round);
  /// 1 / v with arcp + afn (NVPTX rcp.approx.f32); only for GPU f32.
  mlir::Value Reciprocal(mlir::Value v);
  /// a / b (broadcast to a common shape): a * Reciprocal(b) for GPU f32, arith.divf otherwise.
  mlir::Value FloatDiv(mlir::Value a, mlir::Value b);

  mlir::OpBuilder& b_;
  mlir::Location loc_;
  EmitConfig config_;
  mlir::Block* alloca_block_;
  ParallelHook parallel_hook_;
  SharedHook shared_hook_;
  bool in_parallel_ = false;
  /// Inside an unrolled loop that fit the unroll budget (the loops it holds fit as well).
  bool unrolling_within_budget_ = false;
  std::vector<BufferBinding> bufs_;
  std::vector<VarBinding> vars_;
  ir::RangeMap ranges_;
  std::vector<std::optional<ir::Interval>> shadowed_ranges_;  // per BindVar, the range it hid
  VectorLane lane_;
  std::vector<mlir::Value> heap_;
  /// Allocated ".shfl" buffers whose every access is in an exchange window.
  std::set<std::string> shuffle_buffers_;
  /// Inside a window's read loop: the buffer read as a shuffle, the value each lane offers (an
  /// expression of the thread's own registers) and the lane offset.
  struct ShuffleRead {
    std::string buffer;
    ir::Expr value;
    int64_t offset = 0;
  };
  std::optional<ShuffleRead> shuffle_read_;
  /// Inside the branches of a select that ClampsBranchLoads: global loads clamp their indices.
  int clamp_loads_ = 0;
};

/// Loop-nest nodes (statements and expression nodes) `s` expands to when its unrolled loops are
/// unrolled: each unrolled loop with a constant extent counts its body extent times, every other
/// loop its body once; an mma statement counts 1. About proportional to the MLIR operations the
/// emitter builds for `s` (an integer division expands to a few of them). Saturates at 2^40.
int64_t UnrolledNodes(const ir::Stmt& s);

/// The largest g known to divide `e` for every value of its variables (0: e is always 0).
int64_t KnownMultiple(const ir::Expr& e);

/// The shape of a buffer in scope by name (nullptr if unknown).
using ShapeOf = std::function<const std::vector<int64_t>*(const std::string&)>;

/// Why a vectorized loop cannot become vector code ("" when it can): its body must be stores whose
/// last index is contiguous in the loop variable (other indices uniform), whose loads are uniform
/// or contiguous likewise, with no buffer both stored and loaded at different indices and no lazy
/// Select that depends on the variable around a load. `ranges`: known ranges of enclosing loops;
/// `shape_of`: buffer shapes (for ContiguousIndex).
std::string VectorizeBlocker(const ir::ForNode* op, int64_t extent, const ir::RangeMap& ranges,
                             const ShapeOf& shape_of = nullptr);

/// The index of an access that moves contiguously in memory: the last, or the last before
/// trailing dimensions of extent 1 indexed by the constant 0 (weights [K, C, 1, 1] read at
/// [k, c, 0, 0] are contiguous along c). `shape`: the buffer's shape, nullptr if unknown.
size_t ContiguousIndex(const std::vector<int64_t>* shape, const std::vector<ir::Expr>& indices);

}  // namespace tilesearch::codegen::internal
