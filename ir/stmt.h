// Loop-nest IR: the program a schedule lowers to and codegen translates.
//
// Statements are immutable and shared like expressions (ir/expr.h states the expression semantics).
// A LoopNest is one kernel: its parameters (global buffers, in kernel-argument order: inputs, then
// outputs) and a body. Buffers are multi-dimensional and row-major; a Load or Store names a
// parameter or an enclosing Allocate and gives one int64 index per dimension.
//
// Loop kinds: serial, parallel (CPU threads), vectorized, unrolled and vthread loops all mean "run
// the body for var = min .. min+extent-1". A blockIdx.* loop enumerates thread blocks. A
// threadIdx.* loop does not iterate inside one thread: the block runs blockDim threads (blockDim.d
// = the largest extent of any threadIdx.d loop in the kernel) and in each thread the loop variable
// is that thread's index, the body being skipped where index >= extent. Several threadIdx loops of
// one dimension (say the compute and a cooperative shared-memory fill) therefore share the hardware
// index. Threads of a block proceed region by region between Barriers; shared buffers are one per
// block, local buffers one per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/expr.h"
#include "ir/type.h"

namespace tilesearch::ir {

#define TS_STMT_NODE_KINDS(X) \
  X(For)                      \
  X(Seq)                      \
  X(Store)                    \
  X(Allocate)                 \
  X(IfThenElse)               \
  X(Barrier)                  \
  X(Evaluate)                 \
  X(AsyncGroup)               \
  X(WarpMma)                  \
  X(Wgmma)                    \
  X(TmaLoad)                  \
  X(Mbarrier)                 \
  X(SetMaxNReg)

enum class StmtKind : uint8_t {
#define TS_DECLARE_KIND(name) k##name,
  TS_STMT_NODE_KINDS(TS_DECLARE_KIND)
#undef TS_DECLARE_KIND
};

enum class ForKind : uint8_t {
  kSerial,
  kParallel,
  kVectorized,
  kUnrolled,
  kVThread,
  kBlockIdxX,
  kBlockIdxY,
  kBlockIdxZ,
  kThreadIdxX,
  kThreadIdxY,
  kThreadIdxZ,
};
/// "serial", "parallel", "vectorize", "unroll", "vthread", "blockIdx.x", ..., "threadIdx.z".
const char* ForKindName(ForKind kind);
inline bool IsBlockBound(ForKind k) { return k >= ForKind::kBlockIdxX && k <= ForKind::kBlockIdxZ; }
inline bool IsThreadBound(ForKind k) {
  return k >= ForKind::kThreadIdxX && k <= ForKind::kThreadIdxZ;
}

enum class MemoryScope : uint8_t { kGlobal, kShared, kLocal };
/// "global", "shared", "local".
const char* MemoryScopeName(MemoryScope scope);

/// A TMA tensor map (PTX's .tensormap, CUDA's CUtensorMap: 128 bytes) over a parameter buffer
/// `source` of the nest (GPU, sm_90): the runtime encodes it at launch, once the buffer's address
/// is known (cuTensorMapEncodeTiled), and the kernel receives it as a pointer to the 128 bytes in
/// global memory. The source is viewed as a dense row-major tensor of `dims` (outermost first,
/// rank 1..5, their product the source's element count) and copied in boxes of `box` elements per
/// dimension (TmaLoadNode); box elements outside the tensor read as zero. In shared memory a box is
/// row-major (the innermost dimension contiguous) with the `swizzle`-byte pattern of
/// ir::WgmmaSwizzle applied to the byte offset from a destination aligned to 8 × swizzle bytes
/// (0: no swizzle, 16-byte alignment). CheckTensorMap states the limits.
struct TensorMapSpec {
  std::string source;
  std::vector<int64_t> dims;
  std::vector<int64_t> box;
  int64_t swizzle = 128;  // bytes: 0, 32, 64 or 128
  int64_t BoxElements() const;
  bool operator==(const TensorMapSpec&) const = default;
};

/// A buffer: name, element type, row-major shape (extents ≥ 1) and where it lives.
struct BufferDecl {
  std::string name;
  ScalarType dtype = ScalarType::kFloat32;
  std::vector<int64_t> shape;
  MemoryScope scope = MemoryScope::kGlobal;
  /// Set on a global Allocate of 128 bytes (int64 [16]) that holds a TMA tensor map: the kernel
  /// argument the runtime fills by encoding the map (codegen::KernelArg::Kind::kTensorMap).
  std::optional<TensorMapSpec> tensor_map = std::nullopt;
  int64_t NumElements() const;
  int64_t Bytes() const { return NumElements() * BytesOf(dtype); }
};

/// The buffer shape a tensor map is held in: int64 [16] (128 bytes).
inline constexpr int64_t kTensorMapWords = 16;

/// Whether `map` over `source` (its element type and count) is one the hardware encodes: rank
/// 1..5, dims ≥ 1 and under 2^31 (signed 32-bit box coordinates) with the given product, box
/// extents 1..256, the box's innermost bytes a multiple of 16 and at most `swizzle` when swizzled,
/// every outer dimension's stride a multiple of 16 bytes under 2^40, swizzle 0 / 32 / 64 / 128
/// (CUDA driver API, cuTensorMapEncodeTiled). Errors: kInvalidArgument naming the map's source and
/// the bad field.
absl::Status CheckTensorMap(const TensorMapSpec& map, const BufferDecl& source);

struct StmtNode {
  explicit StmtNode(StmtKind k) : kind(k) {}
  virtual ~StmtNode() = default;
  const StmtKind kind;
};

/// Handle to an immutable statement node; may be undefined (an empty else branch).
class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> node) : node_(std::move(node)) {}
  bool defined() const { return node_ != nullptr; }
  const StmtNode* get() const { return node_.get(); }
  StmtKind kind() const { return node_->kind; }
  bool same_as(const Stmt& other) const { return node_ == other.node_; }
  template <typename T>
  const T* as() const {
    if (node_ && node_->kind == T::kKind) return static_cast<const T*>(node_.get());
    return nullptr;
  }

 private:
  std::shared_ptr<const StmtNode> node_;
};

