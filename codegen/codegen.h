// Code generation: a lowered loop nest (ir/stmt.h) → MLIR (gpu, scf, arith, math, memref, vector)
// → LLVM IR → PTX for CUDA targets through LLVM's NVPTX backend, or → host machine code run in
// process through MLIR's ExecutionEngine (LLVM ORC JIT) for the cpu target (or, through the same
// pipeline, into an object file with a C entry: CompileHostObject).
//
// This header is MLIR-free; only codegen/*.cc include MLIR/LLVM headers. Codegen depends on ir/
// and base/ only (not on schedule/); launches are base/launch_config.h's LaunchConfig.
//
// Kernel argument convention (GPU and host alike): one bare pointer per buffer, in this order:
// the LoopNest's params (inputs, then outputs), then the scratch buffers, i.e. the global
// Allocates of intermediate tensors, in pre-order of the nest. Every GPU kernel of a module takes
// the full list, whether or not it uses each buffer. Buffers are dense row-major arrays of their
// dtype (bool: one byte per element, 0 or 1) and must be 16-byte aligned (cudaMalloc gives 256).
//
// Numerics: float16 / bfloat16 are storage types (loaded values widen to float32, stores round to
// nearest even), float32 arithmetic is IEEE (division and sqrt correctly rounded; GPU code
// and host code contract a*b+c into fma unless GpuCompileOptions / HostCompileOptions
// fma_contraction is off); exp, log, tanh and erf use
// MLIR's float32 polynomial approximations on both targets (no libdevice; a few ulp), pow is
// exp(y*log|x|) with the sign of x for integer y; integer / and % are floor division (ir/expr.h).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/launch_config.h"
#include "ir/host_buffer.h"
#include "ir/stmt.h"

