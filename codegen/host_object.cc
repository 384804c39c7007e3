// CompileHostObject: the host JIT's module (host_module.h) compiled ahead of time into a
// relocatable object. Every function of the nest becomes internal; a C entry with one pointer per
// param packs them into the slot array the nest's entry reads, allocates the scratch buffers and
// calls it; the parallel-for runtime call gets a weak serial definition so the object links with
// nothing but the C library.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "codegen/codegen.h"
#include "codegen/host_module.h"
#include "codegen/kernel_plan.h"
#include "codegen/mlir_setup.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Target/LLVMIR/Export.h"

namespace tilesearch::codegen {
namespace {

bool IsCIdentifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Gives the (declared) parallel-for runtime call its public name and a weak serial body:
// body(captures, min, min + extent) when extent > 0.
void DefineSerialParallelFor(llvm::Module& m) {
  llvm::Function* pf = m.getFunction(internal::kParallelForSymbol);
  if (pf == nullptr) return;  // no parallel loop
  pf->setName(kHostObjectParallelFor);
  pf->setLinkage(llvm::GlobalValue::WeakAnyLinkage);
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", pf));
  llvm::BasicBlock* run = llvm::BasicBlock::Create(ctx, "run", pf);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "done", pf);
  llvm::Value* body = pf->getArg(1);
  llvm::Value* captures = pf->getArg(2);
  llvm::Value* min = pf->getArg(3);
  llvm::Value* extent = pf->getArg(4);
  b.CreateCondBr(b.CreateICmpSGT(extent, b.getInt64(0)), run, done);
  b.SetInsertPoint(run);
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  auto* body_type =
      llvm::FunctionType::get(b.getVoidTy(), {ptr, b.getInt64Ty(), b.getInt64Ty()}, false);
  b.CreateCall(body_type, body, {captures, min, b.CreateAdd(min, extent)});
  b.CreateBr(done);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
}

// `i32 entry(ptr p0, ..., ptr pN-1)`: slot array of params then scratch (aligned_alloc'd, 64-byte
// aligned and rounded), the nest's entry `inner(slots, null)`, scratch freed; 1 when an
// allocation failed.
void AddCEntry(llvm::Module& m, llvm::Function* inner, const std::string& entry_name,
               const std::vector<KernelArg>& args, int num_params) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Type* i64 = b.getInt64Ty();
  std::vector<llvm::Type*> params(num_params, ptr);
  auto* type = llvm::FunctionType::get(b.getInt32Ty(), params, false);
  llvm::Function* entry =
      llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, entry_name, m);
  entry->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::FunctionCallee aligned_alloc =
      m.getOrInsertFunction("aligned_alloc", llvm::FunctionType::get(ptr, {i64, i64}, false));
  llvm::FunctionCallee free_fn =
      m.getOrInsertFunction("free", llvm::FunctionType::get(b.getVoidTy(), {ptr}, false));

  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", entry));
  const int64_t slots = std::max<int64_t>(1, static_cast<int64_t>(args.size()));
  llvm::Value* array = b.CreateAlloca(ptr, b.getInt64(slots), "slots");
  auto slot = [&](int64_t i) { return b.CreateConstInBoundsGEP1_64(ptr, array, i); };
  for (int i = 0; i < num_params; ++i) b.CreateStore(entry->getArg(i), slot(i));
  std::vector<llvm::Value*> scratch;
  llvm::Value* all_ok = b.getTrue();
  for (size_t i = num_params; i < args.size(); ++i) {
    const int64_t bytes = std::max<int64_t>(64, (args[i].bytes() + 63) / 64 * 64);
    llvm::Value* p = b.CreateCall(aligned_alloc, {b.getInt64(64), b.getInt64(bytes)});
    scratch.push_back(p);
    b.CreateStore(p, slot(static_cast<int64_t>(i)));
    all_ok = b.CreateAnd(all_ok, b.CreateIsNotNull(p));
  }
  auto free_scratch = [&] {
    for (llvm::Value* p : scratch) b.CreateCall(free_fn, {p});
  };
  llvm::BasicBlock* run = llvm::BasicBlock::Create(ctx, "run", entry);
  llvm::BasicBlock* fail = llvm::BasicBlock::Create(ctx, "fail", entry);
  b.CreateCondBr(all_ok, run, fail);
  b.SetInsertPoint(fail);
  free_scratch();  // free(NULL) is a no-op
  b.CreateRet(b.getInt32(1));
  b.SetInsertPoint(run);
  b.CreateCall(inner, {array, llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx, 0))});
  free_scratch();
  b.CreateRet(b.getInt32(0));
}

}  // namespace

