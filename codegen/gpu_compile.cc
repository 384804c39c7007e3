// CompileToPtx: kernels as gpu.func in a gpu.module (bare-pointer memref arguments, workgroup
// attributions or a dynamic shared-memory view per shared buffer), math without libdevice,
// convert-gpu-to-nvvm, translation to LLVM IR, LLVM O3 and the NVPTX backend.
#include <chrono>
#include <map>
#include <regex>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "codegen/codegen.h"
#include "codegen/emitter.h"
#include "codegen/kernel_plan.h"
#include "codegen/mlir_setup.h"
#include "codegen/ptxas.h"
#include "ir/stmt_contains.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"

namespace tilesearch::codegen {
namespace {

using internal::DiagnosticCapture;
using internal::Emitter;
using internal::KernelPlan;
using internal::ModulePlan;

constexpr char kTriple[] = "nvptx64-nvidia-cuda";

int64_t RoundUp16(int64_t v) { return (v + 15) / 16 * 16; }

// wgmma's swizzled operand tiles repeat every 1024 bytes of the shared address: kernels that use
// wgmma place every shared buffer on that period.
constexpr int64_t kWgmmaSharedAlign = 1024;

// Whether a statement contains a wgmma (its module is compiled for sm_90a) or a TMA load (its
// boxes land swizzled on the same 1024-byte period, TensorMapSpec).
bool UsesWgmma(const ir::Stmt& s) {
  return ir::ContainsStmtKind(s, ir::StmtKind::kWgmma) ||
         ir::ContainsStmtKind(s, ir::StmtKind::kTmaLoad);
}

// Bytes of the shared buffers a kernel allocates (each padded to 16 bytes, or to 1024 with
// wgmma).
class SharedBytes : public ir::StmtVisitor {
 public:
  explicit SharedBytes(int64_t align) : align_(align) {}
  int64_t total = 0;

 protected:
  void VisitAllocate(const ir::AllocateNode* op, const ir::Stmt& s) override {
    if (op->buffer.scope == ir::MemoryScope::kShared) {
      total += (op->buffer.Bytes() + align_ - 1) / align_ * align_;
    }
    ir::StmtVisitor::VisitAllocate(op, s);
  }

