// CompileForHost: the nest as one llvm.func `@<name>(ptr args, ptr runtime)` whose body is scf /
// arith / memref / vector code on memrefs rebuilt from the argument pointers; each outermost
// `parallel` loop is outlined into `@<name>_parN(ptr captures, i64 begin, i64 end)` and run through
// the runtime's ts_parallel_for on the shared thread pool. Lowered with the host pipeline of
// design.md and JIT-compiled by mlir::ExecutionEngine at -O3 for the host CPU.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "codegen/codegen.h"
#include "codegen/emitter.h"
#include "codegen/host_module.h"
#include "codegen/kernel_plan.h"
#include "codegen/mlir_setup.h"
#include "codegen/thread_pool.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tilesearch::codegen {
namespace {

using internal::DiagnosticCapture;
using internal::Emitter;
using internal::ModulePlan;

// What generated code receives as its runtime argument.
struct HostRuntime {
  int num_threads = 1;
};

using ParallelBody = void (*)(void* captures, int64_t begin, int64_t end);

// Runs body(captures, b, e) over [min, min + extent) split into one contiguous chunk per thread.
extern "C" void ts_parallel_for(void* runtime, ParallelBody body, void* captures, int64_t min,
                                int64_t extent) {
  const auto* rt = static_cast<const HostRuntime*>(runtime);
  if (extent <= 0) return;
  const int64_t chunks = std::min<int64_t>(extent, std::max(1, rt->num_threads));
  if (chunks <= 1) {
    body(captures, min, min + extent);
    return;
  }
  internal::ThreadPool::Shared().ParallelFor(chunks, [&](int64_t c) {
    const int64_t begin = min + extent * c / chunks;
    const int64_t end = min + extent * (c + 1) / chunks;
    if (begin < end) body(captures, begin, end);
  });
}

mlir::Type PtrType(mlir::MLIRContext* ctx) { return mlir::LLVM::LLVMPointerType::get(ctx); }

// A memref over `ptr` (an !llvm.ptr to a dense row-major buffer of `decl`): its descriptor is
// built in the LLVM dialect and cast to the memref type; the memref-to-LLVM conversion folds the
// cast pair away.
mlir::Value MemrefFromPointer(mlir::OpBuilder& b, mlir::Location loc, mlir::Value ptr,
                              const ir::BufferDecl& decl) {
  mlir::MLIRContext* ctx = b.getContext();
  const int64_t rank = static_cast<int64_t>(decl.shape.size());
  const mlir::Type i64 = b.getI64Type();
  std::vector<mlir::Type> fields = {PtrType(ctx), PtrType(ctx), i64};
  if (rank > 0) {
    fields.push_back(mlir::LLVM::LLVMArrayType::get(i64, rank));
    fields.push_back(mlir::LLVM::LLVMArrayType::get(i64, rank));
  }
  auto desc_type = mlir::LLVM::LLVMStructType::getLiteral(ctx, fields);
  mlir::Value desc = mlir::LLVM::PoisonOp::create(b, loc, desc_type);
  auto c64 = [&](int64_t v) { return mlir::LLVM::ConstantOp::create(b, loc, i64, v); };
  desc = mlir::LLVM::InsertValueOp::create(b, loc, desc, ptr, llvm::ArrayRef<int64_t>{0});
  desc = mlir::LLVM::InsertValueOp::create(b, loc, desc, ptr, llvm::ArrayRef<int64_t>{1});
  desc = mlir::LLVM::InsertValueOp::create(b, loc, desc, c64(0), llvm::ArrayRef<int64_t>{2});
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    desc = mlir::LLVM::InsertValueOp::create(b, loc, desc, c64(decl.shape[d]),
                                             llvm::ArrayRef<int64_t>{3, d});
    desc =
        mlir::LLVM::InsertValueOp::create(b, loc, desc, c64(stride), llvm::ArrayRef<int64_t>{4, d});
    stride *= decl.shape[d];
  }
  auto type = mlir::MemRefType::get(decl.shape, internal::StorageType(ctx, decl.dtype));
  return mlir::UnrealizedConversionCastOp::create(b, loc, mlir::TypeRange{type},
                                                  mlir::ValueRange{desc})
      .getResult(0);
}

