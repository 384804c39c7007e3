#include "ir/interpreter.h"

#include <algorithm>
#include <coroutine>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/interp_expr.h"
#include "ir/tensor.h"

namespace tilesearch::ir {
namespace {

using interp_internal::Access;
using interp_internal::AsDouble;
using interp_internal::AsyncCopies;
using interp_internal::BufInfo;
using interp_internal::CExprPtr;
using interp_internal::CompileExpr;
using interp_internal::Ctx;
using interp_internal::MbarrierState;
using interp_internal::PendingWgmmas;
using interp_internal::PoisonValue;
using interp_internal::Runtime;
using interp_internal::Scope;

// ---------------------------------------------------------------------------------------------
// Compiled statements.
//
// Outside thread regions a statement runs in one context (Exec). A thread region is the outermost
// statement under the block loops that holds threadIdx loops; there the block's threads run one
// after another, each until its next Barrier (or the end of the region), and only when all of them
// wait at the barrier does the next phase start (region by region, as ir/stmt.h states). Statements
// without a Barrier run with the plain Exec; statements holding one run as C++20 coroutines (Run)
// that suspend the thread at the barrier, so a thread can leave the end of a loop body, go around
// the loop and run the start of the next iteration before the next thread runs the end of the
// first: a missing barrier after the use of a shared buffer (a write-after-read race) also gives a
// wrong answer. Every control decision taken inside a statement that holds a barrier (loop bounds,
// conditions, threadIdx guards) must be the same in all threads of the block; thread 0's decisions
// in the current phase are the reference the other threads are checked against.

class CStmt;
struct Region;

// A coroutine that runs a barrier-holding statement for one thread. Lazy: starts when awaited or
// resumed; resumes its awaiter when it finishes (symmetric transfer).
class CoTask {
 public:
  struct promise_type {
    std::coroutine_handle<> continuation;
    CoTask get_return_object() {
      return CoTask(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct FinalAwaiter {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        std::coroutine_handle<> next = h.promise().continuation;
        return next ? next : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    FinalAwaiter final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };

  CoTask() = default;
  explicit CoTask(std::coroutine_handle<promise_type> h) : h_(h) {}
  CoTask(CoTask&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  CoTask& operator=(CoTask&& other) noexcept {
    if (this != &other) {
      if (h_) h_.destroy();
      h_ = std::exchange(other.h_, nullptr);
    }
    return *this;
  }
  CoTask(const CoTask&) = delete;
  CoTask& operator=(const CoTask&) = delete;
  ~CoTask() {
    if (h_) h_.destroy();
  }
  std::coroutine_handle<promise_type> handle() const { return h_; }

 private:
  std::coroutine_handle<promise_type> h_;
};

struct ThreadState {
  std::vector<int64_t> vars;
  std::vector<double*> bufs;
  AsyncCopies async;    // copies left pending at the region's end die with its shared memory
  PendingWgmmas wgmma;  // groups in flight (retired at the latest when the thread leaves)
  Ctx ctx;
  Region* region = nullptr;
  int index = 0;  // linear thread index in the block (x fastest)
  std::coroutine_handle<> resume_point;
  const CStmt* at_barrier = nullptr;  // the barrier this thread waits at, if any
  bool at_mbarrier = false;           // suspended in an mbarrier wait that had not completed
  const CStmt* waits_at = nullptr;    // that wait (an MbarrierStmt, for a deadlock's report)
  size_t decision_index = 0;          // control decisions taken in the current phase
};

// A control decision taken inside a barrier-holding statement: the node and its values.
struct Decision {
  const CStmt* node = nullptr;
  int64_t a = 0;
  int64_t b = 0;
};

struct Region {
  int64_t num_threads = 0;
  std::vector<ThreadState> threads;
  std::vector<Decision> phase_log;  // thread 0's decisions in the current phase

  // Thread 0 records its decision; any other thread compares with thread 0's decision at the same
  // position. Returns the reference decision when they differ (its node is null when thread 0
  // took fewer decisions), else nullptr.
  const Decision* Check(ThreadState& ts, const CStmt* node, int64_t a, int64_t b) {
    static const Decision kNone;
    if (ts.index == 0) {
      phase_log.push_back(Decision{node, a, b});
      ++ts.decision_index;
      return nullptr;
    }
    if (ts.decision_index >= phase_log.size()) return &kNone;
    const Decision& ref = phase_log[ts.decision_index++];
    if (ref.node == node && ref.a == a && ref.b == b) return nullptr;
    return &ref;
  }
};

std::string ThreadName(const Ctx& c) {
  return absl::StrCat("thread (", c.tid[0], ", ", c.tid[1], ", ", c.tid[2], ")");
}

absl::Status DivergenceError(const ThreadState& ts, const std::string& where) {
  return absl::FailedPreconditionError(
      absl::StrCat("barrier inside thread-divergent control flow: ", ThreadName(ts.ctx),
                   " takes a different path than thread (0, 0, 0) at ", where));
}

class CStmt {
 public:
  virtual ~CStmt() = default;
  /// Runs the statement in one context.
  virtual void Exec(Ctx& c) = 0;
  /// Runs a statement that holds a barrier for one thread of a region.
  virtual CoTask Run(ThreadState& ts);
  // Holds a point where the thread may suspend: a Barrier, or an mbarrier wait that may have to
  // let other threads run first (warp-specialized kernels).
  bool has_barrier = false;
  bool is_barrier = false;
  // Holds a Barrier: control decisions on the way must agree across the block's threads.
  bool block_barrier = false;
};
using CStmtPtr = std::unique_ptr<CStmt>;

CoTask CStmt::Run(ThreadState&) {
  CHECK(false) << "coroutine execution of a statement without a barrier";
  co_return;
}

// Awaiting a child statement: a barrier-free child runs to completion in place; a barrier suspends
// the thread (back to the region's scheduler); a barrier-holding child runs as a coroutine.
class ChildAwaiter {
 public:
  ChildAwaiter(CStmt* s, ThreadState* ts) : s_(s), ts_(ts) {}
  bool await_ready() {
    if (s_->is_barrier || s_->has_barrier) return false;
    s_->Exec(ts_->ctx);
    return true;
  }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> caller) {
    if (s_->is_barrier) {
      ts_->resume_point = caller;
      ts_->at_barrier = s_;
      return std::noop_coroutine();
    }
    task_ = s_->Run(*ts_);
    task_.handle().promise().continuation = caller;
    return task_.handle();
  }
  void await_resume() {}

 private:
  CStmt* s_;
  ThreadState* ts_;
  CoTask task_;
};

class NoOpStmt final : public CStmt {
 public:
  void Exec(Ctx&) override {}
};

class SeqStmt final : public CStmt {
 public:
  explicit SeqStmt(std::vector<CStmtPtr> stmts) : stmts_(std::move(stmts)) {
    for (const auto& s : stmts_) {
      has_barrier |= s->has_barrier;
      block_barrier |= s->block_barrier;
    }
  }
  void Exec(Ctx& c) override {
    for (const auto& s : stmts_) {
      s->Exec(c);
      if (c.rt->failed) return;
    }
  }
  CoTask Run(ThreadState& ts) override {
    for (const auto& s : stmts_) {
      co_await ChildAwaiter(s.get(), &ts);
      if (ts.ctx.rt->failed) co_return;
    }
  }

 private:
  std::vector<CStmtPtr> stmts_;
};

// Serial, parallel, vectorized, unrolled, vthread and blockIdx loops: all iterate.
class ForStmt final : public CStmt {
 public:
  ForStmt(std::string name, int slot, CExprPtr min, CExprPtr extent, CStmtPtr body)
      : name_(std::move(name)),
        slot_(slot),
        min_(std::move(min)),
        extent_(std::move(extent)),
        body_(std::move(body)) {
    has_barrier = body_->has_barrier;
    block_barrier = body_->block_barrier;
  }
  void Exec(Ctx& c) override {
    const int64_t mn = min_->I(c);
    const int64_t ext = extent_->I(c);
    if (c.rt->failed) return;
    int64_t* var = &c.vars[slot_];
    for (int64_t i = 0; i < ext; ++i) {
      *var = mn + i;
      body_->Exec(c);
      if (c.rt->failed) return;
    }
  }
  CoTask Run(ThreadState& ts) override {
    Ctx& c = ts.ctx;
    const int64_t mn = min_->I(c);
    const int64_t ext = extent_->I(c);
    if (c.rt->failed) co_return;
    if (const Decision* ref = block_barrier ? ts.region->Check(ts, this, mn, ext) : nullptr) {
      if (ref->node == this) {
        c.rt->Fail(absl::FailedPreconditionError(absl::StrCat(
            "barrier inside a thread-divergent loop '", name_, "': min ", ref->a, ", extent ",
            ref->b, " in thread (0, 0, 0) but min ", mn, ", extent ", ext, " in ", ThreadName(c))));
      } else {
        c.rt->Fail(DivergenceError(ts, absl::StrCat("loop '", name_, "'")));
      }
      co_return;
    }
    for (int64_t i = 0; i < ext; ++i) {
      c.vars[slot_] = mn + i;
      co_await ChildAwaiter(body_.get(), &ts);
      if (c.rt->failed) co_return;
    }
  }

 private:
  std::string name_;
  int slot_;
  CExprPtr min_, extent_;
  CStmtPtr body_;
};

// A threadIdx loop inside a region: the variable is min + the thread's index in `dim`; threads
// whose index is >= extent skip the body.
class ThreadForStmt final : public CStmt {
 public:
  ThreadForStmt(std::string name, ForKind kind, int slot, CExprPtr min, int64_t extent,
                int64_t block_dim, CStmtPtr body)
      : name_(std::move(name)),
        kind_(kind),
        slot_(slot),
        dim_(static_cast<int>(kind) - static_cast<int>(ForKind::kThreadIdxX)),
        min_(std::move(min)),
        extent_(extent),
        block_dim_(block_dim),
        body_(std::move(body)) {
    has_barrier = body_->has_barrier;
    block_barrier = body_->block_barrier;
  }
  void Exec(Ctx& c) override {
    if (c.tid[dim_] >= extent_) return;
    c.vars[slot_] = min_->I(c) + c.tid[dim_];
    body_->Exec(c);
  }
  CoTask Run(ThreadState& ts) override {
    Ctx& c = ts.ctx;
    const bool inside = c.tid[dim_] < extent_;
    if (const Decision* ref = block_barrier ? ts.region->Check(ts, this, inside, 0) : nullptr) {
      if (ref->node == this) {
        c.rt->Fail(absl::FailedPreconditionError(
            absl::StrCat("barrier under a threadIdx guard: ", ForKindName(kind_), " loop '", name_,
                         "' of extent ", extent_, " skips ", ThreadName(c), " of a block with ",
                         ForKindName(kind_), " dimension ", block_dim_)));
      } else {
        c.rt->Fail(DivergenceError(ts, absl::StrCat("loop '", name_, "'")));
      }
      co_return;
    }
    if (!inside) co_return;
    c.vars[slot_] = min_->I(c) + c.tid[dim_];
    co_await ChildAwaiter(body_.get(), &ts);
  }

 private:
  std::string name_;
  ForKind kind_;
  int slot_;
  int dim_;
  CExprPtr min_;
  int64_t extent_;
  int64_t block_dim_;
  CStmtPtr body_;
};

class IfStmt final : public CStmt {
 public:
  IfStmt(Expr source, CExprPtr cond, CStmtPtr then_case, CStmtPtr else_case)
      : source_(std::move(source)),
        cond_(std::move(cond)),
        then_(std::move(then_case)),
        else_(std::move(else_case)) {
    has_barrier = then_->has_barrier || (else_ && else_->has_barrier);
    block_barrier = then_->block_barrier || (else_ && else_->block_barrier);
  }
  void Exec(Ctx& c) override {
    const bool cond = cond_->I(c) != 0;
    if (c.rt->failed) return;
    if (cond) {
      then_->Exec(c);
    } else if (else_) {
      else_->Exec(c);
    }
  }
  CoTask Run(ThreadState& ts) override {
    Ctx& c = ts.ctx;
    const bool cond = cond_->I(c) != 0;
    if (c.rt->failed) co_return;
    if (const Decision* ref = block_barrier ? ts.region->Check(ts, this, cond, 0) : nullptr) {
      if (ref->node == this) {
        c.rt->Fail(absl::FailedPreconditionError(
            absl::StrCat("barrier inside a thread-divergent condition ", ToString(source_), ": ",
                         ref->a ? "true" : "false", " in thread (0, 0, 0) but ",
                         cond ? "true" : "false", " in ", ThreadName(c))));
      } else {
        c.rt->Fail(DivergenceError(ts, absl::StrCat("condition ", ToString(source_))));
      }
      co_return;
    }
    if (cond) {
      co_await ChildAwaiter(then_.get(), &ts);
    } else if (else_) {
      co_await ChildAwaiter(else_.get(), &ts);
    }
  }

 private:
  Expr source_;
  CExprPtr cond_;
  CStmtPtr then_, else_;
};

template <bool kFloat32Buffer>
class StoreStmt final : public CStmt {
 public:
  StoreStmt(Access access, CExprPtr value, bool value_is_float, ScalarType dtype,
            bool async_copy = false)
      : access_(std::move(access)),
        value_(std::move(value)),
        value_is_float_(value_is_float),
        dtype_(dtype),
        async_copy_(async_copy) {}
  void Exec(Ctx& c) override {
    const int64_t off = access_.Offset(c);
    if (off < 0) return;
    const double v = AsDouble(*value_, value_is_float_, c);
    double* dst = &c.bufs[access_.slot()][off];
    const double rounded =
        kFloat32Buffer ? static_cast<double>(static_cast<float>(v)) : RoundToType(v, dtype_);
    if (async_copy_ && c.async != nullptr) {
      // The source is read now; the destination is written at the wait that covers it.
      c.async->open.push_back({dst, rounded});
      return;
    }
    *dst = rounded;
  }

 private:
  Access access_;
  CExprPtr value_;
  bool value_is_float_;
  ScalarType dtype_;
  bool async_copy_;
};

// Commit (wait < 0) or wait (at most `wait` groups left pending) of the thread's async copies;
// waiting performs the copies of the groups it completes.
class AsyncGroupStmt final : public CStmt {
 public:
  explicit AsyncGroupStmt(const AsyncGroupNode& n) : wait_(n.wait), wgmma_(n.wgmma) {}
  void Exec(Ctx& c) override {
    if (wgmma_) {  // wgmma.wait_group: the oldest groups are performed
      if (c.wgmma != nullptr) c.wgmma->RetireAllBut(static_cast<size_t>(wait_));
      return;
    }
    if (c.async == nullptr) return;
    AsyncCopies& a = *c.async;
    if (wait_ < 0) {
      a.groups.push_back(std::move(a.open));
      a.open.clear();
      return;
    }
    const size_t keep = static_cast<size_t>(wait_);
    if (a.groups.size() <= keep) return;
    const size_t done = a.groups.size() - keep;
    for (size_t g = 0; g < done; ++g) {
      for (const AsyncCopies::Copy& copy : a.groups[g]) *copy.dst = copy.value;
    }
    a.groups.erase(a.groups.begin(), a.groups.begin() + static_cast<std::ptrdiff_t>(done));
  }

 private:
  int64_t wait_;
  bool wgmma_;
};

// One warp's tensor-core update (ir/stmt.h WarpMmaNode), run per thread: the thread updates the
// accumulator elements its lane owns in the mma.sync C-fragment layout, reading the operand tiles
// from shared memory as every lane of the warp does.
class WarpMmaStmt final : public CStmt {
 public:
  struct Operand {
    Access origin;
    int64_t row_stride = 0;  // stride of the m (A) / n (B) direction
    int64_t k_stride = 0;
    int row_dim = 0;
    int k_dim = 0;
    std::vector<int64_t> shape;
  };
  WarpMmaStmt(const WarpMmaNode& n, Operand a, Operand b, int acc_slot, CExprPtr lane)
      : n_(n), a_(std::move(a)), b_(std::move(b)), acc_slot_(acc_slot), lane_(std::move(lane)) {}

  void Exec(Ctx& c) override {
    const int64_t lane = lane_->I(c);
    if (lane < 0 || lane >= 32) {
      c.rt->Fail(absl::OutOfRangeError(
          absl::StrCat("warp mma on '", n_.acc, "': lane ", lane, " is outside [0, 32)")));
      return;
    }
    const int64_t kk = MmaK(n_.kind);
    const int64_t rows = 16 * n_.m_frags;
    const int64_t cols = 8 * n_.n_frags;
    const int64_t depth = kk * n_.k_steps;
    const double* a = Base(c, a_, rows, depth, n_.a);
    const double* b = Base(c, b_, cols, depth, n_.b);
    if (a == nullptr || b == nullptr) return;
    double* acc = c.bufs[acc_slot_];
    const int64_t g = lane / 4;
    const int64_t t = lane % 4;
    const int parts = n_.kind == MmaKind::kTF32x3 ? 3 : 1;
    for (int64_t ks = 0; ks < n_.k_steps; ++ks) {
      for (int64_t i = 0; i < n_.m_frags; ++i) {
        for (int64_t j = 0; j < n_.n_frags; ++j) {
          for (int64_t e = 0; e < 4; ++e) {
            const int64_t r = 16 * i + g + 8 * (e / 2);
            const int64_t col = 8 * j + 2 * t + e % 2;
            double* out = acc + (i * n_.n_frags + j) * 4 + e;
            double sum = *out;
            for (int64_t k = ks * kk; k < (ks + 1) * kk; ++k) {
              const float x = static_cast<float>(a[r * a_.row_stride + k * a_.k_stride]);
              const float y = static_cast<float>(b[col * b_.row_stride + k * b_.k_stride]);
              for (int p = 0; p < parts; ++p) {
                // tf32x3: small·big, big·small, big·big; one product otherwise.
                const int pa = parts == 3 ? (p == 0 ? 1 : 0) : 0;
                const int pb = parts == 3 ? (p == 1 ? 1 : 0) : 0;
                sum += static_cast<double>(MmaOperandValue(n_.kind, x, pa)) *
                       static_cast<double>(MmaOperandValue(n_.kind, y, pb));
              }
            }
            *out = static_cast<double>(static_cast<float>(sum));
          }
        }
      }
    }
  }

 private:
  // The operand tile's element (0, 0), or nullptr after reporting a tile that leaves its buffer.
  const double* Base(Ctx& c, const Operand& o, int64_t rows, int64_t depth,
                     const std::string& buffer) const {
    const int64_t off = o.origin.Offset(c);
    if (off < 0) return nullptr;
    // Recover the origin's indices in the two tile dimensions from the offset.
    int64_t rest = off;
    std::vector<int64_t> idx(o.shape.size());
    for (size_t d = o.shape.size(); d-- > 0;) {
      idx[d] = rest % o.shape[d];
      rest /= o.shape[d];
    }
    if (idx[o.row_dim] + rows > o.shape[o.row_dim] || idx[o.k_dim] + depth > o.shape[o.k_dim]) {
      c.rt->Fail(absl::OutOfRangeError(
          absl::StrCat("warp mma tile ", rows, "x", depth, " at (", idx[o.row_dim], ", ",
                       idx[o.k_dim], ") leaves buffer '", buffer, "' (dimensions ",
                       o.shape[o.row_dim], ", ", o.shape[o.k_dim], ")")));
      return nullptr;
    }
    return c.bufs[o.origin.slot()] + off;
  }

  WarpMmaNode n_;
  Operand a_;
  Operand b_;
  int acc_slot_;
  CExprPtr lane_;
};

// One warpgroup's wgmma (ir/stmt.h WgmmaNode), run per thread: the thread updates the
// accumulator elements it owns in the wgmma D-fragment layout, reading both operand tiles from
// their swizzled shared layouts (WgmmaLayoutOffset, WgmmaSwizzle).
class WgmmaStmt final : public CStmt {
 public:
  struct Operand {
    int slot = 0;
    int64_t elems = 0;  // the buffer's element count
    CExprPtr offset;
    WgmmaLayout layout;
    std::string name;
  };
  WgmmaStmt(const WgmmaNode& n, Operand a, Operand b, int acc_slot, CExprPtr thread)
      : n_(n),
        a_(std::move(a)),
        b_(std::move(b)),
        acc_slot_(acc_slot),
        thread_(std::move(thread)),
        a_span_(SpanBytes(a_.layout, 64 * n_.m_tiles, n_.k_steps * MmaK(n_.kind))),
        b_span_(SpanBytes(b_.layout, n_.n, n_.k_steps * MmaK(n_.kind))) {}

  void Exec(Ctx& c) override {
    const int64_t thread = thread_->I(c);
    if (thread < 0 || thread >= 128) {
      c.rt->Fail(absl::OutOfRangeError(absl::StrCat("wgmma on '", n_.acc, "': thread ", thread,
                                                    " is outside the warpgroup's [0, 128)")));
      return;
    }
    const int64_t a_origin = Origin(c, a_);
    const int64_t b_origin = Origin(c, b_);
    if (a_origin < 0 || b_origin < 0) return;
    // A in registers was loaded before the instruction: its values are taken now. Shared tiles
    // are read when the group is retired (PendingWgmmas).
    std::vector<double> a_regs;
    if (a_.layout.registers) {
      const int64_t depth = n_.k_steps * MmaK(n_.kind);
      for (int64_t i = 0; i < n_.m_tiles; ++i) {
        for (int64_t eh = 0; eh < 2; ++eh) {
          for (int64_t k = 0; k < depth; ++k) {
            const double* x = Element(c, a_, a_origin, Row(thread, i, eh), k);
            if (x == nullptr) return;
            a_regs.push_back(*x);
          }
        }
      }
    }
    Ctx* ctx = &c;
    auto update = [this, ctx, thread, a_origin, b_origin, regs = std::move(a_regs)]() {
      Update(*ctx, thread, a_origin, b_origin, regs);
    };
    if (c.wgmma == nullptr) {
      update();
      return;
    }
    std::vector<interp_internal::ElementRange> reads;
    if (!a_.layout.registers) reads.push_back(Span(c, a_, a_origin, a_span_));
    reads.push_back(Span(c, b_, b_origin, b_span_));
    c.wgmma->Add({std::move(update), std::move(reads)});
    c.wgmma->RetireAllBut(static_cast<size_t>(n_.pending));
  }

 private:
  // Bytes from a tile's origin past its last element (rows x depth elements in `l`), rounded up
  // to whole 128-byte lines (the swizzle moves elements within their line).
  static int64_t SpanBytes(const WgmmaLayout& l, int64_t rows, int64_t depth) {
    if (l.registers) return 0;
    int64_t end = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < depth; ++k) {
        end = std::max(end, WgmmaLayoutOffset(l, r, k) + l.element_bytes);
      }
    }
    return (end + 127) / 128 * 128;
  }