struct ForNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kFor;
  ForNode(Expr v, Expr m, Expr e, ForKind k, Stmt b)
      : StmtNode(kKind),
        var(std::move(v)),
        min(std::move(m)),
        extent(std::move(e)),
        for_kind(k),
        body(std::move(b)) {}
  /// `var` is an int64 Var; `min` and `extent` int64 expressions not using `var`.
  static Stmt Make(Expr var, Expr min, Expr extent, ForKind kind, Stmt body);
  const Expr var;
  const Expr min;
  const Expr extent;
  const ForKind for_kind;
  const Stmt body;
  const std::string& var_name() const;
};

struct SeqNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kSeq;
  explicit SeqNode(std::vector<Stmt> s) : StmtNode(kKind), stmts(std::move(s)) {}
  /// Flattens nested Seqs and drops undefined statements; one statement is returned as is.
  static Stmt Make(std::vector<Stmt> stmts);
  const std::vector<Stmt> stmts;
};

struct StoreNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kStore;
  StoreNode(std::string b, std::vector<Expr> i, Expr v, bool async = false)
      : StmtNode(kKind),
        buffer(std::move(b)),
        indices(std::move(i)),
        value(std::move(v)),
        async_copy(async) {}
  /// Indices are int64; the value is rounded to the buffer's dtype when stored.
  /// With `async_copy` (GPU only, made by schedule/software_pipeline.h for cp.async pipelines):
  /// the store to a shared buffer of a Load of a global buffer of the same dtype is an
  /// asynchronous copy (PTX cp.async): the element lands by the time an AsyncGroup wait covering
  /// the thread's commit of it returns; until then the destination must not be read. The value
  /// may also be Select(cond, Load, 0.0): a zero-filling copy (cp.async with src-size 0 where
  /// cond is false, the Load then never read), for gathers with padding and edge guards. Passes
  /// treat it as the plain store; the interpreter reads the source when the copy is issued and
  /// writes the destination only at that wait (the latest moment allowed).
  static Stmt Make(std::string buffer, std::vector<Expr> indices, Expr value,
                   bool async_copy = false);
  const std::string buffer;
  const std::vector<Expr> indices;
  const Expr value;
  const bool async_copy = false;
};

/// The Load an async-copy Store of `value` reads: `value` itself when it is a Load, the true
/// branch of Select(cond, Load, 0.0) (a zero-filling copy); nullptr for any other value.
const LoadNode* AsyncCopySource(const Expr& value);