 private:
  int64_t align_;
};

mlir::Attribute WorkgroupSpace(mlir::MLIRContext* ctx) {
  return mlir::gpu::AddressSpaceAttr::get(ctx, mlir::gpu::AddressSpace::Workgroup);
}

// Emits one gpu.func per kernel into `gpu_module`.
absl::Status EmitKernels(mlir::gpu::GPUModuleOp gpu_module, const ModulePlan& plan,
                         const GpuCompileOptions& options, std::vector<GpuKernelInfo>& infos) {
  mlir::MLIRContext* ctx = gpu_module.getContext();
  mlir::OpBuilder b(ctx);
  const mlir::Location loc = b.getUnknownLoc();
  std::vector<mlir::Type> arg_types;
  for (const KernelArg& a : plan.args) {
    arg_types.push_back(
        mlir::MemRefType::get(a.buffer.shape, internal::StorageType(ctx, a.buffer.dtype)));
  }
  for (const KernelPlan& kp : plan.kernels) {
    b.setInsertionPointToEnd(gpu_module.getBody());
    auto fn =
        mlir::gpu::GPUFuncOp::create(b, loc, kp.name, mlir::FunctionType::get(ctx, arg_types, {}));
    fn->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    fn.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({static_cast<int32_t>(kp.block[0]),
                                                     static_cast<int32_t>(kp.block[1]),
                                                     static_cast<int32_t>(kp.block[2])}));
    if (kp.min_blocks_per_sm > 0) {
      // NVVM's launch-bounds attribute: PTX .minnctapersm, with .maxntid from the block size.
      fn->setAttr("nvvm.minctasm", b.getI32IntegerAttr(static_cast<int32_t>(kp.min_blocks_per_sm)));
    } else if (ir::ContainsStmtKind(kp.body, ir::StmtKind::kSetMaxNReg)) {
      // One block per multiprocessor: ptxas then knows the registers each thread has at launch
      // (without it, it ignores setmaxnreg: "unable to determine register count at entry") and
      // gives every thread the most the block size allows, the pool the reallocation divides
      // (schedule::WsRegisterSplit).
      fn->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
    }
    if (kp.cluster > 1) {
      // PTX .reqnctapercluster: the clusters are part of the kernel, so the plain launch
      // (cuLaunchKernel, score.py's) forms them.
      fn->setAttr("nvvm.cluster_dim",
                  b.getDenseI32ArrayAttr({static_cast<int32_t>(kp.cluster), 1, 1}));
    }
    fn.setKnownGridSizeAttr(
        b.getDenseI32ArrayAttr({static_cast<int32_t>(kp.grid[0]), static_cast<int32_t>(kp.grid[1]),
                                static_cast<int32_t>(kp.grid[2])}));
    for (size_t i = 0; i < arg_types.size(); ++i) {
      // Buffers are distinct allocations aligned to at least 16 bytes (codegen.h).
      fn.setArgAttr(i, "llvm.noalias", b.getUnitAttr());
      fn.setArgAttr(i, "llvm.align", b.getI64IntegerAttr(16));
    }
    mlir::Block* entry = &fn.getBody().front();
    b.setInsertionPointToEnd(entry);
    auto ret = mlir::gpu::ReturnOp::create(b, loc);
    b.setInsertionPoint(ret);

    GpuKernelInfo info;
    info.name = kp.name;
    info.grid = kp.grid;
    info.block = kp.block;
    info.cluster = kp.cluster;
    // wgmma kernels keep all shared buffers in the dynamic window, whose symbol gets the
    // 1024-byte alignment (LowerToNvvm), at offsets on that period.
    const bool wgmma = UsesWgmma(kp.body);
    const int64_t align = wgmma ? kWgmmaSharedAlign : 16;
    SharedBytes shared(align);
    shared.Visit(kp.body);
    const bool dynamic = wgmma || shared.total > options.max_static_shared_bytes;
    mlir::Value dyn_base;
    int64_t dyn_offset = 0;
    if (dynamic) {
      mlir::OpBuilder eb(ctx);
      eb.setInsertionPointToStart(entry);
      auto type = mlir::MemRefType::get({mlir::ShapedType::kDynamic}, b.getI8Type(),
                                        mlir::MemRefLayoutAttrInterface{}, WorkgroupSpace(ctx));
      dyn_base = mlir::gpu::DynamicSharedMemoryOp::create(eb, loc, type);
    }
    internal::EmitConfig config;
    config.target = internal::EmitTarget::kGpu;
    config.vectorize = options.vectorize;
    config.max_unroll = options.max_unroll;
    config.unroll_budget = options.unroll_budget;
    config.contract = options.fma_contraction;
    config.grid = kp.grid;
    config.block = kp.block;
    Emitter em(b, loc, config, entry);
    em.set_shared_hook([&](const ir::BufferDecl& decl) -> absl::StatusOr<mlir::Value> {
      auto type = mlir::MemRefType::get(decl.shape, internal::StorageType(ctx, decl.dtype),
                                        mlir::MemRefLayoutAttrInterface{}, WorkgroupSpace(ctx));
      if (!dynamic) {
        info.static_shared_bytes += decl.Bytes();
        return mlir::Value(fn.addWorkgroupAttribution(type, loc));
      }
      mlir::OpBuilder vb(ctx);
      vb.setInsertionPointAfter(dyn_base.getDefiningOp());
      dyn_offset = (dyn_offset + align - 1) / align * align;
      mlir::Value offset = mlir::arith::ConstantIndexOp::create(vb, loc, dyn_offset);
      dyn_offset += RoundUp16(decl.Bytes());
      info.dynamic_shared_bytes = dyn_offset;
      return mlir::Value(mlir::memref::ViewOp::create(vb, loc, type, dyn_base, offset, {}));
    });
    for (size_t i = 0; i < plan.args.size(); ++i) {
      em.BindBuffer(plan.args[i].buffer, entry->getArgument(i));
    }
    RETURN_IF_ERROR(em.EmitStmt(kp.body));
    infos.push_back(std::move(info));
  }
  return absl::OkStatus();
}

// NVPTX has no libdevice here: the math ops left after the polynomial approximations become LLVM
// intrinsics the NVPTX backend selects directly (convert-gpu-to-nvvm would otherwise call
// __nv_* functions, and it rejects llvm.intr.sqrt / floor / fabs as ops).
absl::Status MathToIntrinsics(mlir::Operation* root) {
  std::vector<mlir::Operation*> ops;
  root->walk([&](mlir::Operation* op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "math") ops.push_back(op);
  });
  for (mlir::Operation* op : ops) {
    const std::string name = op->getName().getStringRef().str();
    std::string intrinsic;
    if (name == "math.sqrt")
      intrinsic = "llvm.sqrt";
    else if (name == "math.absf")
      intrinsic = "llvm.fabs";
    else if (name == "math.floor")
      intrinsic = "llvm.floor";
    else if (name == "math.ceil")
      intrinsic = "llvm.ceil";
    else if (name == "math.fma")
      intrinsic = "llvm.fma";
    else if (name == "math.copysign")
      intrinsic = "llvm.copysign";
    else if (name == "math.roundeven")
      intrinsic = "llvm.roundeven";
    else if (name == "math.trunc")
      intrinsic = "llvm.trunc";
    else
      return absl::UnimplementedError(absl::StrCat("no NVPTX lowering for ", name));
    const mlir::Type type = op->getResult(0).getType();
    if (auto vt = mlir::dyn_cast<mlir::VectorType>(type)) {
      absl::StrAppend(&intrinsic, ".v", vt.getNumElements(), "f32");
    } else {
      absl::StrAppend(&intrinsic, ".f32");
    }
    mlir::OpBuilder b(op);
    auto call = mlir::LLVM::CallIntrinsicOp::create(b, op->getLoc(), type,
                                                    b.getStringAttr(intrinsic), op->getOperands());
    op->getResult(0).replaceAllUsesWith(call.getResult(0));
    op->erase();
  }
  return absl::OkStatus();
}