  // The shared elements the group reads of operand `o` (clamped to the buffer).
  interp_internal::ElementRange Span(Ctx& c, const Operand& o, int64_t origin, int64_t span) const {
    const int64_t first = std::min(origin / o.layout.element_bytes, o.elems);
    const int64_t last = std::min((origin + span) / o.layout.element_bytes, o.elems);
    return {c.bufs[o.slot] + first, c.bufs[o.slot] + last};
  }

  // Row of the tile the thread's accumulator elements [i, *, 2 eh + *] lie in.
  static int64_t Row(int64_t thread, int64_t i, int64_t eh) {
    return 64 * i + 16 * (thread / 32) + (thread % 32) / 4 + 8 * eh;
  }

  // The group's update of the thread's accumulator elements; A from `a_regs` (m_tiles × 2 rows ×
  // depth, the registers form) when given, else from its shared tile, B from its shared tile.
  void Update(Ctx& c, int64_t thread, int64_t a_origin, int64_t b_origin,
              const std::vector<double>& a_regs) const {
    const int64_t t = thread % 4;
    double* acc = c.bufs[acc_slot_];
    const int64_t n_frags = n_.n / 8;
    const int64_t depth = MmaK(n_.kind);
    const int64_t all_k = n_.k_steps * depth;
    for (int64_t ks = 0; ks < n_.k_steps; ++ks) {
      for (int64_t i = 0; i < n_.m_tiles; ++i) {
        for (int64_t j = 0; j < n_frags; ++j) {
          for (int64_t e = 0; e < 4; ++e) {
            const int64_t r = Row(thread, i, e / 2);
            const int64_t col = 8 * j + 2 * t + e % 2;
            double* out = acc + (i * n_frags + j) * 4 + e;
            double sum = *out;
            for (int64_t k = ks * depth; k < (ks + 1) * depth; ++k) {
              const double* x = a_regs.empty()
                                    ? Element(c, a_, a_origin, r, k)
                                    : &a_regs[static_cast<size_t>((i * 2 + e / 2) * all_k + k)];
              const double* y = Element(c, b_, b_origin, col, k);
              if (x == nullptr || y == nullptr) return;
              sum += static_cast<double>(ValueOf(a_, static_cast<float>(*x))) *
                     static_cast<double>(ValueOf(b_, static_cast<float>(*y)));
            }
            *out = static_cast<double>(static_cast<float>(sum));
          }
        }
      }
    }
  }