struct AllocateNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kAllocate;
  AllocateNode(BufferDecl b, Stmt s) : StmtNode(kKind), buffer(std::move(b)), body(std::move(s)) {}
  /// The buffer exists (uninitialized) for the duration of `body`.
  static Stmt Make(BufferDecl buffer, Stmt body);
  const BufferDecl buffer;
  const Stmt body;
};

struct IfThenElseNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kIfThenElse;
  IfThenElseNode(Expr c, Stmt t, Stmt e)
      : StmtNode(kKind), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
  /// `cond` is bool; `else_case` may be undefined.
  static Stmt Make(Expr cond, Stmt then_case, Stmt else_case = Stmt());
  const Expr cond;
  const Stmt then_case;
  const Stmt else_case;
};

/// Block-wide barrier (__syncthreads): every thread of the block reaches it before any passes.
/// `cluster` > 1 (sm_90): every thread of the cluster of `cluster` blocks along blockIdx.x
/// (PTX barrier.cluster.arrive.release / wait.acquire), so that a block's shared memory may be
/// written by the others' multicast TMA copies (TmaLoadNode::multicast) only once all are done
/// with it; the kernel launches in such clusters. The interpreter, which runs each block on its
/// own, treats it as the block barrier.
struct BarrierNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kBarrier;
  BarrierNode() : StmtNode(kKind) {}
  /// CHECKs cluster in 1..8.
  static Stmt Make(int64_t cluster = 1);
  int64_t cluster = 1;
};

struct EvaluateNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kEvaluate;
  explicit EvaluateNode(Expr v) : StmtNode(kKind), value(std::move(v)) {}
  static Stmt Make(Expr value);
  const Expr value;
};

/// Asynchronous-copy bookkeeping of the executing thread (GPU only; made with async_copy Stores
/// by schedule/software_pipeline.h). `wait < 0` (Commit): the thread's async copies issued since
/// its last commit form one group (PTX cp.async.commit_group). `wait >= 0` (Wait): the thread
/// blocks until at most `wait` of its committed groups are incomplete (cp.async.wait_group);
/// other threads see the copied data only after a Barrier that follows. The interpreter performs
/// a group's copies when a wait completes it, so a wait that is missing or lets too many groups
/// pend shows up as a wrong answer; copies never waited for are dropped (shared data dies with
/// its block).
/// With `wgmma` (WgmmaWait) the node waits for the thread's warpgroup MMA groups instead
/// (wgmma.wait_group): until at most `wait` of the groups its Wgmma statements committed are in
/// flight; the interpreter performs the older groups' updates there (WgmmaNode).
struct AsyncGroupNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kAsyncGroup;
  AsyncGroupNode(int64_t w, bool wg) : StmtNode(kKind), wait(w), wgmma(wg) {}
  static Stmt Commit();
  /// CHECKs `pending` >= 0.
  static Stmt Wait(int64_t pending);
  /// CHECKs 0 <= `pending` <= 7.
  static Stmt WgmmaWait(int64_t pending);
  bool is_commit() const { return wait < 0; }
  const int64_t wait;
  const bool wgmma = false;
};

/// Tensor-core operand kinds of PTX `mma.sync.aligned.m16n8kK.row.col.f32.<t>.<t>.f32`:
/// f16 and bf16 (K = 16) multiply float16 / bfloat16 operands; tf32 (K = 8) rounds float32
/// operands to TF32 (10 mantissa bits, round to nearest, ties away: cvt.rna.tf32.f32) and
/// multiplies once; tf32x3 (K = 8) splits each float32 operand x into big = x with its low 13
/// mantissa bits cleared and small = (x − big) with the same truncation, and accumulates
/// small·big + big·small + big·big (CUTLASS's 3xTF32: about float32 accuracy).
enum class MmaKind : uint8_t { kF16, kBF16, kTF32, kTF32x3 };
/// "f16", "bf16", "tf32", "tf32x3".
const char* MmaKindName(MmaKind kind);
/// Parses MmaKindName's names; nullopt for anything else.
std::optional<MmaKind> ParseMmaKind(const std::string& name);
/// K of the kind's m16n8kK instruction: 16 (f16, bf16) or 8 (tf32, tf32x3).
int64_t MmaK(MmaKind kind);
/// The element type the kind's operands are stored in (float16, bfloat16, float32).
ScalarType MmaOperandType(MmaKind kind);
/// The value an operand element `x` takes in one product of the kind (tf32: rounded; f16/bf16:
/// x itself, already of that type); for tf32x3 `part` 0 is big and 1 is small.
float MmaOperandValue(MmaKind kind, float x, int part = 0);