// Loads slot `i` (8 bytes) of a pointer-sized slot array as `type` (i64 or ptr).
mlir::Value LoadSlot(mlir::OpBuilder& b, mlir::Location loc, mlir::Value array, int64_t i,
                     mlir::Type type) {
  auto gep = mlir::LLVM::GEPOp::create(b, loc, PtrType(b.getContext()), b.getI64Type(), array,
                                       llvm::ArrayRef<mlir::LLVM::GEPArg>{static_cast<int32_t>(i)});
  return mlir::LLVM::LoadOp::create(b, loc, type, gep, 8);
}

void StoreSlot(mlir::OpBuilder& b, mlir::Location loc, mlir::Value array, int64_t i,
               mlir::Value v) {
  auto gep = mlir::LLVM::GEPOp::create(b, loc, PtrType(b.getContext()), b.getI64Type(), array,
                                       llvm::ArrayRef<mlir::LLVM::GEPArg>{static_cast<int32_t>(i)});
  mlir::LLVM::StoreOp::create(b, loc, v, gep, 8);
}

// Creates `void name(<params>)` at the end of `module` with an entry block ending in a return;
// leaves `b` before the return.
mlir::Block* AddFunction(mlir::OpBuilder& b, mlir::ModuleOp module, const std::string& name,
                         llvm::ArrayRef<mlir::Type> params) {
  mlir::MLIRContext* ctx = module.getContext();
  b.setInsertionPointToEnd(module.getBody());
  auto type = mlir::LLVM::LLVMFunctionType::get(mlir::LLVM::LLVMVoidType::get(ctx), params);
  auto fn = mlir::LLVM::LLVMFuncOp::create(b, module.getLoc(), name, type);
  mlir::Block* entry = fn.addEntryBlock(b);
  b.setInsertionPointToEnd(entry);
  auto ret = mlir::LLVM::ReturnOp::create(b, module.getLoc(), mlir::ValueRange{});
  b.setInsertionPoint(ret);
  return entry;
}

void FreeHeapBuffers(mlir::OpBuilder& b, mlir::Location loc, const Emitter& em) {
  for (mlir::Value v : em.heap_buffers()) mlir::memref::DeallocOp::create(b, loc, v);
}

class HostModuleBuilder {
 public:
  HostModuleBuilder(mlir::ModuleOp module, const ModulePlan& plan,
                    const HostCompileOptions& options)
      : module_(module), plan_(plan), options_(options) {}

  absl::Status Build() {
    mlir::MLIRContext* ctx = module_.getContext();
    mlir::OpBuilder b(ctx);
    const mlir::Location loc = module_.getLoc();
    b.setInsertionPointToEnd(module_.getBody());
    auto pf_type = mlir::LLVM::LLVMFunctionType::get(
        mlir::LLVM::LLVMVoidType::get(ctx),
        {PtrType(ctx), PtrType(ctx), PtrType(ctx), b.getI64Type(), b.getI64Type()});
    mlir::LLVM::LLVMFuncOp::create(b, loc, internal::kParallelForSymbol, pf_type);

    // One kernel: the entry runs it. Several: each becomes a non-inlined function the entry
    // calls in order, so LLVM optimizes functions of one kernel's size (its cost grows faster
    // than linearly with function size).
    if (plan_.kernels.size() == 1) return EmitKernel(plan_.name, plan_.kernels[0]);
    std::vector<std::string> names;
    for (size_t k = 0; k < plan_.kernels.size(); ++k) {
      names.push_back(absl::StrCat(plan_.name, "_k", k));
      RETURN_IF_ERROR(EmitKernel(names.back(), plan_.kernels[k]));
      module_.lookupSymbol<mlir::LLVM::LLVMFuncOp>(names.back()).setNoInline(true);
    }
    mlir::Block* entry = AddFunction(b, module_, plan_.name, {PtrType(ctx), PtrType(ctx)});
    for (const std::string& name : names) {
      mlir::LLVM::CallOp::create(b, loc, mlir::TypeRange{}, name,
                                 mlir::ValueRange{entry->getArgument(0), entry->getArgument(1)});
    }
    return absl::OkStatus();
  }

