// Internal to codegen: the host module pipeline shared by the JIT (CompileForHost) and the object
// file emitter (CompileHostObject): the nest as MLIR functions on bare pointers, lowered to the
// LLVM dialect.
#pragma once

#include "absl/status/status.h"
#include "codegen/codegen.h"
#include "codegen/kernel_plan.h"
#include "codegen/mlir_setup.h"
#include "mlir/IR/BuiltinOps.h"

namespace tilesearch::codegen::internal {

/// The runtime function parallel loops call: `void ts_parallel_for(ptr runtime, ptr body,
/// ptr captures, i64 min, i64 extent)` runs body(captures, begin, end) over chunks covering
/// [min, min + extent). Declared (not defined) in the module BuildHostModule emits.
inline constexpr char kParallelForSymbol[] = "ts_parallel_for";

/// Emits `plan` into the empty `module`: the entry `void <plan.name>(ptr args, ptr runtime)`
/// (args: one pointer slot per plan.args, params then scratch; runtime: passed through to
/// ts_parallel_for), per-kernel functions `<plan.name>_kN` when there are several kernels, and an
/// outlined `<plan.name>_parN(ptr captures, i64 begin, i64 end)` per outermost parallel loop.
/// Errors: the emitter's (kInvalidArgument, kUnimplemented).
absl::Status BuildHostModule(mlir::ModuleOp module, const ModulePlan& plan,
                             const HostCompileOptions& options);

/// Lowers the module BuildHostModule emitted to the LLVM dialect (math approximations, bfloat16
/// expansion, scf → cf, everything → llvm). Errors: kInternal with MLIR's diagnostics.
absl::Status LowerHostModule(mlir::ModuleOp module, DiagnosticCapture& diag);

}  // namespace tilesearch::codegen::internal