/// One warp's tensor-core update of a warp tile (GPU only; made by the tensor_core step):
/// acc += A · B over a (16·m_frags) × (8·n_frags) tile and a depth of k_steps·MmaK(kind), as
/// m_frags·n_frags·k_steps `mma.sync` instructions. Every lane of the warp executes it (the
/// instruction is warp-collective), with the same operands and its own `lane` (0..31).
///
/// Operands live in shared buffers of MmaOperandType(kind) with at least two dimensions;
/// `a_origin` / `b_origin` index the tile's element (0, 0) and the tile extends along the last two
/// dimensions: A element (r, k) is at a_origin + (r, k) when `a_k_inner` (…[m][k] rows) else
/// a_origin + (k, r); B element (k, c) at b_origin + (c, k) when `b_k_inner` (…[n][k]) else
/// b_origin + (k, c).
///
/// `acc` is the thread's local float32 buffer of shape [m_frags, n_frags, 4] holding its part of
/// the accumulator in the mma.sync C-fragment layout: with g = lane / 4 and t = lane % 4,
/// acc[i, j, e] is tile element (16 i + g + 8 (e / 2), 8 j + 2 t + e % 2). Per k step each
/// element becomes float32(acc + Σ_k a·b) with a, b the MmaOperandValue of the operands (the sum
/// exact in double: the hardware's fp32 accumulation differs from it by rounding only).
struct WarpMmaNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kWarpMma;
  WarpMmaNode() : StmtNode(kKind) {}
  /// CHECKs the counts (≥ 1), the origins (≥ 2 int64 indices) and `lane` (int64).
  static Stmt Make(MmaKind kind, int64_t m_frags, int64_t n_frags, int64_t k_steps, std::string acc,
                   std::string a, std::vector<Expr> a_origin, bool a_k_inner, std::string b,
                   std::vector<Expr> b_origin, bool b_k_inner, Expr lane);
  MmaKind kind = MmaKind::kF16;
  int64_t m_frags = 1;
  int64_t n_frags = 1;
  int64_t k_steps = 1;
  std::string acc;
  std::string a;
  std::vector<Expr> a_origin;
  bool a_k_inner = true;
  std::string b;
  std::vector<Expr> b_origin;
  bool b_k_inner = false;
  Expr lane;
};

/// Where a wgmma operand tile lives in shared memory: PTX's canonical layouts for matrix
/// descriptors (PTX ISA, "Asynchronous warpgroup level matrix shared memory layout"), with
/// elements of E = `element_bytes` (2: f16 / bf16; 4: tf32, K-major only). A tile's rows are m (A)
/// or n (B); "K-major" rows hold their k values contiguously, "MN-major" k rows hold m/n values
/// contiguously.
///   K-major, swizzle W:  element (row, k) at byte row·W + E k (k < W / E); 8-row groups are
///                        `sbo` = 8 W bytes apart. One k step (32 bytes of k) is 32 bytes further.
///   MN-major, swizzle W: element (row, k) at byte (row / (W/E))·lbo + E (row % (W/E)) + k·W with
///                        8-k groups `sbo` = 8 W apart and atoms of W/E rows `lbo` apart.
/// The W-byte swizzle then permutes the 16-byte chunks of each 128-byte line of the absolute
/// shared address (WgmmaSwizzle), so the tile origin must be 1024-byte aligned.
struct WgmmaLayout {
  bool k_major = true;
  int64_t swizzle = 128;      // bytes: 32, 64 or 128 (the descriptor has no other swizzled mode)
  int64_t lbo = 0;            // bytes (MN-major only); a multiple of 16 under 2^18 (14-bit field)
  int64_t sbo = 0;            // bytes; a multiple of 16 under 2^18
  int64_t element_bytes = 2;  // 2 (f16, bf16) or 4 (tf32)
  /// Operand A of tf32 only: each thread loads its A fragment from shared memory into registers
  /// (PTX's register form of wgmma, which reads A in any layout), from a plain unswizzled tile:
  /// element (row, k) at element row·row_stride + k·k_stride from the origin. The swizzle, lbo,
  /// sbo and k_major fields are then unused.
  bool registers = false;
  int64_t row_stride = 0;  // elements
  int64_t k_stride = 0;    // elements
  /// tf32 only: the tile holds float32 values read through the descriptor as they are, whose low
  /// 13 mantissa bits the tensor cores drop (truncation, ir::Tf32TruncateValue), not TF32 values.
  bool truncated = false;
  bool operator==(const WgmmaLayout&) const = default;
};
/// Byte offset of element (row, k), before swizzling (none for `registers`), from the tile origin.
int64_t WgmmaLayoutOffset(const WgmmaLayout& layout, int64_t row, int64_t k);
/// A shared byte address after the W-byte swizzle (W = 32, 64 or 128): bits [4, 4 + log2(W/16)) are
/// xor-ed with the bits from 7 up (CUTLASS's Swizzle<3,4,3> for 128 bytes, <2,4,3> for 64, <1,4,3>
/// for 32).
int64_t WgmmaSwizzle(int64_t address, int64_t swizzle);