  // The tile origin's byte address (from the buffer's start, which codegen aligns to 1024 bytes);
  // -1 after reporting an origin off the swizzle pattern.
  int64_t Origin(Ctx& c, const Operand& o) const {
    const int64_t bytes = o.layout.element_bytes * o.offset->I(c);
    if (o.layout.registers && bytes >= 0) return bytes;  // plain layout: any element origin
    if (bytes < 0 || bytes % 1024 != 0) {
      c.rt->Fail(absl::InvalidArgumentError(
          absl::StrCat("wgmma on '", n_.acc, "': the origin of operand '", o.name, "' is byte ",
                       bytes, ", not a non-negative multiple of 1024 (the swizzle's period)")));
      return -1;
    }
    return bytes;
  }

  // The value the tensor cores multiply: MmaOperandValue's, or the truncated TF32 value of a raw
  // float32 tile (WgmmaLayout::truncated).
  float ValueOf(const Operand& o, float x) const {
    return o.layout.truncated ? Tf32TruncateValue(x) : MmaOperandValue(n_.kind, x);
  }

  const double* Element(Ctx& c, const Operand& o, int64_t origin, int64_t row, int64_t k) const {
    const int64_t byte = origin + WgmmaLayoutOffset(o.layout, row, k);
    const int64_t at =
        (o.layout.registers ? byte : WgmmaSwizzle(byte, o.layout.swizzle)) / o.layout.element_bytes;
    if (at < 0 || at >= o.elems) {
      c.rt->Fail(absl::OutOfRangeError(absl::StrCat("wgmma on '", n_.acc, "': element (", row, ", ",
                                                    k, ") of operand '", o.name, "' is past its ",
                                                    o.elems, " elements")));
      return nullptr;
    }
    return c.bufs[o.slot] + at;
  }

