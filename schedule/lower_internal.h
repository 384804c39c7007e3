// Internal pieces of Lower (schedule/lower.h), shared by its source files and not part of the
// schedule library's interface: symbolic bounds and access regions over lowered statements, the
// cross-thread reduction builder, and the GPU launch analysis.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/expr.h"
#include "ir/simplify.h"
#include "ir/stmt.h"
#include "ir/tensor.h"
#include "schedule/lower.h"

namespace tilesearch::schedule::lower_internal {

/// Σ coeff·term + constant, where each term is an opaque expression that does not vary (fixed
/// loop variables and expressions of them). Terms are keyed by their printed text, so equal terms
/// cancel and differences of forms are exact.
struct LinearForm {
  std::map<std::string, std::pair<ir::Expr, int64_t>> terms;
  int64_t constant = 0;

  static LinearForm Const(int64_t c);
  static LinearForm Term(const ir::Expr& e);
  bool is_constant() const { return terms.empty(); }
  /// The form as an int64 expression (terms in key order, then the constant).
  ir::Expr ToExpr() const;
};
LinearForm operator+(const LinearForm& a, const LinearForm& b);
LinearForm operator-(const LinearForm& a, const LinearForm& b);
LinearForm operator*(const LinearForm& a, int64_t c);
/// a - b when it is a constant, else nullopt.
std::optional<int64_t> ConstDiff(const LinearForm& a, const LinearForm& b);

/// Lower and upper bound (inclusive) of an int64 expression.
struct SymbolicBound {
  LinearForm lo;
  LinearForm hi;
};

/// Bounds of `e` when the variables in `varying` range over their intervals and every other
/// variable keeps its (unknown) value: linear parts stay symbolic, so the bounds are expressions
/// of the fixed variables. nullopt when `e` is not analyzable (a varying variable under a
/// multiplication by a non-constant, a Load, a non-floor-exact division of symbolic terms, ...).
std::optional<SymbolicBound> BoundOver(const ir::Expr& e, const ir::RangeMap& varying);

/// Constant bounds of `e` with every variable in `ranges`, or nullopt.
std::optional<ir::Interval> ConstBound(const ir::Expr& e, const ir::RangeMap& ranges);

/// True when `e` mentions a variable named in `names` (a RangeMap's keys).
bool UsesAnyVar(const ir::Expr& e, const ir::RangeMap& names);
/// Names of the variables in `e`.
std::vector<std::string> VarsOf(const ir::Expr& e);

/// The box of `buffer` read by the Loads in `stmts`, with every For loop inside `stmts` and the
/// variables of `outer_relaxed` ranging freely. Per dimension: `min` (an expression of the fixed
/// variables) and a constant `extent`; a dimension that is not analyzable, or whose accesses
/// differ by non-constant offsets, covers the whole of `shape` (min 0). `accessed` is false when
/// no Load of `buffer` was found. (TVM InferBound, restricted to box regions.)
struct AccessRegion {
  bool accessed = false;
  std::vector<ir::Expr> min;
  std::vector<int64_t> extent;
};
AccessRegion InferAccessRegion(const std::string& buffer, const std::vector<int64_t>& shape,
                               const std::vector<ir::Stmt>& stmts,
                               const ir::RangeMap& outer_relaxed);

/// Rewrites every Load of `buffer` in `s` with `rewrite(indices)`.
ir::Stmt RewriteLoads(
    const ir::Stmt& s, const std::string& buffer,
    const std::function<std::vector<ir::Expr>(const std::vector<ir::Expr>&)>& rewrite);

/// pragma auto_unroll_max_step: the serial loops of `s` named in `loop_vars` whose whole execution
/// performs at most `max_steps` stores become unrolled (TVM's UnrollLoop with auto_max_step).
ir::Stmt AutoUnroll(const ir::Stmt& s, const std::set<std::string>& loop_vars, int64_t max_steps);

/// storage_align: the padded row-major layout of one buffer. Dimensions after `dim` are
/// linearized into one of extent padded.back(), the stride of `dim`.
struct Alignment {
  std::vector<int64_t> shape;   // logical (unpadded) shape
  std::vector<int64_t> padded;  // allocated shape
  int dim = -1;
};
/// The layout giving dimension `dim`'s stride ≡ offset (mod factor), or nullopt when nothing
/// changes (innermost dimension, factor ≤ 0, or the stride already fits).
std::optional<Alignment> MakeAlignment(const std::vector<int64_t>& shape, int dim, int64_t factor,
                                       int64_t offset);

/// Final rewrite of a lowered statement: storage-aligned buffers get their padded shapes and
/// indices, and Loads drop their producer tensors (loop-nest Loads name buffers only).
ir::Stmt Finalize(const ir::Stmt& s, const std::map<std::string, Alignment>& align);

/// Errors (kInvalidArgument) when a Load or Store names a buffer that is neither a parameter nor
/// an enclosing Allocate (a reader outside the compute_at loop of what it reads).
absl::Status CheckBufferScopes(const ir::Stmt& body, const std::vector<ir::BufferDecl>& params);

/// A loop of the nest being built.
struct LoopInfo {
  std::string var;
  int64_t extent = 1;
  ir::ForKind kind = ir::ForKind::kSerial;
};

/// What the cross-thread reduction builder needs about one reduction stage; every expression is
/// already in loop variables.
struct AllReduceSpec {
  std::string stage;   // stage name (prefix of the buffers and loops it makes)
  std::string buffer;  // buffer the result is stored to
  ir::ScalarType dtype = ir::ScalarType::kFloat32;
  ir::ReduceKind kind = ir::ReduceKind::kSum;
  ir::Expr init;                       // the stage's init value
  ir::Expr body;                       // the term combined per reduce point
  std::vector<LoopInfo> reduce_loops;  // the stage's reduce iterators in order
  int thread_loop = 0;                 // index in reduce_loops of the threadIdx-bound one
  std::vector<ir::Expr> guards;        // all guards
  std::vector<ir::Expr> space_guards;  // guards that do not use reduce variables
  std::vector<ir::Expr> store_indices;
  /// Variables and extents of the other threadIdx loops the reduction runs inside: each such
  /// thread group gets its own slots of the shared partials buffer.
  std::vector<LoopInfo> thread_groups;
  bool store_from_all_threads = false;  // the result buffer is per thread (local)
};

/// Builds a cross-thread reduction: every thread folds its share of the reduce points into a
/// local partial (starting at the combiner's identity). A threadIdx.x reduction over a multiple of
/// 32 threads then combines with warp butterflies (5 exchange windows over a "*.shfl" shared
/// buffer, each a store, barrier, load of thread t ^ m, barrier, which codegen emits as
/// shfl.sync.bfly when the loop covers blockDim.x, see codegen/emitter.h), lane 0 of each warp
/// publishes its total to "*.warp_partials", a barrier, and every warp combines the warp totals
/// with butterflies again: 2 real barriers. Any other thread count writes the partials to a shared
/// buffer, a barrier, thread 0 combines them in thread order, a barrier. Finally init is combined
/// with the total and the result stored (by thread 0, or by every thread when the result buffer is
/// local), and a barrier. `fresh` makes unique loop-variable names.
ir::Stmt BuildAllReduce(const AllReduceSpec& spec,
                        const std::function<std::string(const std::string&)>& fresh);

/// Moves every shared-scope Allocate of a kernel to the body of the innermost blockIdx loop above
/// it (or the kernel's top when it has none): shared memory is one per block.
ir::Stmt HoistSharedAllocations(const ir::Stmt& kernel);

/// Virtual-thread injection (TVM InjectVirtualThread): every vthread loop is pushed inward so
/// that statements independent of its variable (shared fetches, barriers) run once, buffers
/// allocated under it get one copy per virtual thread (a leading dimension), and the rest runs
/// unrolled over the virtual threads at the innermost level. Loops holding Evaluates (cross-thread
/// reductions) become plain serial loops. Result: no vthread loop is left.
ir::Stmt InjectVirtualThreads(const ir::Stmt& kernel);

/// Drops barriers that order nothing: a barrier right after another one, and barriers at the end
/// of a block's work (the end of a blockIdx loop's body or of the kernel).
ir::Stmt RemoveRedundantBarriers(const ir::Stmt& kernel);

/// Launch configuration of one kernel statement and its validity against `target`. Errors:
/// kFailedPrecondition "invalid_schedule: ..." for too many threads, too much shared memory,
/// misplaced block bindings, thread bindings without block bindings, and barriers that threads
/// of a block would reach divergently.
absl::StatusOr<LaunchConfig> AnalyzeKernel(const ir::Stmt& kernel, const Target& target);

}  // namespace tilesearch::schedule::lower_internal