/// One warpgroup's (128 threads, four consecutive warps) tensor-core update on sm_90a:
/// acc += A · B over a (64·m_tiles) × n tile and a depth of K·k_steps, as m_tiles·k_steps
/// `wgmma.mma_async.sync.aligned.m64nNkK.f32.<t>.<t>` instructions (K = 16 for f16 / bf16, 8 for
/// tf32, ir::MmaK) reading both operands from
/// shared memory through matrix descriptors (fence, then the instructions, then commit). With
/// `pending` 0 the statement waits for them (wait_group 0) and completes like any other. With
/// `pending` 1 it waits only for the previous statement's group (wait_group 1), so its own
/// instructions run on while the threads go on: until a later Wgmma of the thread ends, the
/// accumulator may not be read or written by anything else and the operand tiles may not be
/// overwritten (the tensor_core lowering orders its ring of tiles so). `pending` up to 3 lets
/// that many groups run (wait_group `pending`; AsyncGroupNode::WgmmaWait waits for them later).
/// Later Wgmma's into the same accumulator may be issued while earlier ones are in flight. The
/// interpreter keeps a thread's groups in flight as they are: it performs a group's update (reading
/// its shared tiles then) when a later Wgmma's or a WgmmaWait's count retires it, or when a Store
/// of the thread touches the accumulator (ptxas makes the hardware wait there), so a tile
/// overwritten or a ring slot refilled before its group is waited for shows up as a wrong
/// answer; an A read into registers is taken at issue. A tf32 A may instead be read into
/// registers from a plain tile (WgmmaLayout::registers; PTX's register form), rounded there. Kinds
/// f16, bf16 and tf32; tf32 reads K-major float32 tiles whose values it rounds as
/// ir::MmaOperandValue does (where the lowering stored TF32 values there, the hardware's own
/// reading of the dropped bits never matters), or truncates where the layout says the tile holds
/// raw float32 values (WgmmaLayout::truncated: the tensor cores drop the low bits).
///
/// `a` / `b` are shared buffers of the kind's element type, read as flat arrays; `a_offset` /
/// `b_offset` are the element offsets of the tiles' origins (1024-byte aligned, except a
/// registers-layout A's), element (r, k) at WgmmaSwizzle(origin + WgmmaLayoutOffset(layout, r, k))
/// (no swizzle for registers); A's 64-row tile i starts at row 64 i.
///
/// `acc` is the thread's local float32 buffer [m_tiles, n / 8, 4] in the wgmma D-fragment layout:
/// with w = thread / 32 (the warp in the group), g = (thread % 32) / 4 and t = thread % 4,
/// acc[i, j, e] is tile element (64 i + 16 w + g + 8 (e / 2), 8 j + 2 t + e % 2). Per k step each
/// element becomes float32(acc + Σ_k a·b) with a, b the MmaOperandValue of the operands, the sum
/// exact (the hardware differs by rounding only).
/// `thread` is the thread's index in its warpgroup (0..127), which must equal
/// (threadIdx.x + 32 threadIdx.y) % 128 as tensor-core schedules bind it.
/// `proxy_fence`: the statement starts with fence.proxy.async, which a tile written through the
/// generic proxy (st.shared, cp.async) needs before wgmma reads it through the async proxy. False
/// where only TMA copies (the async proxy itself, completed through an mbarrier wait) write the
/// operand tiles before the statement; the interpreter ignores it.
struct WgmmaNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kWgmma;
  WgmmaNode() : StmtNode(kKind) {}
  /// CHECKs the counts (≥ 1; n a multiple of 8 up to 256), the int64 expressions, the kind,
  /// `pending` (0..3) and the layouts (swizzle 32 / 64 / 128, lbo and sbo as WgmmaLayout says).
  static Stmt Make(MmaKind kind, int64_t m_tiles, int64_t n, int64_t k_steps, std::string acc,
                   std::string a, Expr a_offset, WgmmaLayout a_layout, std::string b, Expr b_offset,
                   WgmmaLayout b_layout, Expr thread, int64_t pending = 0, bool proxy_fence = true);
  MmaKind kind = MmaKind::kF16;
  int64_t m_tiles = 1;
  int64_t n = 8;
  int64_t k_steps = 1;
  std::string acc;
  std::string a;
  Expr a_offset;
  WgmmaLayout a_layout;
  std::string b;
  Expr b_offset;
  WgmmaLayout b_layout;
  Expr thread;
  int64_t pending = 0;  // 0..3
  bool proxy_fence = true;
};