 private:
  // `void name(ptr args, ptr runtime)` running one kernel statement.
  absl::Status EmitKernel(const std::string& name, const internal::KernelPlan& kernel) {
    mlir::MLIRContext* ctx = module_.getContext();
    mlir::OpBuilder b(ctx);
    const mlir::Location loc = module_.getLoc();
    mlir::Block* entry = AddFunction(b, module_, name, {PtrType(ctx), PtrType(ctx)});
    runtime_ = entry->getArgument(1);
    Emitter em(b, loc, Config(), entry);
    em.set_parallel_hook(
        [this](Emitter& e, const ir::ForNode* op) { return OutlineParallel(e, op); });
    for (size_t i = 0; i < plan_.args.size(); ++i) {
      mlir::Value p =
          LoadSlot(b, loc, entry->getArgument(0), static_cast<int64_t>(i), PtrType(ctx));
      em.BindBuffer(plan_.args[i].buffer, MemrefFromPointer(b, loc, p, plan_.args[i].buffer));
    }
    RETURN_IF_ERROR(em.EmitStmt(kernel.body));
    FreeHeapBuffers(b, loc, em);
    return absl::OkStatus();
  }

  internal::EmitConfig Config() const {
    internal::EmitConfig config;
    config.target = internal::EmitTarget::kHost;
    config.vectorize = options_.vectorize;
    config.max_unroll = options_.max_unroll;
    config.unroll_budget = options_.unroll_budget;
    config.contract = options_.fma_contraction;
    return config;
  }

  // Emits a call of ts_parallel_for at the emitter's insertion point with every variable and
  // buffer in scope packed into 8-byte slots, and the outlined body as a new function.
  absl::Status OutlineParallel(Emitter& em, const ir::ForNode* op) {
    mlir::MLIRContext* ctx = module_.getContext();
    mlir::OpBuilder& b = em.builder();
    const mlir::Location loc = em.loc();
    const std::vector<internal::VarBinding> vars = em.vars();
    const std::vector<internal::BufferBinding> bufs = em.buffers();
    const int64_t slots = std::max<int64_t>(1, vars.size() + bufs.size());
    mlir::Value captures;
    {
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(em.alloca_block());
      mlir::Value n = mlir::LLVM::ConstantOp::create(b, loc, b.getI64Type(), slots);
      captures = mlir::LLVM::AllocaOp::create(b, loc, PtrType(ctx), b.getI64Type(), n, 8);
    }
    int64_t slot = 0;
    for (const internal::VarBinding& v : vars) StoreSlot(b, loc, captures, slot++, v.value);
    for (const internal::BufferBinding& buf : bufs) {
      mlir::Value idx = mlir::memref::ExtractAlignedPointerAsIndexOp::create(
          b, loc, b.getIndexType(), buf.memref);
      mlir::Value addr = mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), idx);
      StoreSlot(b, loc, captures, slot++, addr);
    }
    ASSIGN_OR_RETURN(mlir::Value min, em.EmitExpr(op->min));
    ASSIGN_OR_RETURN(mlir::Value extent, em.EmitExpr(op->extent));
    const std::string name = absl::StrCat(plan_.name, "_par", num_outlined_++);
    mlir::Value fn = mlir::LLVM::AddressOfOp::create(b, loc, PtrType(ctx), name);
    mlir::LLVM::CallOp::create(b, loc, mlir::TypeRange{}, internal::kParallelForSymbol,
                               mlir::ValueRange{runtime_, fn, captures, min, extent});

    mlir::OpBuilder fb(ctx);
    mlir::Block* entry =
        AddFunction(fb, module_, name, {PtrType(ctx), fb.getI64Type(), fb.getI64Type()});
    Emitter sub(fb, loc, Config(), entry);
    sub.set_in_parallel(true);
    mlir::Value packed = entry->getArgument(0);
    slot = 0;
    for (const internal::VarBinding& v : vars) {
      auto it = em.ranges().find(v.name);
      std::optional<ir::Interval> range;
      if (it != em.ranges().end()) range = it->second;
      sub.BindVar(v.name, LoadSlot(fb, loc, packed, slot++, fb.getI64Type()), range);
    }
    for (const internal::BufferBinding& buf : bufs) {
      mlir::Value addr = LoadSlot(fb, loc, packed, slot++, fb.getI64Type());
      mlir::Value p = mlir::LLVM::IntToPtrOp::create(fb, loc, PtrType(ctx), addr, nullptr);
      sub.BindBuffer(buf.decl, MemrefFromPointer(fb, loc, p, buf.decl));
    }
    auto loop =
        mlir::scf::ForOp::create(fb, loc, entry->getArgument(1), entry->getArgument(2),
                                 mlir::arith::ConstantOp::create(fb, loc, fb.getI64IntegerAttr(1)));
    {
      mlir::OpBuilder::InsertionGuard guard(fb);
      fb.setInsertionPoint(loop.getBody()->getTerminator());
      RETURN_IF_ERROR(sub.EmitLoopBody(op, loop.getInductionVar()));
    }
    FreeHeapBuffers(fb, loc, sub);
    return absl::OkStatus();
  }

  mlir::ModuleOp module_;
  const ModulePlan& plan_;
  const HostCompileOptions& options_;
  mlir::Value runtime_;
  int num_outlined_ = 0;
};

}  // namespace