absl::StatusOr<HostObject> CompileHostObject(const ir::LoopNest& nest,
                                             const HostObjectOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (!IsCIdentifier(options.entry_name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("entry name '", options.entry_name, "' is not a C identifier"));
  }
  if (options.entry_name == kHostObjectParallelFor) {
    return absl::InvalidArgumentError(
        absl::StrCat("entry name '", options.entry_name, "' is reserved"));
  }
  ASSIGN_OR_RETURN(internal::ModulePlan plan, internal::PlanHostModule(nest));
  // Internal symbols derived from the entry name cannot collide with it (or with another
  // object's: they become internal below).
  plan.name = options.entry_name + "_impl";
  internal::InitializeLlvmTargets();
  std::unique_ptr<mlir::MLIRContext> context = internal::MakeContext();
  mlir::MLIRContext* ctx = context.get();
  internal::DiagnosticCapture diag(ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module(mlir::ModuleOp::create(mlir::UnknownLoc::get(ctx)));
  HostCompileOptions host_options;
  host_options.opt_level = options.opt_level;
  host_options.vectorize = options.vectorize;
  host_options.max_unroll = options.max_unroll;
  RETURN_IF_ERROR(internal::BuildHostModule(*module, plan, host_options));
  if (mlir::failed(mlir::verify(*module))) return diag.Error("emitted MLIR does not verify");
  RETURN_IF_ERROR(internal::LowerHostModule(*module, diag));

  const int opt = std::clamp(options.opt_level, 0, 3);
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) {
    return absl::InternalError(
        absl::StrCat("cannot detect the host CPU: ", llvm::toString(jtmb.takeError())));
  }
  jtmb->setRelocationModel(llvm::Reloc::PIC_);
  jtmb->setCodeGenOptLevel(static_cast<llvm::CodeGenOptLevel>(opt));
  auto tm = jtmb->createTargetMachine();
  if (!tm) {
    return absl::InternalError(
        absl::StrCat("cannot create the host target machine: ", llvm::toString(tm.takeError())));
  }

  llvm::LLVMContext llvm_ctx;
  std::unique_ptr<llvm::Module> llvm_module =
      mlir::translateModuleToLLVMIR(*module, llvm_ctx, options.entry_name);
  if (!llvm_module) return diag.Error("translation to LLVM IR failed");
  llvm_module->setTargetTriple((*tm)->getTargetTriple());
  llvm_module->setDataLayout((*tm)->createDataLayout());
  for (llvm::Function& f : *llvm_module) {
    if (!f.isDeclaration()) f.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  llvm::Function* inner = llvm_module->getFunction(plan.name);
  CHECK(inner != nullptr) << "host module has no entry '" << plan.name << "'";
  DefineSerialParallelFor(*llvm_module);
  const int num_params = static_cast<int>(nest.params.size());
  AddCEntry(*llvm_module, inner, options.entry_name, plan.args, num_params);

  if (llvm::Error e = mlir::makeOptimizingTransformer(opt, 0, tm->get())(llvm_module.get())) {
    return absl::InternalError(
        absl::StrCat("LLVM optimization failed: ", llvm::toString(std::move(e))));
  }
  llvm::SmallString<0> bytes;
  {
    llvm::raw_svector_ostream os(bytes);
    llvm::legacy::PassManager codegen;
    if ((*tm)->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
      return absl::InternalError("the host target cannot emit object files");
    }
    codegen.run(*llvm_module);
  }

  HostObject out;
  out.bytes = std::string(bytes.str());
  out.entry_name = options.entry_name;
  out.args = plan.args;
  out.num_params = num_params;
  out.target_triple = (*tm)->getTargetTriple().str();
  out.cpu = (*tm)->getTargetCPU().str();
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tilesearch::codegen