/// TMA (sm_90): the executing thread starts a bulk copy of one box of the tensor map held in
/// global buffer `tensor_map` (an Allocate with BufferDecl::tensor_map) at element coordinates
/// `coords` (outermost first, one per dimension, int32 range; out-of-range box elements read as
/// zero) into shared buffer `dst` (read as flat) from element `dst_offset` (the destination
/// aligned as TensorMapSpec says), laid out as TensorMapSpec says. Its completion counts the box's
/// bytes towards the transaction count of mbarrier `barrier`[`barrier_index`], whose phase
/// completes when they and its arrivals are in (MbarrierNode). Threads may read the data once
/// they have waited for that phase. The interpreter performs the copy when a wait completes the
/// phase, so a missing or misplaced wait shows up as a wrong answer.
///
/// `multicast` > 1 (TMA multicast): the kernel launches in clusters of `multicast` blocks along
/// blockIdx.x, and the box still lands in this block's `dst` and counts towards this block's
/// barrier as above, but only the block of cluster rank `issuer` (an int64 expression, the same
/// in every block of a cluster) starts the copy, once for the whole cluster
/// (.multicast::cluster: the same offset and barrier in every block); the executing thread of the
/// other blocks starts nothing for it. Each block's barrier still expects the box's bytes. The
/// interpreter performs it as the plain copy (what lands in the block is the same).
struct TmaLoadNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kTmaLoad;
  TmaLoadNode() : StmtNode(kKind) {}
  /// CHECKs names, int64 expressions, at least one coordinate, multicast in 1..8 and `issuer`
  /// defined (int64) exactly when multicast > 1.
  static Stmt Make(std::string tensor_map, std::vector<Expr> coords, std::string dst,
                   Expr dst_offset, std::string barrier, Expr barrier_index, int64_t multicast = 1,
                   Expr issuer = Expr());
  std::string tensor_map;
  std::vector<Expr> coords;
  std::string dst;
  Expr dst_offset;
  std::string barrier;
  Expr barrier_index;
  int64_t multicast = 1;
  Expr issuer;  // multicast > 1: the cluster rank that starts the copy
};

