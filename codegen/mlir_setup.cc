#include "codegen/mlir_setup.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/fast_math.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tilesearch::codegen::internal {

std::unique_ptr<mlir::MLIRContext> MakeContext() {
  mlir::DialectRegistry registry;
  registry.insert<mlir::arith::ArithDialect, mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::gpu::GPUDialect, mlir::index::IndexDialect, mlir::LLVM::LLVMDialect,
                  mlir::NVVM::NVVMDialect, mlir::math::MathDialect, mlir::memref::MemRefDialect,
                  mlir::scf::SCFDialect, mlir::ub::UBDialect, mlir::vector::VectorDialect>();
  mlir::arith::registerConvertArithToLLVMInterface(registry);
  mlir::cf::registerConvertControlFlowToLLVMInterface(registry);
  mlir::registerConvertFuncToLLVMInterface(registry);
  mlir::index::registerConvertIndexToLLVMInterface(registry);
  mlir::registerConvertMathToLLVMInterface(registry);
  mlir::registerConvertMemRefToLLVMInterface(registry);
  mlir::registerConvertNVVMToLLVMInterface(registry);
  mlir::ub::registerConvertUBToLLVMInterface(registry);
  mlir::vector::registerConvertVectorToLLVMInterface(registry);
  mlir::NVVM::registerConvertGpuToNVVMInterface(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  auto ctx = std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();
  return ctx;
}

mlir::MLIRContext* ThreadContext() {
  thread_local std::unique_ptr<mlir::MLIRContext> ctx;
  thread_local int uses = 0;
  if (!ctx || ++uses > 256) {
    ctx.reset();
    ctx = MakeContext();
    uses = 1;
  }
  return ctx.get();
}

DiagnosticCapture::DiagnosticCapture(mlir::MLIRContext* ctx)
    : handler_(ctx, [this](mlir::Diagnostic& d) {
        if (d.getSeverity() == mlir::DiagnosticSeverity::Error ||
            d.getSeverity() == mlir::DiagnosticSeverity::Warning) {
          if (!text_.empty()) text_ += "; ";
          text_ += d.str();
          for (const mlir::Diagnostic& note : d.getNotes()) {
            text_ += " (" + note.str() + ")";
          }
        }
        return mlir::success();
      }) {}

absl::Status DiagnosticCapture::Error(const std::string& what) const {
  return absl::InternalError(
      absl::StrCat(what, ": ", text_.empty() ? std::string("no diagnostics") : text_));
}

absl::Status LowerScfToControlFlow(mlir::Operation* root, DiagnosticCapture& diag) {
  mlir::MLIRContext* ctx = root->getContext();
  mlir::RewritePatternSet patterns(ctx);
  mlir::populateSCFToControlFlowConversionPatterns(patterns);
  llvm::DenseMap<mlir::OperationName, std::vector<const mlir::RewritePattern*>> by_root;
  for (const std::unique_ptr<mlir::RewritePattern>& p : patterns.getNativePatterns()) {
    if (const std::optional<mlir::OperationName> name = p->getRootKind()) {
      by_root[*name].push_back(p.get());
    }
  }
  for (auto& entry : by_root) {
    std::vector<const mlir::RewritePattern*>& list = entry.second;
    std::stable_sort(list.begin(), list.end(), [](const auto* a, const auto* b) {
      return a->getBenefit().getBenefit() > b->getBenefit().getBenefit();
    });
  }
  // Pre-order, reversed: the last operation of a block comes first, and an operation nested in
  // another before the one that holds it (lowering the outer one moves the inner one's block
  // along, not op by op).
  std::vector<mlir::Operation*> ops;
  root->walk<mlir::WalkOrder::PreOrder>([&](mlir::Operation* op) {
    if (by_root.count(op->getName())) ops.push_back(op);
  });
  mlir::PatternRewriter rewriter(ctx);
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    for (const mlir::RewritePattern* p : by_root[(*it)->getName()]) {
      rewriter.setInsertionPoint(*it);
      if (mlir::succeeded(p->matchAndRewrite(*it, rewriter))) break;
    }
  }
  // What is left (an operation no pattern matched, or new scf operations a lowering made, as
  // scf.parallel's loops) goes through the pass, which reports what it cannot lower.
  bool left = false;
  root->walk([&](mlir::Operation* op) {
    if (op->getDialect() != nullptr && op->getDialect()->getNamespace() == "scf" &&
        !mlir::isa<mlir::scf::YieldOp>(op)) {
      left = true;
    }
  });
  if (!left) return absl::OkStatus();
  mlir::PassManager pm(ctx, root->getName().getStringRef());
  pm.addPass(mlir::createSCFToControlFlowPass());
  if (mlir::failed(pm.run(root))) return diag.Error("lowering scf to cf failed");
  return absl::OkStatus();
}

absl::Status ApproximateMath(mlir::Operation* root, std::optional<Exp2Log2Source> fast_math,
                             DiagnosticCapture& diag) {
  // The cuda target takes the float32 expansions on the hardware's ex2 / lg2: a memory-bound gelu
  // or softplus is issue-bound on the ~60 instructions per element of the piecewise
  // approximations below (bench/NOTES.md). The host keeps those.
  if (fast_math) ExpandFastMath(root, *fast_math);
  auto approximated = [](llvm::StringRef name) {
    return name == "math.exp" || name == "math.log" || name == "math.tanh" || name == "math.erf" ||
           name == "math.exp2" || name == "math.log2" || name == "math.log1p" ||
           name == "math.expm1";
  };
  // Only the math ops and what their rewrites create are visited (a whole-module greedy rewrite
  // also folds every other op, and costs more than the rewrites themselves).
  std::vector<mlir::Operation*> ops;
  root->walk([&](mlir::Operation* op) {
    if (approximated(op->getName().getStringRef())) ops.push_back(op);
  });
  if (ops.empty()) return absl::OkStatus();
  // The program's own divisions stay IEEE; those the approximations create (the rational erf
  // and tanh) are marked afn / arcp below.
  std::unordered_set<mlir::Operation*> own_divisions;
  root->walk([&](mlir::arith::DivFOp op) { own_divisions.insert(op.getOperation()); });
  mlir::RewritePatternSet patterns(root->getContext());
  mlir::populateMathPolynomialApproximationPatterns(patterns, approximated);
  mlir::GreedyRewriteConfig config;
  config.setStrictness(mlir::GreedyRewriteStrictness::ExistingAndNewOps);
  if (mlir::failed(mlir::applyOpPatternsGreedily(ops, std::move(patterns), config))) {
    return diag.Error("math approximation did not converge");
  }
  // An approximation's P(x) / Q(x) needs no correctly rounded quotient: the approximation itself
  // is a few ulp off. With afn the NVPTX backend selects div.approx.f32 (a reciprocal and a
  // multiply) instead of div.rn.f32, whose SASS is a Newton sequence with a slow-path branch; in a
  // memory-bound gelu that division was a large share of the issue slots (bench/NOTES.md).
  const auto fast = mlir::arith::FastMathFlags::afn | mlir::arith::FastMathFlags::arcp;
  root->walk([&](mlir::arith::DivFOp op) {
    if (!own_divisions.contains(op.getOperation())) {
      op.setFastmathAttr(mlir::arith::FastMathFlagsAttr::get(op.getContext(), fast));
    }
  });
  return absl::OkStatus();
}

void InitializeLlvmTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

std::string ToText(mlir::Operation* op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

}  // namespace tilesearch::codegen::internal