namespace tilesearch::codegen {

/// One kernel argument: a parameter of the nest, a scratch buffer the runtime allocates, or a TMA
/// tensor map (128 bytes of global memory the runtime fills at launch by encoding
/// buffer.tensor_map over the parameter it names, whose device address it needs).
struct KernelArg {
  enum class Kind : uint8_t { kInput, kOutput, kScratch, kTensorMap };
  ir::BufferDecl buffer;  // name, dtype, shape
  Kind kind = Kind::kInput;
  int64_t bytes() const { return buffer.Bytes(); }
};

/// "input", "output", "scratch", "tensor_map".
const char* KernelArgKindName(KernelArg::Kind kind);

/// The argument list of `nest`: params (inputs, outputs), then scratch buffers (global Allocates,
/// pre-order; those holding a TMA tensor map are kTensorMap). Errors: kUnimplemented for a global
/// Allocate inside a loop or kernel body; kInvalidArgument for a tensor map whose source is not a
/// parameter, which is not 128 bytes, or which ir::CheckTensorMap refuses.
[[nodiscard]] absl::StatusOr<std::vector<KernelArg>> KernelArgs(const ir::LoopNest& nest);

// ---------------------------------------------------------------------------------------------
// GPU.

struct GpuCompileOptions {
  /// NVPTX processor, "sm_XX" (sm_90 = H100/H200). PTX version follows the LLVM default for it.
  std::string arch = "sm_90";
  /// LLVM optimization level 0..3 for the module before NVPTX code generation.
  int opt_level = 3;
  /// Shared memory up to this many bytes per kernel is static (`.shared` arrays); above it, the
  /// kernel uses dynamic shared memory (the runtime passes `dynamic_shared_bytes` at launch and
  /// opts in above 48 KiB).
  int64_t max_static_shared_bytes = 48 * 1024;
  /// Vectorized loops whose accesses are contiguous become vector loads/stores (16-byte when the
  /// alignment is proven); otherwise they are unrolled. False: vectorized loops are unrolled.
  bool vectorize = true;
  /// Unrolled / vectorized loops with a constant extent up to this are unrolled while emitting
  /// MLIR; longer ones stay loops (with an LLVM unroll hint).
  int64_t max_unroll = 1024;
  /// Unrolled loops whose full unrolling would emit more than this many loop-nest nodes
  /// (statements and expression nodes, counted before unrolling) stay loops, unrolled or not by
  /// LLVM's own heuristics; the unrolled loops inside such a loop are judged on their own.
  /// 0: no budget (the default: a budget changes the code of every candidate above it, SIMT
  /// matmuls among them, and their kernel times are not measured yet; 16384 took the SIMT
  /// convolutions that timed out from 10-30 s to under 1 s here, bench/NOTES.md).
  int64_t unroll_budget = 0;
  /// Let LLVM contract float a*b+c into fma (as nvcc's default -fmad=true); false: every float
  /// operation rounds separately, as the interpreter.
  bool fma_contraction = true;
  /// Keep the emitted MLIR (before lowering) and the LLVM IR (after optimization) in GpuModule.
  bool keep_mlir = false;
  bool keep_llvm_ir = false;
  /// A ptxas to assemble the PTX with (codegen/ptxas.h: FindPtxas) into GpuModule::cubin for
  /// `arch`, so that loading the module needs no driver JIT; "" = PTX only. A failed assembly
  /// leaves the cubin empty and says why in GpuModule::assemble_error (the PTX is still loadable:
  /// the driver then JIT-compiles it and reports its own errors).
  std::string ptxas;
};

/// One `.entry` of the PTX module and how to launch it.
struct GpuKernelInfo {
  std::string name;                          // PTX entry name
  std::array<int64_t, 3> grid = {1, 1, 1};   // blocks
  std::array<int64_t, 3> block = {1, 1, 1};  // threads per block
  int64_t static_shared_bytes = 0;           // `.shared` arrays declared by the kernel
  int64_t dynamic_shared_bytes = 0;          // to pass at launch (0 unless above the static cap)
  /// Blocks per thread block cluster along x (sm_90; PTX .reqnctapercluster, so a plain launch
  /// forms the clusters; gridDim.x is a multiple of it); 1: no cluster.
  int64_t cluster = 1;
};

/// A compiled GPU module: PTX text with one entry per kernel, launched in order.
struct GpuModule {
  std::string ptx;
  /// The processor the PTX targets (`.target`): GpuCompileOptions::arch, or its arch-specific
  /// variant sm_90a when the module uses wgmma. Assemble the PTX for this one.
  std::string arch;
  std::vector<GpuKernelInfo> kernels;
  std::vector<KernelArg> args;  // every kernel's parameter list, in order
  double compile_ms = 0;        // emission through PTX text, wall clock
  /// compile_ms by phase: loop nest → MLIR (incl. context setup), MLIR lowering to the LLVM
  /// dialect, translation to LLVM IR, LLVM optimization, NVPTX code generation.
  struct Phases {
    double emit_ms = 0;
    double lower_ms = 0;
    /// lower_ms in parts: the math approximations and intrinsics, scf → cf, gpu → nvvm (and
    /// nvvm → llvm), canonicalize + cse + cast reconciliation.
    double math_ms = 0;
    double scf_to_cf_ms = 0;
    double to_nvvm_ms = 0;
    double cleanup_ms = 0;
    double translate_ms = 0;
    double optimize_ms = 0;
    double codegen_ms = 0;
  } phases;
  /// Operations in the emitted MLIR module (before lowering): the size the MLIR phases work on.
  int64_t emitted_ops = 0;
  /// The PTX assembled by GpuCompileOptions::ptxas (ELF, for options.arch); empty without one or
  /// when assembling failed (assemble_error then says why).
  std::string cubin;
  std::string assemble_error;
  double assemble_ms = 0;  // the ptxas run, wall clock (part of compile_ms)
  std::string mlir;        // when GpuCompileOptions::keep_mlir
  std::string llvm_ir;     // when GpuCompileOptions::keep_llvm_ir
};

/// Compiles `nest` for a CUDA GPU. Each top-level statement of `nest.body` (under the global
/// Allocates of intermediates) is one kernel; `launches[i]` configures the i-th (grid/block must
/// cover the nest's blockIdx / threadIdx loop extents; larger launches get guards). An empty
/// `launches` derives grid and block from the loop extents.
/// Errors: kInvalidArgument (launch count or sizes do not match the nest, non-constant
/// blockIdx/threadIdx extents, unknown buffers or variables, a barrier under a threadIdx guard,
/// bad arch), kUnimplemented (unsupported construct), kInternal (MLIR or LLVM rejected the code;
/// the message carries their diagnostics).
[[nodiscard]] absl::StatusOr<GpuModule> CompileToPtx(const ir::LoopNest& nest,
                                                     const std::vector<LaunchConfig>& launches,
                                                     const GpuCompileOptions& options = {});

/// One candidate for CompileManyToPtx. The nest is shared, not copied.
struct GpuCompileJob {
  std::shared_ptr<const ir::LoopNest> nest;
  std::vector<LaunchConfig> launches;
};

struct ParallelCompileOptions {
  /// Parallel compilations; 0 = one per hardware thread.
  int num_workers = 0;
  /// Per-candidate wall-clock limit; a candidate over it reports kDeadlineExceeded
  /// "compile_timeout: ...".
  double timeout_ms = 10000;
  /// Each worker process's address-space limit (RLIMIT_AS) in MiB; 0 = none (kProcess only).
  int64_t memory_limit_mb = 0;
  /// kProcess (default): compile in worker processes forked from this one (the nests are shared
  /// copy-on-write, results come back through pipes). A timeout kills the worker, and a crash of
  /// MLIR/LLVM (report_fatal_error, segfault, out of memory under the limit) costs only that
  /// candidate; a new worker is forked for the remaining ones. Forking is safe when no other
  /// thread of this process is inside MLIR/LLVM at the time (a worker that inherits a held lock
  /// deadlocks and is reported as timed out).
  /// kThread: compile in threads of this process. MLIR/LLVM cannot be interrupted, so a candidate
  /// over its limit is reported as timed out and its thread is left to finish in the background
  /// (its result discarded; the CPU is oversubscribed until it ends); a crash ends the process.
  enum class Isolation : uint8_t { kProcess, kThread };
  Isolation isolation = Isolation::kProcess;
  /// When set and it turns true, the jobs not yet finished end at once with kCancelled
  /// "cancelled: ..." (process workers are killed; a thread worker finishes in the background,
  /// its result discarded). For a caller that no longer needs the rest (a tuner that stops).
  const std::atomic<bool>* cancel = nullptr;
};

/// CompileManyToPtx's report of one job's final result (job index, result), from the calling
/// thread, as soon as the job ends: a caller can use the first candidates while later ones
/// still compile.
using CompileDoneCallback =
    std::function<void(size_t job, const absl::StatusOr<GpuModule>& result)>;

/// Compiles many candidates in parallel, one result per job in job order: each as CompileToPtx
/// would return it, or kDeadlineExceeded "compile_timeout: ..." / kInternal "compiler crashed:
/// ..." for that candidate alone, or kInvalidArgument for a job without a nest. `on_done`, when
/// given, is called once per job with that same result as the job ends (in completion order).
[[nodiscard]] std::vector<absl::StatusOr<GpuModule>> CompileManyToPtx(
    const std::vector<GpuCompileJob>& jobs, const GpuCompileOptions& options = {},
    const ParallelCompileOptions& parallel = {}, const CompileDoneCallback& on_done = nullptr);

// ---------------------------------------------------------------------------------------------
// Host (cpu target).

struct HostCompileOptions {
  /// LLVM optimization level 0..3.
  int opt_level = 3;
  /// Threads that run `parallel` loops (the caller counts as one); 0 = one per hardware thread.
  int num_threads = 0;
  /// Vectorized loops with contiguous accesses become LLVM vector operations; other vectorized
  /// loops carry llvm.loop.vectorize metadata. False: plain loops.
  bool vectorize = true;
  /// As GpuCompileOptions::max_unroll.
  int64_t max_unroll = 1024;
  /// As GpuCompileOptions::unroll_budget, but none by default: host code is unchanged.
  int64_t unroll_budget = 0;
  /// Let LLVM contract float a*b+c into fma (vfmadd on x86 with FMA; as GpuCompileOptions, and as
  /// Eigen / BLAS kernels do): one rounding instead of two, ~1.8× on a register-tiled matmul
  /// (bench/NOTES.md). False: IEEE multiply then add.
  bool fma_contraction = true;
  bool keep_mlir = false;
  bool keep_llvm_ir = false;
};

/// JIT-compiled host code for one loop nest. Run is thread-compatible, not thread-safe: scratch
/// buffers are owned by the kernel and reused, so concurrent Runs of one kernel must be serialized
/// by the caller.
class HostKernel {
 public:
  virtual ~HostKernel() = default;
  /// Runs the nest on `buffers`, one pointer per LoopNest param in order (scratch buffers are
  /// allocated by the kernel). Errors: kInvalidArgument when the count differs.
  virtual absl::Status Run(const std::vector<void*>& buffers) = 0;
  /// Every argument incl. the scratch buffers (only the params are passed to Run).
  virtual const std::vector<KernelArg>& args() const = 0;
  virtual double compile_ms() const = 0;
  virtual const std::string& mlir() const = 0;     // when keep_mlir
  virtual const std::string& llvm_ir() const = 0;  // when keep_llvm_ir
};

/// Compiles `nest` for the host CPU. `parallel` loops run on a thread pool (a parallel loop
/// nested in another runs serially), `vectorize` loops become vector code where their accesses
/// are contiguous, blockIdx / threadIdx loops run as serial loops (ir/stmt.h semantics) when the
/// kernel holding them has no Barrier and no local Allocate enclosing a threadIdx loop.
/// Errors: kUnimplemented for those GPU kernels, kInvalidArgument for unknown buffers or
/// variables, kInternal when MLIR or LLVM rejects the code.
[[nodiscard]] absl::StatusOr<std::unique_ptr<HostKernel>> CompileForHost(
    const ir::LoopNest& nest, const HostCompileOptions& options = {});

/// Runs `kernel` on interpreter-style buffers (by param name; values held as double): packs them
/// into typed arrays of each param's dtype, runs, and unpacks every param back into `buffers`.
/// Errors: a missing or mis-shaped buffer (kInvalidArgument), and Run's errors.
[[nodiscard]] absl::Status RunOnBuffers(HostKernel& kernel, const ir::LoopNest& nest,
                                        ir::BufferMap& buffers);

// ---------------------------------------------------------------------------------------------
// Host object files (the cpu kernel artifact of `tilesearch replay`).

struct HostObjectOptions {
  /// The C entry symbol; must be a C identifier ([A-Za-z_][A-Za-z0-9_]*).
  std::string entry_name = "tilesearch_kernel";
  /// As HostCompileOptions.
  int opt_level = 3;
  bool vectorize = true;
  int64_t max_unroll = 1024;
};

/// A relocatable object file for the host CPU with one C-callable entry.
struct HostObject {
  std::string bytes;            // the ELF object file
  std::string entry_name;       // the C entry symbol
  std::vector<KernelArg> args;  // params (the entry's arguments, in order), then scratch
  int num_params = 0;           // entry arguments: the LoopNest's params
  std::string target_triple;    // e.g. "x86_64-unknown-linux-gnu"
  std::string cpu;              // the CPU the code is tuned for (this host's), e.g. "znver3"
  double compile_ms = 0;        // wall clock, loop nest → object bytes
};

/// The C-level symbol the object's parallel loops call, defined weak in the object with a serial
/// body; a program that links a strong definition of the same signature runs them on threads:
///   void tilesearch_parallel_for(void* reserved, void (*body)(void*, int64_t, int64_t),
///                                void* captures, int64_t min, int64_t extent);
/// It must call body(captures, begin, end) on disjoint ranges covering [min, min + extent) and
/// return when all are done (`reserved` is NULL).
inline constexpr char kHostObjectParallelFor[] = "tilesearch_parallel_for";

/// Compiles `nest` with the same MLIR → LLVM pipeline as CompileForHost (same emission, lowering
/// and -O level), for this host's CPU (its features, e.g. AVX2), position independent, into an
/// object file whose only strong global symbol is the C entry
///   int <entry_name>(T0* p0, T1* p1, ...);
/// taking one pointer per LoopNest param in order (inputs, then outputs; dense row-major arrays of
/// the param's dtype, 16-byte aligned), allocating the scratch buffers (aligned_alloc) for the
/// duration of the call, and returning 0, or 1 when a scratch allocation failed (nothing run).
/// Parallel loops go through kHostObjectParallelFor (serial unless the program overrides it). The
/// object needs only the C library (aligned_alloc, malloc, free, memcpy/memset).
/// Errors: kInvalidArgument for an entry name that is not a C identifier; CompileForHost's
/// errors; kInternal when LLVM cannot emit the object.
[[nodiscard]] absl::StatusOr<HostObject> CompileHostObject(const ir::LoopNest& nest,
                                                           const HostObjectOptions& options = {});

}  // namespace tilesearch::codegen