  WgmmaNode n_;
  Operand a_;
  Operand b_;
  int acc_slot_;
  CExprPtr thread_;
  int64_t a_span_;  // SpanBytes of each operand's tile
  int64_t b_span_;
};

// The mbarrier whose number the shared element at `bar` holds (MbarrierState); nullptr after
// reporting one that was never initialized.
MbarrierState* FindMbarrier(Ctx& c, const double* bar, const std::string& what) {
  const double token = *bar;
  const auto n = static_cast<double>(c.rt->mbarriers.size());
  if (!(token >= 1 && token <= n) || token != static_cast<double>(static_cast<int64_t>(token))) {
    c.rt->Fail(absl::FailedPreconditionError(what + " uses an mbarrier that is not initialized"));
    return nullptr;
  }
  return &c.rt->mbarriers[static_cast<size_t>(token) - 1];
}

// An element of a flat buffer at a computed offset; nullptr after reporting one out of range.
double* FlatElement(Ctx& c, int slot, int64_t elems, int64_t at, const std::string& what) {
  if (at < 0 || at >= elems) {
    c.rt->Fail(absl::OutOfRangeError(
        absl::StrCat(what, ": element ", at, " is outside its ", elems, " elements")));
    return nullptr;
  }
  return c.bufs[slot] + at;
}

// A TMA box copy (ir/stmt.h TmaLoadNode): the box's values are read at issue and written when a
// wait completes the barrier's phase.
class TmaLoadStmt final : public CStmt {
 public:
  struct Buf {
    int slot = 0;
    int64_t elems = 0;
  };
  TmaLoadStmt(std::string what, TensorMapSpec map, int64_t element_bytes, Buf src, Buf dst, Buf bar,
              std::vector<CExprPtr> coords, CExprPtr dst_offset, CExprPtr bar_index)
      : what_(std::move(what)),
        map_(std::move(map)),
        e_(element_bytes),
        src_(src),
        dst_(dst),
        bar_(bar),
        coords_(std::move(coords)),
        dst_offset_(std::move(dst_offset)),
        bar_index_(std::move(bar_index)) {}

  void Exec(Ctx& c) override {
    double* bar = FlatElement(c, bar_.slot, bar_.elems, bar_index_->I(c), what_ + " barrier");
    if (bar == nullptr) return;
    MbarrierState* state = FindMbarrier(c, bar, what_);
    if (state == nullptr) return;
    const int64_t base = dst_offset_->I(c) * e_;
    const int64_t align = map_.swizzle > 0 ? 8 * map_.swizzle : 16;
    if (base < 0 || base % align != 0) {
      c.rt->Fail(absl::InvalidArgumentError(absl::StrCat(what_, ": the destination starts at byte ",
                                                         base, ", not a multiple of ", align)));
      return;
    }
    const size_t rank = map_.dims.size();
    std::vector<int64_t> origin(rank);
    for (size_t d = 0; d < rank; ++d) origin[d] = coords_[d]->I(c);
    const int64_t count = map_.BoxElements();
    // The box lands in [base, base + count) elements (the swizzle permutes within it): no wgmma
    // group in flight may still read any of them.
    const double* first = c.bufs[dst_.slot] + std::min(base / e_, dst_.elems);
    const double* last = c.bufs[dst_.slot] + std::min(base / e_ + count, dst_.elems);
    for (const auto& [range, groups] : c.rt->wgmma_reads) {
      if (range.first < last && first < range.second) {
        c.rt->Fail(absl::FailedPreconditionError(absl::StrCat(
            what_, ": copies into elements [", base / e_, ", ", base / e_ + count,
            ") of its destination while ", groups,
            " wgmma group(s) in flight still read them (a ring slot refilled before every "
            "warp's wgmma's on it were waited for)")));
        return;
      }
    }
    std::vector<int64_t> at(rank, 0);
    for (int64_t i = 0; i < count; ++i) {
      // Box element i (row-major over the box) and its element of the source, if inside.
      int64_t rest = i, src = 0;
      bool inside = true;
      for (size_t d = rank; d-- > 0;) {
        at[d] = rest % map_.box[d];
        rest /= map_.box[d];
      }
      for (size_t d = 0; d < rank; ++d) {
        const int64_t g = origin[d] + at[d];
        inside = inside && g >= 0 && g < map_.dims[d];
        src = src * map_.dims[d] + g;
      }
      const int64_t byte = map_.swizzle > 0 ? WgmmaSwizzle(e_ * i, map_.swizzle) : e_ * i;
      double* dst = FlatElement(c, dst_.slot, dst_.elems, (base + byte) / e_, what_);
      if (dst == nullptr) return;
      state->copies.push_back({dst, inside ? c.bufs[src_.slot][src] : 0.0});
    }
    state->tx_landed += count * e_;
    ++c.rt->mbarrier_events;
    if (state->Complete()) ++c.rt->mbarrier_events;
  }

 private:
  std::string what_;
  TensorMapSpec map_;
  int64_t e_;
  Buf src_, dst_, bar_;
  std::vector<CExprPtr> coords_;
  CExprPtr dst_offset_, bar_index_;
};

// Suspends a thread whose mbarrier wait has not completed, back to the region's scheduler.
struct MbarrierSuspend {
  ThreadState* ts;
  bool await_ready() { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    ts->resume_point = h;
    ts->at_mbarrier = true;
  }
  void await_resume() { ts->at_mbarrier = false; }
};

// An mbarrier operation (ir/stmt.h MbarrierNode). Arrivals and TMA bytes complete a phase when
// its last one comes in (MbarrierState::Complete), as on the hardware. A wait for a completed
// phase returns (writing the TMA copies landed so far); a wait for the current phase, in a thread
// region, suspends the thread until other threads complete it (the scheduler reports a deadlock
// when none can); outside one the wait would never return and is reported.
class MbarrierStmt final : public CStmt {
 public:
  MbarrierStmt(std::string what, MbarrierNode::Op op, int64_t count, int slot, int64_t elems,
               CExprPtr index, CExprPtr parity)
      : what_(std::move(what)),
        op_(op),
        count_(count),
        slot_(slot),
        elems_(elems),
        index_(std::move(index)),
        parity_(std::move(parity)) {
    has_barrier = op_ == MbarrierNode::Op::kWait;
  }

  void Exec(Ctx& c) override {
    if (Step(c) == Outcome::kBlocked) {
      c.rt->Fail(absl::FailedPreconditionError(Blocked(c)));
    }
  }

  CoTask Run(ThreadState& ts) override {
    while (Step(ts.ctx) == Outcome::kBlocked) {
      ts.waits_at = this;
      co_await MbarrierSuspend{&ts};
    }
  }

  // What a blocked wait waits for (formatted only for a report).
  std::string Blocked(Ctx& c) const {
    double* bar = FlatElement(c, slot_, elems_, index_->I(c), what_);
    MbarrierState* state = bar == nullptr ? nullptr : FindMbarrier(c, bar, what_);
    if (state == nullptr) return what_;
    return absl::StrCat(what_, " waits for phase ", state->phase, " which never completes (",
                        state->arrived, " of ", state->arrivals, " arrivals, ", state->tx_landed,
                        " of ", state->tx_expected, " transaction bytes)");
  }

 private:
  enum class Outcome { kDone, kBlocked };

  Outcome Step(Ctx& c) {
    double* bar = FlatElement(c, slot_, elems_, index_->I(c), what_);
    if (bar == nullptr) return Outcome::kDone;
    if (op_ == MbarrierNode::Op::kInit) {
      MbarrierState& fresh = c.rt->mbarriers.emplace_back();
      fresh.arrivals = count_;
      *bar = static_cast<double>(c.rt->mbarriers.size());
      return Outcome::kDone;
    }
    MbarrierState* state = FindMbarrier(c, bar, what_);
    if (state == nullptr) return Outcome::kDone;
    if (op_ == MbarrierNode::Op::kArriveExpectTx || op_ == MbarrierNode::Op::kArrive) {
      ++c.rt->mbarrier_events;
      if (op_ == MbarrierNode::Op::kArriveExpectTx) state->tx_expected += count_;
      // An arrival in each block of a cluster: the other blocks' stand for those of this block's
      // peers, which do the same work (MbarrierNode::Arrive).
      state->arrived += op_ == MbarrierNode::Op::kArrive && count_ > 1 ? count_ - 1 : 0;
      if (++state->arrived > state->arrivals) {
        c.rt->Fail(absl::FailedPreconditionError(absl::StrCat(
            what_, ": ", state->arrived, " arrivals in a phase that expects ", state->arrivals)));
      }
      if (state->Complete()) ++c.rt->mbarrier_events;
      return Outcome::kDone;
    }
    const int64_t parity = parity_->I(c);
    if (parity != 0 && parity != 1) {
      c.rt->Fail(absl::InvalidArgumentError(absl::StrCat(what_, ": parity ", parity)));
      return Outcome::kDone;
    }
    // mbarrier.try_wait.parity: done once the current phase's parity differs from `parity`
    // (the phase of that parity before it has completed).
    if (state->phase % 2 != parity) {
      state->Land();
      return Outcome::kDone;
    }
    return Outcome::kBlocked;
  }

