// Internal to the reference interpreter: expressions compiled once into a tree of small typed
// evaluator objects with variables resolved to slots and buffers to (slot, shape, strides), so the
// per-element cost is a few virtual calls instead of a walk over shared IR nodes with name lookups.
// Not a public interface: only ir/interpreter.cc and its compiled statements use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
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
/// One mbarrier's state (ir/stmt.h MbarrierNode) between its init and the end of the run: the
/// barrier's shared element holds its number here plus one. A phase completes as the hardware's
/// does, at the arrival or TMA byte count that brings in the last of its arrivals and bytes
/// (Complete). TMA copies (TmaLoadNode) wait in `copies` (their values read at issue), move to
/// `landed` when their phase completes, and are written when a wait finds a completed phase: a
/// thread that reads a tile without waiting for it sees stale data.
struct MbarrierState {
  struct Copy {
    double* dst = nullptr;
    double value = 0;
  };
  int64_t arrivals = 1;      // expected per phase
  int64_t arrived = 0;       // in the current phase
  int64_t tx_expected = 0;   // bytes announced by arrive.expect_tx in the current phase
  int64_t tx_landed = 0;     // bytes copied by TMA loads in the current phase
  int64_t phase = 0;         // completed phases
  std::vector<Copy> copies;  // of the current phase
  std::vector<Copy> landed;  // of completed phases, not yet observed by a wait

  /// Completes the current phase when its arrivals and bytes are all in; true when it did.
  bool Complete() {
    if (arrived != arrivals || tx_landed != tx_expected) return false;
    landed.insert(landed.end(), copies.begin(), copies.end());
    copies.clear();
    arrived = tx_expected = tx_landed = 0;
    ++phase;
    return true;
  }
  /// Writes the copies of completed phases (a wait observed one).
  void Land() {
    for (const Copy& copy : landed) *copy.dst = copy.value;
    landed.clear();
  }
};

/// A range [first, second) of shared elements.
using ElementRange = std::pair<const double*, const double*>;

struct Runtime {
  std::vector<MbarrierState> mbarriers;
  int64_t mbarrier_events = 0;  // arrivals, TMA loads and completed phases so far
  /// The shared tiles that wgmma groups in flight read (PendingWgmmas), with the number of
  /// groups over the block's threads reading each: a TMA copy started into one of them refills
  /// a tile the tensor cores may still be reading, which the interpreter reports at once (its
  /// copy lands only at a completing wait, after the group may have been retired here).
  std::map<ElementRange, int64_t> wgmma_reads;
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

/// One thread's asynchronous copies (Stores with async_copy) not yet performed: those issued
/// since its last commit, and its committed groups, oldest first.
struct AsyncCopies {
  struct Copy {
    double* dst = nullptr;
    double value = 0;  // already rounded to the destination's dtype
  };
  std::vector<Copy> open;
  std::vector<std::vector<Copy>> groups;
};

/// One thread's warpgroup MMA groups in flight (WgmmaNode), oldest first: each performs its
/// update when retired (a wait_group leaving fewer groups in flight, or an access to an
/// accumulator), reading the shared operand tiles then, as the tensor cores read them while the
/// group runs: a ring slot released or refilled before its wgmma's are waited for shows up as a
/// wrong answer.
struct PendingWgmmas {
  struct Group {
    std::function<void()> run;
    std::vector<ElementRange> reads;  // its shared tiles
  };
  std::vector<Group> groups;
  std::map<ElementRange, int64_t>* reads = nullptr;  // Runtime::wgmma_reads, or null