namespace internal {

absl::Status BuildHostModule(mlir::ModuleOp module, const ModulePlan& plan,
                             const HostCompileOptions& options) {
  HostModuleBuilder builder(module, plan, options);
  return builder.Build();
}

absl::Status LowerHostModule(mlir::ModuleOp module, DiagnosticCapture& diag) {
  RETURN_IF_ERROR(internal::ApproximateMath(module, std::nullopt, diag));
  // bfloat16 conversions as integer arithmetic (x86 has no general bf16 truncation); only the
  // conversions touching bf16 are visited.
  std::vector<mlir::Operation*> bf16_ops;
  module.walk([&](mlir::Operation* op) {
    if (!mlir::isa<mlir::arith::ExtFOp, mlir::arith::TruncFOp>(op)) return;
    auto is_bf16 = [](mlir::Type t) { return mlir::getElementTypeOrSelf(t).isBF16(); };
    if (is_bf16(op->getOperand(0).getType()) || is_bf16(op->getResult(0).getType())) {
      bf16_ops.push_back(op);
    }
  });
  if (!bf16_ops.empty()) {
    mlir::RewritePatternSet patterns(module.getContext());
    mlir::arith::populateExpandBFloat16Patterns(patterns);
    mlir::GreedyRewriteConfig config;
    config.setStrictness(mlir::GreedyRewriteStrictness::ExistingAndNewOps);
    if (mlir::failed(mlir::applyOpPatternsGreedily(bf16_ops, std::move(patterns), config))) {
      return diag.Error("bfloat16 expansion did not converge");
    }
  }
  // One dialect conversion for arith, math, memref, vector, cf (their ConvertToLLVM interfaces
  // are registered in the context), without rollback support (faster).
  RETURN_IF_ERROR(internal::LowerScfToControlFlow(module, diag));
  mlir::PassManager pm(module.getContext());
  mlir::ConvertToLLVMPassOptions to_llvm;
  to_llvm.allowPatternRollback = false;
  pm.addPass(mlir::createConvertToLLVMPass(to_llvm));
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  if (mlir::failed(pm.run(module))) return diag.Error("lowering to the LLVM dialect failed");
  return absl::OkStatus();
}

}  // namespace internal

namespace {

class JitKernel : public HostKernel {
 public:
  absl::Status Run(const std::vector<void*>& buffers) override {
    if (static_cast<int>(buffers.size()) != num_params_) {
      return absl::InvalidArgumentError(absl::StrCat("kernel '", name_, "' takes ", num_params_,
                                                     " buffers, got ", buffers.size()));
    }
    for (int i = 0; i < num_params_; ++i) pointers_[i] = buffers[i];
    entry_(pointers_.data(), &runtime_);
    return absl::OkStatus();
  }
  const std::vector<KernelArg>& args() const override { return args_; }
  double compile_ms() const override { return compile_ms_; }
  const std::string& mlir() const override { return mlir_; }
  const std::string& llvm_ir() const override { return llvm_ir_; }

  ~JitKernel() override {
    for (void* p : scratch_) std::free(p);
  }