  std::string what_;
  MbarrierNode::Op op_;
  int64_t count_;
  int slot_;
  int64_t elems_;
  CExprPtr index_, parity_;
};

class EvaluateStmt final : public CStmt {
 public:
  EvaluateStmt(CExprPtr value, bool is_float) : value_(std::move(value)), is_float_(is_float) {}
  void Exec(Ctx& c) override { AsDouble(*value_, is_float_, c); }

 private:
  CExprPtr value_;
  bool is_float_;
};

// An allocation outside thread regions: fresh (poisoned) storage on every entry.
class AllocStmt final : public CStmt {
 public:
  AllocStmt(int slot, int64_t size, double poison, CStmtPtr body)
      : slot_(slot), storage_(size), poison_(poison), body_(std::move(body)) {}
  void Exec(Ctx& c) override {
    std::fill(storage_.begin(), storage_.end(), poison_);
    c.bufs[slot_] = storage_.data();
    body_->Exec(c);
  }

 private:
  int slot_;
  std::vector<double> storage_;
  double poison_;
  CStmtPtr body_;
};

// A local allocation inside a region: one private copy per thread, placed when the region is
// entered and poisoned each time the allocation is entered.
class RegionLocalAllocStmt final : public CStmt {
 public:
  RegionLocalAllocStmt(int slot, int64_t size, double poison, CStmtPtr body)
      : slot_(slot), size_(size), poison_(poison), body_(std::move(body)) {
    has_barrier = body_->has_barrier;
    block_barrier = body_->block_barrier;
  }
  void Exec(Ctx& c) override {
    std::fill(c.bufs[slot_], c.bufs[slot_] + size_, poison_);
    body_->Exec(c);
  }
  CoTask Run(ThreadState& ts) override {
    std::fill(ts.ctx.bufs[slot_], ts.ctx.bufs[slot_] + size_, poison_);
    co_await ChildAwaiter(body_.get(), &ts);
  }

 private:
  int slot_;
  int64_t size_;
  double poison_;
  CStmtPtr body_;
};

// A shared (or global) allocation inside a region: one copy per block, placed and poisoned when
// the region is entered, so threads entering the Allocate one after another do not clobber it.
class RegionSharedAllocStmt final : public CStmt {
 public:
  explicit RegionSharedAllocStmt(CStmtPtr body) : body_(std::move(body)) {
    has_barrier = body_->has_barrier;
    block_barrier = body_->block_barrier;
  }
  void Exec(Ctx& c) override { body_->Exec(c); }
  CoTask Run(ThreadState& ts) override { co_await ChildAwaiter(body_.get(), &ts); }

 private:
  CStmtPtr body_;
};

// Register reallocation (SetMaxNRegNode): no effect on any value.
class NopStmt final : public CStmt {
 public:
  void Exec(Ctx&) override {}
};

// Only ever awaited (ChildAwaiter suspends the thread there); never executed directly.
class BarrierStmt final : public CStmt {
 public:
  BarrierStmt() {
    has_barrier = true;
    is_barrier = true;
    block_barrier = true;
  }
  void Exec(Ctx&) override { CHECK(false) << "barrier executed outside the region scheduler"; }
};

struct RegionShared {
  int slot;
  int64_t size;
  double poison;
};
struct RegionLocal {
  int slot;
  int64_t size;
};

// Wraps the region's body so that even a body that is a bare barrier runs through ChildAwaiter.
CoTask RunRegionBody(CStmt* body, ThreadState* ts) { co_await ChildAwaiter(body, ts); }

// The root of a thread region: sets up one context per thread of the block, per-block shared and
// per-thread local storage, then runs the body phase by phase.
class RegionStmt final : public CStmt {
 public:
  RegionStmt(const int64_t dims[3], std::vector<RegionShared> shared,
             std::vector<RegionLocal> local, CStmtPtr body)
      : shared_(std::move(shared)), local_(std::move(local)), body_(std::move(body)) {
    for (int d = 0; d < 3; ++d) dims_[d] = dims[d];
    region_.num_threads = dims_[0] * dims_[1] * dims_[2];
    shared_storage_.resize(shared_.size());
    local_storage_.resize(local_.size());
    for (size_t i = 0; i < shared_.size(); ++i) shared_storage_[i].resize(shared_[i].size);
    for (size_t i = 0; i < local_.size(); ++i) {
      local_storage_[i].resize(local_[i].size * region_.num_threads);
    }
  }

  void Exec(Ctx& c) override {
    const int64_t n = region_.num_threads;
    region_.threads.resize(n);
    for (int64_t t = 0; t < n; ++t) {
      ThreadState& ts = region_.threads[t];
      ts.vars.assign(c.vars, c.vars + c.rt->num_vars);
      ts.bufs.assign(c.bufs, c.bufs + c.rt->num_bufs);
      ts.ctx.vars = ts.vars.data();
      ts.ctx.bufs = ts.bufs.data();
      ts.ctx.rt = c.rt;
      ts.async = AsyncCopies();
      ts.ctx.async = &ts.async;
      ts.wgmma = PendingWgmmas();
      ts.wgmma.reads = &c.rt->wgmma_reads;
      ts.ctx.wgmma = &ts.wgmma;
      ts.ctx.tid[0] = t % dims_[0];
      ts.ctx.tid[1] = (t / dims_[0]) % dims_[1];
      ts.ctx.tid[2] = t / (dims_[0] * dims_[1]);
      ts.region = &region_;
      ts.index = static_cast<int>(t);
      ts.at_barrier = nullptr;
      ts.at_mbarrier = false;
    }
    for (size_t i = 0; i < shared_.size(); ++i) {
      std::fill(shared_storage_[i].begin(), shared_storage_[i].end(), shared_[i].poison);
      for (ThreadState& ts : region_.threads) ts.bufs[shared_[i].slot] = shared_storage_[i].data();
    }
    for (size_t i = 0; i < local_.size(); ++i) {
      for (int64_t t = 0; t < n; ++t) {
        region_.threads[t].bufs[local_[i].slot] = local_storage_[i].data() + t * local_[i].size;
      }
    }
    if (!body_->has_barrier) {
      for (ThreadState& ts : region_.threads) {
        body_->Exec(ts.ctx);
        ts.wgmma.RetireAllBut(0);
        if (c.rt->failed) return;
      }
      return;
    }
    RunPhases(*c.rt);
    for (ThreadState& ts : region_.threads) {
      if (c.rt->failed) return;
      ts.wgmma.RetireAllBut(0);
    }
  }

 private:
  void RunPhases(Runtime& rt) {
    const int64_t n = region_.num_threads;
    std::vector<CoTask> tasks(n);
    for (int64_t t = 0; t < n; ++t) {
      tasks[t] = RunRegionBody(body_.get(), &region_.threads[t]);
      region_.threads[t].resume_point = tasks[t].handle();
    }
    while (true) {
      region_.phase_log.clear();
      for (ThreadState& ts : region_.threads) {
        ts.decision_index = 0;
        ts.at_barrier = nullptr;
        std::coroutine_handle<> h = std::exchange(ts.resume_point, nullptr);
        if (h) h.resume();
        if (rt.failed) return;
      }
      if (!ResumeMbarrierWaits(rt)) return;
      // All threads now wait at a barrier or have left the region.
      const ThreadState& first = region_.threads[0];
      int64_t waiting = 0;
      const ThreadState* missing = nullptr;
      for (const ThreadState& ts : region_.threads) {
        if (ts.at_barrier != nullptr) {
          ++waiting;
        } else if (missing == nullptr) {
          missing = &ts;
        }
      }
      if (waiting == 0) return;
      if (waiting < n) {
        rt.Fail(absl::FailedPreconditionError(
            absl::StrCat("barrier reached by ", waiting, " of ", n, " threads of a block: ",
                         ThreadName(missing->ctx), " left the region without reaching it")));
        return;
      }
      for (const ThreadState& ts : region_.threads) {
        if (ts.at_barrier != first.at_barrier) {
          rt.Fail(absl::FailedPreconditionError(
              absl::StrCat("threads of a block wait at different barriers: ", ThreadName(first.ctx),
                           " and ", ThreadName(ts.ctx))));
          return;
        }
        if (ts.decision_index != region_.phase_log.size()) {
          rt.Fail(DivergenceError(ts, "a barrier"));
          return;
        }
      }
    }
  }

