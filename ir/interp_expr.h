// Internal to the reference interpreter: expressions compiled once into a tree of small typed
// evaluator objects with variables resolved to slots and buffers to (slot, shape, strides), so the
// per-element cost is a few virtual calls instead of a walk over shared IR nodes with name lookups.
// Not a public interface: only ir/interpreter.cc and its compiled statements use it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/expr.h"
#include "ir/interpreter.h"
#include "ir/stmt.h"

namespace tilesearch::ir::interp_internal {

/// Shared by every execution context of one Interpret call: the first error wins and stops work.
struct Runtime {
  bool failed = false;
  absl::Status status;
  int num_vars = 0;
  int num_bufs = 0;
  void Fail(absl::Status s) {
    if (!failed) {
      failed = true;
      status = std::move(s);
    }
  }
};

/// One thread's view: its variable slots, its buffer pointers, its thread index.
struct Ctx {
  int64_t* vars = nullptr;
  double** bufs = nullptr;
  int64_t tid[3] = {0, 0, 0};
  Runtime* rt = nullptr;
};

/// A buffer visible at some point of the nest: where its data pointer lives and its layout.
struct BufInfo {
  int slot = 0;
  std::string name;
  ScalarType dtype = ScalarType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

/// Value poisoned into fresh (uninitialized) allocations: NaN for floats, a large sentinel for ints,
/// so reading before writing shows up in the results.
double PoisonValue(ScalarType t);

/// Compiled expression. Int and bool expressions answer I(), float expressions F().
class CExpr {
 public:
  virtual ~CExpr() = default;
  virtual int64_t I(Ctx& c) const;
  virtual double F(Ctx& c) const;
};
using CExprPtr = std::unique_ptr<CExpr>;

/// Evaluates `e` as a double whichever its type.
inline double AsDouble(const CExpr& e, bool is_float, Ctx& c) {
  return is_float ? e.F(c) : static_cast<double>(e.I(c));
}

/// Names in scope while compiling: innermost binding last.
class Scope {
 public:
  void PushVar(const std::string& name, int slot) { vars_.emplace_back(name, slot); }
  void PopVar() { vars_.pop_back(); }
  void PushBuf(const BufInfo* info) { bufs_.push_back(info); }
  void PopBuf() { bufs_.pop_back(); }
  /// Slot of a variable, or -1.
  int FindVar(const std::string& name) const;
  /// Innermost buffer of that name, or nullptr.
  const BufInfo* FindBuf(const std::string& name) const;

 private:
  std::vector<std::pair<std::string, int>> vars_;
  std::vector<const BufInfo*> bufs_;
};

/// One int64 index of a buffer access, with the common cases (a loop variable, a constant)
/// evaluated inline.
struct IndexOperand {
  enum Kind : uint8_t { kVar, kConst, kExpr } kind = kConst;
  int slot = 0;
  int64_t value = 0;
  CExprPtr expr;
  int64_t Eval(Ctx& c) const {
    switch (kind) {
      case kVar: return c.vars[slot];
      case kConst: return value;
      case kExpr: return expr->I(c);
    }
    return 0;
  }
};

/// A bounds-checked multi-dimensional access to one buffer (shared by Load and Store).
class Access {
 public:
  /// Returns the element offset, or -1 after reporting an out-of-range index.
  int64_t Offset(Ctx& c) const {
    int64_t offset = 0;
    for (size_t d = 0; d < indices_.size(); ++d) {
      const int64_t i = indices_[d].Eval(c);
      if (static_cast<uint64_t>(i) >= static_cast<uint64_t>(shape_[d])) {
        ReportOutOfRange(c, d, i);
        return -1;
      }
      offset += i * strides_[d];
    }
    return offset;
  }
  int slot() const { return slot_; }
  const std::string& buffer() const { return buffer_; }

  /// Resolves `buffer` and compiles `indices`. Errors: unknown buffer, wrong number of indices.
  static absl::StatusOr<Access> Make(const std::string& buffer, const std::vector<Expr>& indices,
                                     const char* what, const Scope& scope, Precision precision);

 private:
  void ReportOutOfRange(Ctx& c, size_t dim, int64_t index) const;

  int slot_ = 0;
  std::string buffer_;
  std::string what_;  // "load" / "store", for messages
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  std::vector<IndexOperand> indices_;
};

/// Compiles an expression. Errors: unknown variable or buffer, wrong index count.
absl::StatusOr<CExprPtr> CompileExpr(const Expr& e, const Scope& scope, Precision precision);

/// Compiles an int64 index (with the inline fast paths).
absl::StatusOr<IndexOperand> CompileIndex(const Expr& e, const Scope& scope, Precision precision);

}  // namespace tilesearch::ir::interp_internal
