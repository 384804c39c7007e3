#include "codegen/fast_math_host.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/fast_math.h"
#include "codegen/mlir_setup.h"
#include "llvm/Support/Error.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

namespace tilesearch::codegen {
namespace {

constexpr char kName[] = "ts_fast_math_f";

class JitFunction : public FastMathHostFunction {
 public:
  float operator()(float x) const override { return fn_(x); }

  std::unique_ptr<mlir::MLIRContext> context_;
  std::unique_ptr<mlir::ExecutionEngine> engine_;
  float (*fn_)(float) = nullptr;
};

// func @ts_fast_math_f(%x: f32) -> f32 { return f(%x) }
void BuildFunction(mlir::ModuleOp module, FastMathFunction f) {
  mlir::OpBuilder b(module.getBodyRegion());
  const mlir::Location loc = b.getUnknownLoc();
  const mlir::Type f32 = b.getF32Type();
  auto func = mlir::func::FuncOp::create(b, loc, kName, b.getFunctionType({f32}, {f32}));
  mlir::Block* body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  const mlir::Value x = body->getArgument(0);
  mlir::Value r;
  switch (f) {
    case FastMathFunction::kErf:
      r = mlir::math::ErfOp::create(b, loc, x);
      break;
    case FastMathFunction::kExp:
      r = mlir::math::ExpOp::create(b, loc, x);
      break;
    case FastMathFunction::kLog:
      r = mlir::math::LogOp::create(b, loc, x);
      break;
    case FastMathFunction::kLog1p:
      r = mlir::math::Log1pOp::create(b, loc, x);
      break;
    case FastMathFunction::kLogOnePlus: {
      mlir::Value one = mlir::arith::ConstantOp::create(b, loc, b.getFloatAttr(f32, 1.0));
      r = mlir::math::LogOp::create(b, loc, mlir::arith::AddFOp::create(b, loc, one, x));
      break;
    }
  }
  mlir::func::ReturnOp::create(b, loc, r);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FastMathHostFunction>> CompileFastMathForHost(FastMathFunction f) {
  internal::InitializeLlvmTargets();
  auto fn = std::make_unique<JitFunction>();
  fn->context_ = internal::MakeContext();
  mlir::MLIRContext* ctx = fn->context_.get();
  internal::DiagnosticCapture diag(ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module(mlir::ModuleOp::create(mlir::UnknownLoc::get(ctx)));
  BuildFunction(*module, f);
  internal::ExpandFastMath(*module, internal::Exp2Log2Source::kMathOps);
  if (mlir::failed(mlir::verify(*module))) return diag.Error("fast math expansion does not verify");
  // No ApproximateMath here: math.exp2 / log2 must stay the C library's.
  mlir::PassManager pm(ctx);
  pm.addPass(mlir::createConvertToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  if (mlir::failed(pm.run(*module))) return diag.Error("lowering to the LLVM dialect failed");
  mlir::ExecutionEngineOptions options;
  options.enableGDBNotificationListener = false;
  options.enablePerfNotificationListener = false;
  auto engine = mlir::ExecutionEngine::create(*module, options);
  if (!engine) {
    return absl::InternalError(
        absl::StrCat("JIT compilation failed: ", llvm::toString(engine.takeError())));
  }
  fn->engine_ = std::move(*engine);
  auto entry = fn->engine_->lookup(kName);
  if (!entry) {
    return absl::InternalError(
        absl::StrCat("JIT lookup failed: ", llvm::toString(entry.takeError())));
  }
  fn->fn_ = reinterpret_cast<float (*)(float)>(*entry);
  return fn;
}

}  // namespace tilesearch::codegen