  // Resumes the threads suspended in mbarrier waits until none is (each then waits at a barrier
  // or has left the region); false after reporting a deadlock (a round in which no wait
  // completed and nothing arrived) or another failure.
  bool ResumeMbarrierWaits(Runtime& rt) {
    while (true) {
      const int64_t events = rt.mbarrier_events;
      int64_t blocked = 0;
      bool moved = false;
      ThreadState* first = nullptr;
      for (ThreadState& ts : region_.threads) {
        if (!ts.at_mbarrier) continue;
        std::coroutine_handle<> h = std::exchange(ts.resume_point, nullptr);
        h.resume();
        if (rt.failed) return false;
        if (ts.at_mbarrier) {
          ++blocked;
          if (first == nullptr) first = &ts;
        } else {
          moved = true;
        }
      }
      if (blocked == 0) return true;
      if (!moved && rt.mbarrier_events == events) {
        rt.Fail(absl::FailedPreconditionError(
            absl::StrCat("deadlock: ", blocked, " threads of a block wait on mbarrier phases that ",
                         "nothing completes; the first, ", ThreadName(first->ctx), ", ",
                         static_cast<const MbarrierStmt*>(first->waits_at)->Blocked(first->ctx))));
        return false;
      }
    }
  }

  int64_t dims_[3];
  std::vector<RegionShared> shared_;
  std::vector<RegionLocal> local_;
  CStmtPtr body_;
  Region region_;
  std::vector<std::vector<double>> shared_storage_;
  std::vector<std::vector<double>> local_storage_;
};

// ---------------------------------------------------------------------------------------------
// Compilation.

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// True when an expression reads no variable and no buffer (so it can be evaluated once).
class ConstantChecker : public ExprVisitor {
 public:
  bool constant = true;

 protected:
  void VisitVar(const VarNode*, const Expr&) override { constant = false; }
  void VisitLoad(const LoadNode*, const Expr&) override { constant = false; }
};

// Upper bound on threads per block the interpreter accepts (keeps memory bounded; real GPUs allow
// 1024, so anything near this is a broken schedule anyway).
constexpr int64_t kMaxThreadsPerBlock = 1 << 16;

// A statement that touches a wgmma accumulator (the epilogue's reads, a fresh tile's zeros):
// the thread's groups in flight are performed first, as ptxas makes the hardware wait for them
// before such an access (its warpgroup.wait, note C7517).
class RetireWgmmaFirst final : public CStmt {
 public:
  explicit RetireWgmmaFirst(CStmtPtr inner) : inner_(std::move(inner)) {}
  void Exec(Ctx& c) override {
    if (c.wgmma != nullptr) c.wgmma->RetireAllBut(0);
    inner_->Exec(c);
  }

 private:
  CStmtPtr inner_;
};

// The accumulators of a nest's Wgmma statements.
class WgmmaAccumulators final : public StmtVisitor {
 public:
  std::set<std::string> names;

 protected:
  void VisitWgmma(const WgmmaNode* op, const Stmt& s) override {
    names.insert(op->acc);
    StmtVisitor::VisitWgmma(op, s);
  }
};

// Whether an expression loads one of `names`.
class LoadsAny final : public ExprVisitor {
 public:
  explicit LoadsAny(const std::set<std::string>& names) : names_(names) {}
  bool found = false;

 protected:
  void VisitLoad(const LoadNode* op, const Expr& e) override {
    found = found || names_.count(op->buffer) > 0;
    ExprVisitor::VisitLoad(op, e);
  }

 private:
  const std::set<std::string>& names_;
};

class Compiler {
 public:
  explicit Compiler(Precision precision) : precision_(precision) {}

  /// The accumulators of `body`'s Wgmma statements: Stores that touch them retire the thread's
  /// wgmma groups in flight first (RetireWgmmaFirst).
  void NoteWgmmaAccumulators(const Stmt& body) {
    WgmmaAccumulators v;
    v.Visit(body);
    wgmma_accs_ = std::move(v.names);
  }

  /// Declares a kernel parameter.
  void AddParam(const BufferDecl& decl) { scope_.PushBuf(NewBuf(decl)); }

  absl::StatusOr<CStmtPtr> Compile(const Stmt& s) {
    if (region_ == nullptr) {
      const Flags f = Scan(s);
      if (f.thread && !f.block) return CompileRegion(s);
    }
    switch (s.kind()) {
      case StmtKind::kFor:
        return CompileFor(s.as<ForNode>());
      case StmtKind::kSeq: {
        std::vector<CStmtPtr> stmts;
        for (const Stmt& child : s.as<SeqNode>()->stmts) {
          ASSIGN_OR_RETURN(CStmtPtr c, Compile(child));
          stmts.push_back(std::move(c));
        }
        return CStmtPtr(std::make_unique<SeqStmt>(std::move(stmts)));
      }
      case StmtKind::kStore: {
        const auto* op = s.as<StoreNode>();
        ASSIGN_OR_RETURN(Access access,
                         Access::Make(op->buffer, op->indices, "store", scope_, precision_));
        ASSIGN_OR_RETURN(CExprPtr value, CompileExpr(op->value, scope_, precision_));
        const ScalarType dtype = scope_.FindBuf(op->buffer)->dtype;
        const bool is_float = IsFloat(op->value.type());
        CStmtPtr store;
        if (dtype == ScalarType::kFloat32) {
          store = std::make_unique<StoreStmt<true>>(std::move(access), std::move(value), is_float,
                                                    dtype, op->async_copy);
        } else {
          store = std::make_unique<StoreStmt<false>>(std::move(access), std::move(value), is_float,
                                                     dtype, op->async_copy);
        }
        if (!wgmma_accs_.empty()) {
          LoadsAny reads(wgmma_accs_);
          reads.Visit(op->value);
          if (reads.found || wgmma_accs_.count(op->buffer) > 0) {
            return CStmtPtr(std::make_unique<RetireWgmmaFirst>(std::move(store)));
          }
        }
        return store;
      }
      case StmtKind::kAllocate:
        return CompileAllocate(s.as<AllocateNode>());
      case StmtKind::kIfThenElse: {
        const auto* op = s.as<IfThenElseNode>();
        ASSIGN_OR_RETURN(CExprPtr cond, CompileExpr(op->cond, scope_, precision_));
        ASSIGN_OR_RETURN(CStmtPtr then_case, Compile(op->then_case));
        CStmtPtr else_case;
        if (op->else_case.defined()) {
          ASSIGN_OR_RETURN(else_case, Compile(op->else_case));
        }
        return CStmtPtr(std::make_unique<IfStmt>(op->cond, std::move(cond), std::move(then_case),
                                                 std::move(else_case)));
      }
      case StmtKind::kBarrier:
        // Outside thread regions a block has one thread: the barrier has nothing to wait for.
        if (region_ == nullptr) return CStmtPtr(std::make_unique<NoOpStmt>());
        return CStmtPtr(std::make_unique<BarrierStmt>());
      case StmtKind::kEvaluate: {
        const Expr& v = s.as<EvaluateNode>()->value;
        ASSIGN_OR_RETURN(CExprPtr value, CompileExpr(v, scope_, precision_));
        return CStmtPtr(std::make_unique<EvaluateStmt>(std::move(value), IsFloat(v.type())));
      }
      case StmtKind::kAsyncGroup:
        return CStmtPtr(std::make_unique<AsyncGroupStmt>(*s.as<AsyncGroupNode>()));
      case StmtKind::kWarpMma:
        return CompileWarpMma(*s.as<WarpMmaNode>());
      case StmtKind::kWgmma:
        return CompileWgmma(*s.as<WgmmaNode>());
      case StmtKind::kTmaLoad:
        return CompileTmaLoad(*s.as<TmaLoadNode>());
      case StmtKind::kMbarrier:
        return CompileMbarrier(*s.as<MbarrierNode>());
      case StmtKind::kSetMaxNReg:
        return CStmtPtr(std::make_unique<NopStmt>());
    }
    CHECK(false) << "unhandled statement kind";
    return CStmtPtr();
  }

  int num_vars() const { return num_vars_; }
  int num_bufs() const { return num_bufs_; }

 private:
  struct Flags {
    bool thread = false;
    bool block = false;
  };
  struct RegionInfo {
    int64_t dims[3] = {1, 1, 1};
    std::vector<RegionShared> shared;
    std::vector<RegionLocal> local;
  };

  const BufInfo* NewBuf(const BufferDecl& decl) {
    BufInfo& info = infos_.emplace_back();
    info.slot = num_bufs_++;
    info.name = decl.name;
    info.dtype = decl.dtype;
    info.shape = decl.shape;
    info.strides = RowMajorStrides(decl.shape);
    info.tensor_map = decl.tensor_map;
    return &info;
  }

  Flags Scan(const Stmt& s) {
    auto it = flags_.find(s.get());
    if (it != flags_.end()) return it->second;
    Flags f;
    auto merge = [&](const Stmt& child) {
      if (!child.defined()) return;
      const Flags cf = Scan(child);
      f.thread |= cf.thread;
      f.block |= cf.block;
    };
    switch (s.kind()) {
      case StmtKind::kFor: {
        const auto* op = s.as<ForNode>();
        f.thread = IsThreadBound(op->for_kind);
        f.block = IsBlockBound(op->for_kind);
        merge(op->body);
        break;
      }
      case StmtKind::kSeq:
        for (const Stmt& c : s.as<SeqNode>()->stmts) merge(c);
        break;
      case StmtKind::kAllocate:
        merge(s.as<AllocateNode>()->body);
        break;
      case StmtKind::kIfThenElse:
        merge(s.as<IfThenElseNode>()->then_case);
        merge(s.as<IfThenElseNode>()->else_case);
        break;
      default:
        break;
    }
    flags_[s.get()] = f;
    return f;
  }