  void Add(Group g) {
    if (reads != nullptr) {
      for (const ElementRange& r : g.reads) ++(*reads)[r];
    }
    groups.push_back(std::move(g));
  }
  /// Performs the oldest groups until at most `keep` are left.
  void RetireAllBut(size_t keep) {
    if (groups.size() <= keep) return;
    const size_t done = groups.size() - keep;
    for (size_t g = 0; g < done; ++g) {
      groups[g].run();
      if (reads == nullptr) continue;
      for (const ElementRange& r : groups[g].reads) {
        auto it = reads->find(r);
        if (it != reads->end() && --it->second == 0) reads->erase(it);
      }
    }
    groups.erase(groups.begin(), groups.begin() + static_cast<std::ptrdiff_t>(done));
  }
};

/// One thread's view: its variable slots, its buffer pointers, its thread index, its pending
/// async copies and wgmma groups (null: performed when issued).
struct Ctx {
  int64_t* vars = nullptr;
  double** bufs = nullptr;
  int64_t tid[3] = {0, 0, 0};
  Runtime* rt = nullptr;
  AsyncCopies* async = nullptr;
  PendingWgmmas* wgmma = nullptr;
};

/// A buffer visible at some point of the nest: where its data pointer lives and its layout.
struct BufInfo {
  int slot = 0;
  std::string name;
  ScalarType dtype = ScalarType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  std::optional<TensorMapSpec> tensor_map;  // a global buffer holding a TMA tensor map
};

/// Value poisoned into fresh (uninitialized) allocations: NaN for floats, a large sentinel for
/// ints, so reading before writing shows up in the results.
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

/// An int64 affine form `constant + sum coeff[k] * var[slot[k]]` of loop variables: the shape of
/// almost every index expression (ty * 2 + ii, by * 16 + tx), evaluated without virtual calls.
struct Affine {
  static constexpr int kMaxTerms = 6;
  int64_t constant = 0;
  int num_terms = 0;
  int slots[kMaxTerms] = {};
  int64_t coeffs[kMaxTerms] = {};
  int64_t Eval(const Ctx& c) const {
    int64_t v = constant;
    for (int k = 0; k < num_terms; ++k) v += coeffs[k] * c.vars[slots[k]];
    return v;
  }
  /// Adds `coeff * var[slot]`; false when the form has no room left.
  bool AddTerm(int slot, int64_t coeff);
};

/// Writes `e` (an int64 expression of constants, variables, +, - and multiplication by a constant)
/// as an affine form; false for anything else.
bool ToAffine(const Expr& e, const Scope& scope, Affine& out);

/// One dimension of a buffer access: its index (an affine form of loop variables, else a compiled
/// expression), the dimension's extent and its row-major stride.
struct AccessDim {
  Affine affine;
  CExprPtr expr;  // set when the index is not affine
  int64_t extent = 0;
  int64_t stride = 0;
  int64_t Eval(Ctx& c) const { return expr ? expr->I(c) : affine.Eval(c); }
};

/// A bounds-checked multi-dimensional access to one buffer (shared by Load and Store).
class Access {
 public:
  /// Returns the element offset, or -1 after reporting an out-of-range index.
  int64_t Offset(Ctx& c) const {
    int64_t offset = 0;
    for (const AccessDim& d : dims_) {
      const int64_t i = d.Eval(c);
      if (static_cast<uint64_t>(i) >= static_cast<uint64_t>(d.extent)) {
        ReportOutOfRange(c, &d - dims_.data(), i);
        return -1;
      }
      offset += i * d.stride;
    }
    return offset;
  }
  int slot() const { return slot_; }
  const std::string& buffer() const { return buffer_; }

  /// Resolves `buffer` and compiles `indices`. Errors: unknown buffer, wrong number of indices.
  static absl::StatusOr<Access> Make(const std::string& buffer, const std::vector<Expr>& indices,
                                     const char* what, const Scope& scope, Precision precision);

 private:
  void ReportOutOfRange(Ctx& c, int64_t dim, int64_t index) const;

  int slot_ = 0;
  std::string buffer_;
  std::string what_;  // "load" / "store", for messages
  std::vector<AccessDim> dims_;
};

/// Compiles an expression. Errors: unknown variable or buffer, wrong index count.
absl::StatusOr<CExprPtr> CompileExpr(const Expr& e, const Scope& scope, Precision precision);

}  // namespace tilesearch::ir::interp_internal
