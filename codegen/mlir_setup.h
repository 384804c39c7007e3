// Internal to codegen: MLIR context creation (dialects, conversion interfaces and LLVM IR
// translations registered once per context), MLIR diagnostics captured into absl::Status, the
// lowering steps both targets share, and LLVM target initialization.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "codegen/fast_math.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

namespace tilesearch::codegen::internal {

/// A fresh context (single-threaded: codegen parallelism is across candidates) with every dialect
/// and translation codegen uses loaded.
std::unique_ptr<mlir::MLIRContext> MakeContext();

/// This thread's reusable context for compilations that leave nothing in it (CompileToPtx):
/// saves the dialect loading (~1.4 ms); replaced every 256 uses so uniqued attributes and types
/// do not accumulate without bound.
mlir::MLIRContext* ThreadContext();

/// Collects the diagnostics emitted on a context while alive (a scoped handler).
class DiagnosticCapture {
 public:
  explicit DiagnosticCapture(mlir::MLIRContext* ctx);
  /// kInternal "<what>: <diagnostics>" (the diagnostics joined by "; ").
  absl::Status Error(const std::string& what) const;

 private:
  std::string text_;
  mlir::ScopedDiagnosticHandler handler_;
};

/// Replaces math.exp / log / tanh / erf (and what their expansions use) by MLIR's float32
/// polynomial approximations. With `fast_math` (the cuda target: kNvvmApprox), the float32 erf /
/// exp / log / log1p (and log(1 + y)) take ExpandFastMath's forms first (codegen/fast_math.h).
/// Errors: kInternal with the diagnostics.
absl::Status ApproximateMath(mlir::Operation* root, std::optional<Exp2Log2Source> fast_math,
                             DiagnosticCapture& diag);

/// Lowers the scf operations under `root` to cf branches, as MLIR's scf-to-cf pass does (its
/// patterns, the same blocks in the same order) but in linear time: each operation is rewritten
/// in reverse program order, so splitting its block moves only the operations up to the next
/// already-lowered one. The pass rewrites in program order, and each split moved the whole rest
/// of the block: quadratic in a fully unrolled body with hundreds of scf.if (bench/NOTES.md).
/// Errors: kInternal with the diagnostics when an operation cannot be lowered.
absl::Status LowerScfToControlFlow(mlir::Operation* root, DiagnosticCapture& diag);

/// Initializes the NVPTX and native LLVM targets once per process.
void InitializeLlvmTargets();

/// Prints an operation (MLIR's generic-free custom form) to text.
std::string ToText(mlir::Operation* op);

}  // namespace tilesearch::codegen::internal