  absl::StatusOr<int64_t> ThreadExtent(const ForNode* op) {
    ConstantChecker checker;
    checker.Visit(op->extent);
    if (!checker.constant) {
      return absl::InvalidArgumentError(
          absl::StrCat("extent of ", ForKindName(op->for_kind), " loop '", op->var_name(),
                       "' is not a constant: ", ToString(op->extent)));
    }
    Scope empty;
    ASSIGN_OR_RETURN(CExprPtr e, CompileExpr(op->extent, empty, precision_));
    Runtime rt;
    Ctx c;
    c.rt = &rt;
    const int64_t v = e->I(c);
    if (rt.failed) return rt.status;
    return v;
  }

  // The float32 accumulator `name` of an mma statement, shaped `shape`.
  absl::StatusOr<const BufInfo*> MmaAccumulator(const std::string& what, const std::string& name,
                                                const std::vector<int64_t>& shape) {
    const BufInfo* acc = scope_.FindBuf(name);
    if (acc == nullptr) return absl::InvalidArgumentError(what + ": unknown accumulator buffer");
    if (acc->dtype != ScalarType::kFloat32 || acc->shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": the accumulator must be float32[",
                                                     absl::StrJoin(shape, ", "), "]"));
    }
    return acc;
  }

  // An operand buffer of an mma statement, of the kind's operand type.
  absl::StatusOr<const BufInfo*> MmaOperand(const std::string& what, const std::string& buffer,
                                            MmaKind kind) {
    const BufInfo* info = scope_.FindBuf(buffer);
    if (info == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": unknown operand '", buffer, "'"));
    }
    if (info->dtype != MmaOperandType(kind)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": operand '", buffer, "' is ", TypeName(info->dtype), " but mma kind ",
          MmaKindName(kind), " reads ", TypeName(MmaOperandType(kind))));
    }
    return info;
  }

  absl::StatusOr<CStmtPtr> CompileWarpMma(const WarpMmaNode& n) {
    const std::string what = absl::StrCat("warp mma on '", n.acc, "'");
    ASSIGN_OR_RETURN(const BufInfo* acc, MmaAccumulator(what, n.acc, {n.m_frags, n.n_frags, 4}));
    auto operand = [&](const std::string& buffer, const std::vector<Expr>& origin,
                       bool k_inner) -> absl::StatusOr<WarpMmaStmt::Operand> {
      ASSIGN_OR_RETURN(const BufInfo* info, MmaOperand(what, buffer, n.kind));
      ASSIGN_OR_RETURN(Access a, Access::Make(buffer, origin, "warp mma", scope_, precision_));
      WarpMmaStmt::Operand o;
      o.origin = std::move(a);
      const int nd = static_cast<int>(info->shape.size());
      o.row_dim = k_inner ? nd - 2 : nd - 1;
      o.k_dim = k_inner ? nd - 1 : nd - 2;
      o.row_stride = info->strides[o.row_dim];
      o.k_stride = info->strides[o.k_dim];
      o.shape = info->shape;
      return o;
    };
    ASSIGN_OR_RETURN(WarpMmaStmt::Operand a, operand(n.a, n.a_origin, n.a_k_inner));
    ASSIGN_OR_RETURN(WarpMmaStmt::Operand b, operand(n.b, n.b_origin, n.b_k_inner));
    ASSIGN_OR_RETURN(CExprPtr lane, CompileExpr(n.lane, scope_, precision_));
    return CStmtPtr(
        std::make_unique<WarpMmaStmt>(n, std::move(a), std::move(b), acc->slot, std::move(lane)));
  }

  absl::StatusOr<CStmtPtr> CompileWgmma(const WgmmaNode& n) {
    const std::string what = absl::StrCat("wgmma on '", n.acc, "'");
    ASSIGN_OR_RETURN(const BufInfo* acc, MmaAccumulator(what, n.acc, {n.m_tiles, n.n / 8, 4}));
    auto operand = [&](const std::string& buffer, const Expr& offset,
                       const WgmmaLayout& layout) -> absl::StatusOr<WgmmaStmt::Operand> {
      ASSIGN_OR_RETURN(const BufInfo* info, MmaOperand(what, buffer, n.kind));
      // (A decoded nest skips WgmmaNode::Make's checks.)
      if ((layout.registers && (&layout != &n.a_layout || n.kind != MmaKind::kTF32 ||
                                layout.row_stride < 0 || layout.k_stride < 0)) ||
          (layout.truncated && n.kind != MmaKind::kTF32)) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": operand '", buffer, "' has a registers or truncated layout ",
                         "(tf32 only; registers for A with non-negative strides)"));
      }
      if (layout.swizzle != 32 && layout.swizzle != 64 && layout.swizzle != 128) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": swizzle ", layout.swizzle, " is not 32, 64 or 128 bytes"));
      }
      WgmmaStmt::Operand o;
      o.slot = info->slot;
      o.elems = 1;
      for (int64_t e : info->shape) o.elems *= e;
      ASSIGN_OR_RETURN(o.offset, CompileExpr(offset, scope_, precision_));
      o.layout = layout;
      o.name = buffer;
      return o;
    };
    ASSIGN_OR_RETURN(WgmmaStmt::Operand a, operand(n.a, n.a_offset, n.a_layout));
    ASSIGN_OR_RETURN(WgmmaStmt::Operand b, operand(n.b, n.b_offset, n.b_layout));
    ASSIGN_OR_RETURN(CExprPtr thread, CompileExpr(n.thread, scope_, precision_));
    return CStmtPtr(
        std::make_unique<WgmmaStmt>(n, std::move(a), std::move(b), acc->slot, std::move(thread)));
  }

  // A shared int64 buffer of mbarriers, as TmaLoad and Mbarrier statements use it.
  absl::StatusOr<TmaLoadStmt::Buf> BarrierBuffer(const std::string& what, const std::string& name) {
    const BufInfo* info = scope_.FindBuf(name);
    if (info == nullptr || info->dtype != ScalarType::kInt64) {
      return absl::InvalidArgumentError(what + ": the mbarrier buffer '" + name +
                                        "' is not an int64 buffer in scope");
    }
    TmaLoadStmt::Buf b;
    b.slot = info->slot;
    b.elems = 1;
    for (int64_t e : info->shape) b.elems *= e;
    return b;
  }

  absl::StatusOr<CStmtPtr> CompileTmaLoad(const TmaLoadNode& n) {
    const std::string what = absl::StrCat("tma load into '", n.dst, "'");
    const BufInfo* map = scope_.FindBuf(n.tensor_map);
    if (map == nullptr || !map->tensor_map) {
      return absl::InvalidArgumentError(what + ": '" + n.tensor_map + "' is not a tensor map");
    }
    const BufInfo* src = scope_.FindBuf(map->tensor_map->source);
    const BufInfo* dst = scope_.FindBuf(n.dst);
    if (src == nullptr || dst == nullptr) {
      return absl::InvalidArgumentError(what + ": unknown source or destination buffer");
    }
    BufferDecl source_decl{src->name, src->dtype, src->shape};
    RETURN_IF_ERROR(CheckTensorMap(*map->tensor_map, source_decl));
    if (src->dtype != dst->dtype || n.coords.size() != map->tensor_map->dims.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": copies ", TypeName(src->dtype), " of rank ", map->tensor_map->dims.size(),
          " into ", TypeName(dst->dtype), " with ", n.coords.size(), " coordinates"));
    }
    auto elems = [](const BufInfo* b) {
      int64_t n = 1;
      for (int64_t e : b->shape) n *= e;
      return n;
    };
    ASSIGN_OR_RETURN(TmaLoadStmt::Buf bar, BarrierBuffer(what, n.barrier));
    std::vector<CExprPtr> coords;
    for (const Expr& e : n.coords) {
      ASSIGN_OR_RETURN(CExprPtr c, CompileExpr(e, scope_, precision_));
      coords.push_back(std::move(c));
    }
    ASSIGN_OR_RETURN(CExprPtr offset, CompileExpr(n.dst_offset, scope_, precision_));
    ASSIGN_OR_RETURN(CExprPtr index, CompileExpr(n.barrier_index, scope_, precision_));
    return CStmtPtr(std::make_unique<TmaLoadStmt>(
        what, *map->tensor_map, BytesOf(src->dtype), TmaLoadStmt::Buf{src->slot, elems(src)},
        TmaLoadStmt::Buf{dst->slot, elems(dst)}, bar, std::move(coords), std::move(offset),
        std::move(index)));
  }

  absl::StatusOr<CStmtPtr> CompileMbarrier(const MbarrierNode& n) {
    const std::string what =
        absl::StrCat("mbarrier ", MbarrierOpName(n.op), " on '", n.buffer, "'");
    ASSIGN_OR_RETURN(TmaLoadStmt::Buf bar, BarrierBuffer(what, n.buffer));
    ASSIGN_OR_RETURN(CExprPtr index, CompileExpr(n.index, scope_, precision_));
    CExprPtr parity;
    if (n.op == MbarrierNode::Op::kWait) {
      if (!n.parity.defined()) return absl::InvalidArgumentError(what + ": no parity");
      ASSIGN_OR_RETURN(parity, CompileExpr(n.parity, scope_, precision_));
    }
    return CStmtPtr(std::make_unique<MbarrierStmt>(what, n.op, n.count, bar.slot, bar.elems,
                                                   std::move(index), std::move(parity)));
  }

  absl::StatusOr<CStmtPtr> CompileRegion(const Stmt& s) {
    RegionInfo info;
    RETURN_IF_ERROR(CollectThreadExtents(s, info));
    const int64_t n = info.dims[0] * info.dims[1] * info.dims[2];
    if (n > kMaxThreadsPerBlock) {
      return absl::InvalidArgumentError(
          absl::StrCat("block of ", info.dims[0], "x", info.dims[1], "x", info.dims[2], " = ", n,
                       " threads exceeds the interpreter's limit of ", kMaxThreadsPerBlock));
    }
    region_ = &info;
    absl::StatusOr<CStmtPtr> body = Compile(s);
    region_ = nullptr;
    if (!body.ok()) return body.status();
    return CStmtPtr(std::make_unique<RegionStmt>(info.dims, std::move(info.shared),
                                                 std::move(info.local), std::move(*body)));
  }

  absl::Status CollectThreadExtents(const Stmt& s, RegionInfo& info) {
    if (!s.defined()) return absl::OkStatus();
    switch (s.kind()) {
      case StmtKind::kFor: {
        const auto* op = s.as<ForNode>();
        if (IsThreadBound(op->for_kind)) {
          ASSIGN_OR_RETURN(int64_t ext, ThreadExtent(op));
          const int d = static_cast<int>(op->for_kind) - static_cast<int>(ForKind::kThreadIdxX);
          info.dims[d] = std::max(info.dims[d], ext);
        }
        return CollectThreadExtents(op->body, info);
      }
      case StmtKind::kSeq:
        for (const Stmt& c : s.as<SeqNode>()->stmts) RETURN_IF_ERROR(CollectThreadExtents(c, info));
        return absl::OkStatus();
      case StmtKind::kAllocate:
        return CollectThreadExtents(s.as<AllocateNode>()->body, info);
      case StmtKind::kIfThenElse:
        RETURN_IF_ERROR(CollectThreadExtents(s.as<IfThenElseNode>()->then_case, info));
        return CollectThreadExtents(s.as<IfThenElseNode>()->else_case, info);
      default:
        return absl::OkStatus();
    }
  }

  absl::StatusOr<CStmtPtr> CompileFor(const ForNode* op) {
    ASSIGN_OR_RETURN(CExprPtr min, CompileExpr(op->min, scope_, precision_));
    if (IsThreadBound(op->for_kind) && region_ == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(ForKindName(op->for_kind), " loop '",
                                                     op->var_name(), "' encloses a blockIdx loop"));
    }
    int64_t thread_extent = 0;
    CExprPtr extent;
    if (IsThreadBound(op->for_kind)) {
      ASSIGN_OR_RETURN(thread_extent, ThreadExtent(op));
    } else {
      ASSIGN_OR_RETURN(extent, CompileExpr(op->extent, scope_, precision_));
    }
    const int slot = num_vars_++;
    scope_.PushVar(op->var_name(), slot);
    absl::StatusOr<CStmtPtr> body = Compile(op->body);
    scope_.PopVar();
    if (!body.ok()) return body.status();
    if (IsThreadBound(op->for_kind)) {
      const int d = static_cast<int>(op->for_kind) - static_cast<int>(ForKind::kThreadIdxX);
      return CStmtPtr(std::make_unique<ThreadForStmt>(op->var_name(), op->for_kind, slot,
                                                      std::move(min), thread_extent,
                                                      region_->dims[d], std::move(*body)));
    }
    return CStmtPtr(std::make_unique<ForStmt>(op->var_name(), slot, std::move(min),
                                              std::move(extent), std::move(*body)));
  }

  absl::StatusOr<CStmtPtr> CompileAllocate(const AllocateNode* op) {
    const BufferDecl& decl = op->buffer;
    {
      // Overflow-safe size check before BufferDecl::NumElements (which would wrap).
      HostBuffer probe;
      probe.shape = decl.shape;
      const int64_t n = probe.NumElements();
      if (n < 0 || n > kMaxElements) {
        return absl::InvalidArgumentError(
            absl::StrCat("allocation '", decl.name, "' of shape ", ShapeText(decl.shape),
                         " has more than 2^40 elements (or a negative extent)"));
      }
    }
    const BufInfo* info = NewBuf(decl);
    const int64_t size = decl.NumElements();
    const double poison = PoisonValue(decl.dtype);
    scope_.PushBuf(info);
    absl::StatusOr<CStmtPtr> body = Compile(op->body);
    scope_.PopBuf();
    if (!body.ok()) return body.status();
    if (region_ == nullptr) {
      return CStmtPtr(std::make_unique<AllocStmt>(info->slot, size, poison, std::move(*body)));
    }
    if (decl.scope == MemoryScope::kLocal) {
      region_->local.push_back(RegionLocal{info->slot, size});
      return CStmtPtr(
          std::make_unique<RegionLocalAllocStmt>(info->slot, size, poison, std::move(*body)));
    }
    region_->shared.push_back(RegionShared{info->slot, size, poison});
    return CStmtPtr(std::make_unique<RegionSharedAllocStmt>(std::move(*body)));
  }

  Precision precision_;
  std::set<std::string> wgmma_accs_;  // NoteWgmmaAccumulators
  Scope scope_;
  std::deque<BufInfo> infos_;
  int num_vars_ = 0;
  int num_bufs_ = 0;
  RegionInfo* region_ = nullptr;
  std::unordered_map<const StmtNode*, Flags> flags_;
};