  std::string name_;
  std::vector<KernelArg> args_;
  int num_params_ = 0;
  std::vector<void*> pointers_;  // params then scratch
  std::vector<void*> scratch_;
  HostRuntime runtime_;
  void (*entry_)(void**, void*) = nullptr;
  double compile_ms_ = 0;
  std::string mlir_;
  std::string llvm_ir_;
  std::unique_ptr<mlir::MLIRContext> context_;
  std::unique_ptr<mlir::ExecutionEngine> engine_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HostKernel>> CompileForHost(const ir::LoopNest& nest,
                                                           const HostCompileOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(ModulePlan plan, internal::PlanHostModule(nest));
  // A prefix keeps the JIT's symbols apart from the C library's (a nest named "tanh" or "free").
  plan.name = "ts_host_" + plan.name;
  internal::InitializeLlvmTargets();
  auto kernel = std::make_unique<JitKernel>();
  kernel->context_ = internal::MakeContext();
  mlir::MLIRContext* ctx = kernel->context_.get();
  DiagnosticCapture diag(ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module(mlir::ModuleOp::create(mlir::UnknownLoc::get(ctx)));
  RETURN_IF_ERROR(internal::BuildHostModule(*module, plan, options));
  if (mlir::failed(mlir::verify(*module))) return diag.Error("emitted MLIR does not verify");
  if (options.keep_mlir) kernel->mlir_ = internal::ToText(*module);
  RETURN_IF_ERROR(internal::LowerHostModule(*module, diag));

  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return absl::InternalError("cannot detect the host CPU for the JIT");
  auto tm = jtmb->createTargetMachine();
  if (!tm) return absl::InternalError("cannot create the host target machine");
  const int opt = std::clamp(options.opt_level, 0, 3);
  std::function<llvm::Error(llvm::Module*)> optimize =
      mlir::makeOptimizingTransformer(opt, 0, tm->get());
  std::function<llvm::Error(llvm::Module*)> transformer = [&](llvm::Module* m) -> llvm::Error {
    if (llvm::Error e = optimize(m)) return e;
    if (options.keep_llvm_ir) {
      llvm::raw_string_ostream os(kernel->llvm_ir_);
      m->print(os, nullptr);
    }
    return llvm::Error::success();
  };
  mlir::ExecutionEngineOptions engine_options;
  engine_options.transformer = transformer;
  engine_options.jitCodeGenOptLevel = static_cast<llvm::CodeGenOptLevel>(opt);
  engine_options.enableGDBNotificationListener = false;
  engine_options.enablePerfNotificationListener = false;
  auto engine = mlir::ExecutionEngine::create(*module, engine_options);
  if (!engine) {
    return absl::InternalError(
        absl::StrCat("JIT compilation failed: ", llvm::toString(engine.takeError())));
  }
  kernel->engine_ = std::move(*engine);
  kernel->engine_->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    map[interner(internal::kParallelForSymbol)] = {
        llvm::orc::ExecutorAddr::fromPtr(&ts_parallel_for), llvm::JITSymbolFlags::Exported};
    return map;
  });
  kernel->engine_->initialize();
  auto entry = kernel->engine_->lookup(plan.name);
  if (!entry) {
    return absl::InternalError(absl::StrCat("JIT lookup of '", plan.name,
                                            "' failed: ", llvm::toString(entry.takeError())));
  }
  kernel->entry_ = reinterpret_cast<void (*)(void**, void*)>(*entry);
  kernel->name_ = plan.name;
  kernel->args_ = plan.args;
  kernel->num_params_ = static_cast<int>(nest.params.size());
  kernel->pointers_.assign(plan.args.size(), nullptr);
  for (size_t i = nest.params.size(); i < plan.args.size(); ++i) {
    const size_t bytes = static_cast<size_t>((plan.args[i].bytes() + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, std::max<size_t>(bytes, 64));
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate ", bytes, " bytes for scratch buffer '", plan.args[i].buffer.name, "'"));
    }
    kernel->scratch_.push_back(p);
    kernel->pointers_[i] = p;
  }
  kernel->runtime_.num_threads =
      options.num_threads > 0 ? options.num_threads
                              : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  kernel->compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return std::unique_ptr<HostKernel>(std::move(kernel));
}

}  // namespace tilesearch::codegen