// Wall clock since the previous call, ms (the first call: since construction).
class Lap {
 public:
  double operator()() {
    const auto now = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
    return ms;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// The passes run as separate pass managers, one per phase of GpuModule::Phases, so that each is
// timed on its own (the same passes in the same order as one pipeline).
absl::Status LowerToNvvm(mlir::gpu::GPUModuleOp gpu_module, bool wgmma, DiagnosticCapture& diag,
                         GpuModule::Phases& phases) {
  Lap lap;
  RETURN_IF_ERROR(
      internal::ApproximateMath(gpu_module, internal::Exp2Log2Source::kNvvmApprox, diag));
  RETURN_IF_ERROR(MathToIntrinsics(gpu_module));
  phases.math_ms = lap();
  mlir::MLIRContext* ctx = gpu_module.getContext();
  const llvm::StringRef anchor = mlir::gpu::GPUModuleOp::getOperationName();
  RETURN_IF_ERROR(internal::LowerScfToControlFlow(gpu_module, diag));
  phases.scf_to_cf_ms = lap();
  mlir::PassManager pm(ctx, anchor);
  // CSE before the conversion too: the emitter writes a constant (and its index casts) at every
  // use, 40 % of a 3xTF32 wgmma kernel's operations, and the conversion's cost follows the count.
  // The PTX of 208 logged candidates of eight workloads was identical with and without it, and
  // the MLIR lowering took 25-55 % less on the tensor-core kernels (bench/NOTES.md).
  pm.addPass(mlir::createCSEPass());
  mlir::ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.indexBitwidth = 64;
  nvvm.useBarePtrCallConv = true;
  // Every pattern of the conversion succeeds or fails before touching the IR: no rollback needed,
  // and its bookkeeping cost time (the unrolled convolution of bench/NOTES.md: 351 → 291 ms).
  nvvm.allowPatternRollback = false;
  pm.addPass(mlir::createConvertGpuOpsToNVVMOps(nvvm));
  // nvvm.wgmma.mma_async has no LLVM intrinsic here: it becomes inline PTX.
  if (wgmma) pm.addPass(mlir::createConvertNVVMToLLVMPass());
  if (mlir::failed(pm.run(gpu_module))) return diag.Error("lowering to NVVM failed");
  phases.to_nvvm_ms = lap();
  mlir::PassManager cleanup(ctx, anchor);
  // No canonicalizer: LLVM's O3 folds the same; the PTX of the logged candidates was identical
  // without it, and it cost up to a tenth of a build (bench/NOTES.md). CSE stays: without it the
  // unrolled bodies' repeated constants reach the translation and LLVM (same PTX, no faster).
  cleanup.addPass(mlir::createCSEPass());
  cleanup.addPass(mlir::createReconcileUnrealizedCastsPass());
  if (mlir::failed(cleanup.run(gpu_module))) return diag.Error("lowering to NVVM failed");
  phases.cleanup_ms = lap();
  // Workgroup buffers hold 16-byte vector accesses; the lowering leaves their alignment at the
  // element's.
  // The dynamic shared-memory symbol must be external (`.extern .shared ... []`): with the
  // internal linkage the lowering gives it, NVPTX demotes it to a zero-sized local array.
  const int64_t align = wgmma ? kWgmmaSharedAlign : 16;
  gpu_module.walk([&](mlir::LLVM::GlobalOp g) {
    if (g.getAddrSpace() != 3) return;
    if (g.getAlignment().value_or(0) < static_cast<uint64_t>(align)) g.setAlignment(align);
    if (llvm::StringRef(g.getSymName()).starts_with("__dynamic_shmem__")) {
      g.setLinkage(mlir::LLVM::Linkage::External);
    }
  });
  return absl::OkStatus();
}

// This thread's target machine for (arch, opt_level), created on first use.
absl::StatusOr<llvm::TargetMachine*> NvptxMachine(const std::string& arch, int opt_level);

absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> MakeNvptxMachine(const std::string& arch,
                                                                      int opt_level) {
  internal::InitializeLlvmTargets();
  if (!std::regex_match(arch, std::regex("sm_[0-9]+[af]?"))) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown CUDA arch '", arch, "' (expected sm_XX, e.g. sm_90)"));
  }
  std::string error;
  const llvm::Triple triple(kTriple);
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (target == nullptr) return absl::InternalError(absl::StrCat("no NVPTX target: ", error));
  // Ask a generic subtarget whether `arch` is known: creating one for an unknown CPU prints
  // "'sm_1' is not a recognized processor" to stderr.
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(triple, "", ""));
  if (!sti || !sti->isCPUStringValid(arch)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA arch '", arch, "' is not known to LLVM's NVPTX backend"));
  }
  llvm::TargetOptions to;
  const llvm::CodeGenOptLevel level = opt_level <= 0   ? llvm::CodeGenOptLevel::None
                                      : opt_level == 1 ? llvm::CodeGenOptLevel::Less
                                      : opt_level == 2 ? llvm::CodeGenOptLevel::Default
                                                       : llvm::CodeGenOptLevel::Aggressive;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple, arch, "", to, std::nullopt, std::nullopt, level));
  if (!tm) return absl::InternalError("cannot create the NVPTX target machine");
  return tm;
}