absl::Status CheckParams(const LoopNest& nest, const BufferMap& buffers) {
  std::set<std::string> seen;
  for (const BufferDecl& p : nest.params) {
    if (!seen.insert(p.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("loop nest '", nest.name, "' has two parameters named '", p.name, "'"));
    }
    auto it = buffers.find(p.name);
    if (it == buffers.end()) {
      return absl::InvalidArgumentError(absl::StrCat("missing buffer for parameter '", p.name,
                                                     "' of loop nest '", nest.name, "'"));
    }
    const HostBuffer& b = it->second;
    if (b.dtype != p.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer '", p.name, "' has dtype ", TypeName(b.dtype), " but parameter '",
                       p.name, "' of loop nest '", nest.name, "' is ", TypeName(p.dtype)));
    }
    if (b.shape != p.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer '", p.name, "' has shape ", ShapeText(b.shape), " but parameter '",
                       p.name, "' of loop nest '", nest.name, "' has shape ", ShapeText(p.shape)));
    }
    // NumElements is overflow-safe (-1 for a product above int64), so a shape such as
    // [2^32, 2^32] cannot wrap to the size of an empty buffer.
    if (b.NumElements() < 0 || b.NumElements() > kMaxElements) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer '", p.name, "' has shape ", ShapeText(b.shape),
                       " with more than 2^40 elements (or a negative extent)"));
    }
    if (static_cast<int64_t>(b.data.size()) != b.NumElements()) {
      return absl::InvalidArgumentError(absl::StrCat("buffer '", p.name, "' holds ", b.data.size(),
                                                     " values; its shape ", ShapeText(b.shape),
                                                     " needs ", b.NumElements()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Interpret(const LoopNest& nest, BufferMap& buffers, const InterpretOptions& options) {
  RETURN_IF_ERROR(CheckParams(nest, buffers));
  if (!nest.body.defined()) return absl::OkStatus();
  Runtime rt;
  Compiler compiler(options.precision);
  for (const BufferDecl& p : nest.params) compiler.AddParam(p);
  compiler.NoteWgmmaAccumulators(nest.body);
  ASSIGN_OR_RETURN(CStmtPtr body, compiler.Compile(nest.body));
  rt.num_vars = compiler.num_vars();
  rt.num_bufs = compiler.num_bufs();

  std::vector<int64_t> vars(rt.num_vars, 0);
  std::vector<double*> bufs(rt.num_bufs, nullptr);
  for (size_t i = 0; i < nest.params.size(); ++i) {
    bufs[i] = buffers.at(nest.params[i].name).data.data();
  }
  AsyncCopies async;
  Ctx ctx;
  ctx.async = &async;
  ctx.vars = vars.data();
  ctx.bufs = bufs.data();
  ctx.rt = &rt;
  body->Exec(ctx);
  return rt.status;
}

}  // namespace tilesearch::ir