/// An mbarrier (sm_90) held in element `index` of shared int64 buffer `buffer`, as the executing
/// thread uses it. kInit: sets the barrier to expect `count` arrivals per phase, phase 0 (one
/// thread, before any other use; a Barrier must follow before other threads use it; the emitter
/// adds the fence that makes the initialization visible to TMA). kArriveExpectTx: the thread
/// arrives and adds `count` bytes to the transactions the current phase waits for (a TmaLoad's
/// box). kArrive: the thread arrives (a consumer releasing a ring slot); with `count` = c > 1 it
/// arrives on the barrier at the same place in each of the c blocks of its cluster (sm_90: mapa,
/// then a remote arrive; c arrivals in all); the interpreter, which runs each block on its own,
/// counts c arrivals on the block's own barrier, standing for the cluster's blocks, which do the
/// same work in step. kWait: the thread waits
/// until the phase of parity `parity` (an int64 expression, 0 or 1) has completed (PTX
/// try_wait.parity: phase p completes when its arrivals and transaction bytes are in, then the
/// barrier moves to phase p + 1; waiting for the parity of the phase before the current one returns
/// at once).
struct MbarrierNode : StmtNode {
  enum class Op : uint8_t { kInit, kArriveExpectTx, kWait, kArrive };
  static constexpr StmtKind kKind = StmtKind::kMbarrier;
  MbarrierNode() : StmtNode(kKind) {}
  static Stmt Init(std::string buffer, Expr index, int64_t arrivals);
  static Stmt ArriveExpectTx(std::string buffer, Expr index, int64_t bytes);
  static Stmt Wait(std::string buffer, Expr index, Expr parity);
  /// `cluster` 1: this block's barrier; 2..8: the barrier in every block of the cluster.
  static Stmt Arrive(std::string buffer, Expr index, int64_t cluster = 1);
  Op op = Op::kInit;
  std::string buffer;
  Expr index;
  int64_t count = 0;  // kInit: arrivals; kArriveExpectTx: bytes; kArrive: cluster blocks (0, 2..8)
  Expr parity;        // kWait
};
/// "init", "arrive_expect_tx", "wait", "arrive".
const char* MbarrierOpName(MbarrierNode::Op op);

/// Register reallocation between warpgroups (PTX `setmaxnreg.{inc,dec}.sync.aligned.u32`,
/// sm_90a): every thread of a warpgroup executes it, and the warpgroup's per-thread register limit
/// becomes `count` (24..256, a multiple of 8), registers taken from (`increase`) or returned to the
/// block's pool; an increase waits until the pool has them. No effect on any value: the
/// interpreter goes on (Make checks the count). (A warp-specialized kernel's producer warpgroup
/// returns registers its consumers take: CUTLASS's register reallocation.)
struct SetMaxNRegNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kSetMaxNReg;
  SetMaxNRegNode(int64_t c, bool inc) : StmtNode(kKind), count(c), increase(inc) {}
  /// CHECKs the count (24..256, a multiple of 8).
  static Stmt Make(int64_t count, bool increase);
  const int64_t count;
  const bool increase;
};

/// One kernel: parameters in argument order (inputs, then outputs) and the body.
struct LoopNest {
  std::string name;
  std::vector<BufferDecl> params;
  /// How many of `params` (a prefix) are inputs; the rest are outputs.
  int num_inputs = 0;
  Stmt body;
};

/// Readable indented text (defined with the printer), stable for golden tests.
/// Elements of the local-scope (per-thread) buffers allocated anywhere in `s`, summed over the
/// Allocates under its loops, sequences and both branches of its conditionals: the register
/// estimate of the search's annotation rules and the cost model's launch features.
int64_t LocalElements(const Stmt& s);

std::string ToString(const Stmt& s);
std::string ToString(const LoopNest& nest);
std::ostream& operator<<(std::ostream& os, const Stmt& s);
std::ostream& operator<<(std::ostream& os, const LoopNest& nest);

/// Read-only pre-order visitor over statements; VisitExpr sees every expression they hold.
class StmtVisitor {
 public:
  virtual ~StmtVisitor() = default;
  virtual void Visit(const Stmt& s);
  virtual void VisitExpr(const Expr&) {}

 protected:
#define TS_DECLARE_VISIT(name) virtual void Visit##name(const name##Node* op, const Stmt& s);
  TS_STMT_NODE_KINDS(TS_DECLARE_VISIT)
#undef TS_DECLARE_VISIT
};

/// Rewrites statements bottom-up, returning the original node when nothing changed.
/// MutateExpr is applied to every expression held by a statement (identity by default).
class StmtMutator {
 public:
  virtual ~StmtMutator() = default;
  virtual Stmt Mutate(const Stmt& s);
  virtual Expr MutateExpr(const Expr& e) { return e; }

 protected:
#define TS_DECLARE_MUTATE(name) virtual Stmt Mutate##name(const name##Node* op, const Stmt& s);
  TS_STMT_NODE_KINDS(TS_DECLARE_MUTATE)
#undef TS_DECLARE_MUTATE
};

}  // namespace tilesearch::ir