absl::StatusOr<llvm::TargetMachine*> NvptxMachine(const std::string& arch, int opt_level) {
  thread_local std::map<std::pair<std::string, int>, std::unique_ptr<llvm::TargetMachine>> cache;
  auto& slot = cache[{arch, opt_level}];
  if (!slot) {
    ASSIGN_OR_RETURN(slot, MakeNvptxMachine(arch, opt_level));
  }
  return slot.get();
}

void OptimizeModule(llvm::Module& module, llvm::TargetMachine* tm, int opt_level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  const llvm::OptimizationLevel level = opt_level <= 0   ? llvm::OptimizationLevel::O0
                                        : opt_level == 1 ? llvm::OptimizationLevel::O1
                                        : opt_level == 2 ? llvm::OptimizationLevel::O2
                                                         : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager mpm = level == llvm::OptimizationLevel::O0
                                    ? pb.buildO0DefaultPipeline(level)
                                    : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(module, mam);
}

}  // namespace

absl::StatusOr<GpuModule> CompileToPtx(const ir::LoopNest& nest,
                                       const std::vector<LaunchConfig>& launches,
                                       const GpuCompileOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  Lap lap;  // the phases, from the start
  ASSIGN_OR_RETURN(ModulePlan plan, internal::PlanGpuModule(nest, launches));
  // wgmma exists only in the arch-specific sm_90a (the same chip as sm_90).
  const bool wgmma = UsesWgmma(nest.body);
  std::string arch = options.arch;
  if (wgmma && arch == "sm_90") arch = "sm_90a";
  if (wgmma && arch != "sm_90a") {
    return absl::InvalidArgumentError(
        absl::StrCat("wgmma needs sm_90a (Hopper); the module is compiled for ", options.arch));
  }
  ASSIGN_OR_RETURN(llvm::TargetMachine * tm, NvptxMachine(arch, options.opt_level));

  mlir::MLIRContext* ctx = internal::ThreadContext();
  DiagnosticCapture diag(ctx);
  mlir::OpBuilder b(ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module(mlir::ModuleOp::create(b.getUnknownLoc()));
  (*module)->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
  b.setInsertionPointToEnd(module->getBody());
  auto gpu_module = mlir::gpu::GPUModuleOp::create(b, b.getUnknownLoc(), plan.name);

  GpuModule out;
  out.args = plan.args;
  out.arch = arch;
  RETURN_IF_ERROR(EmitKernels(gpu_module, plan, options, out.kernels));
  if (mlir::failed(mlir::verify(*module))) return diag.Error("emitted MLIR does not verify");
  if (options.keep_mlir) out.mlir = internal::ToText(*module);
  gpu_module.walk([&](mlir::Operation*) { ++out.emitted_ops; });
  out.phases.emit_ms = lap();

  RETURN_IF_ERROR(LowerToNvvm(gpu_module, wgmma, diag, out.phases));
  out.phases.lower_ms = lap();
  llvm::LLVMContext llvm_ctx;
  std::unique_ptr<llvm::Module> llvm_module =
      mlir::translateModuleToLLVMIR(gpu_module, llvm_ctx, plan.name);
  if (!llvm_module) return diag.Error("translation to LLVM IR failed");
  llvm_module->setTargetTriple(llvm::Triple(kTriple));
  llvm_module->setDataLayout(tm->createDataLayout());
  out.phases.translate_ms = lap();
  OptimizeModule(*llvm_module, tm, options.opt_level);
  out.phases.optimize_ms = lap();
  if (options.keep_llvm_ir) {
    llvm::raw_string_ostream os(out.llvm_ir);
    llvm_module->print(os, nullptr);
  }
  llvm::SmallString<0> ptx;
  {
    llvm::raw_svector_ostream os(ptx);
    llvm::legacy::PassManager codegen;
    if (tm->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::AssemblyFile)) {
      return absl::InternalError("the NVPTX target cannot emit assembly");
    }
    codegen.run(*llvm_module);
  }
  out.ptx = std::string(ptx.str());
  out.phases.codegen_ms = lap();
  if (!options.ptxas.empty()) {
    absl::StatusOr<std::string> cubin = AssemblePtx(options.ptxas, out.ptx, arch);
    if (cubin.ok()) {
      out.cubin = *std::move(cubin);
    } else {
      out.assemble_error = std::string(cubin.status().message());
    }
    out.assemble_ms = lap();
  }
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tilesearch::codegen
