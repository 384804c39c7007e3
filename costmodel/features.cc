#include "costmodel/features.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/simplify.h"
#include "schedule/lower.h"

namespace tilesearch::costmodel {
namespace {

using ir::Expr;
using ir::ExprKind;
using ir::ForKind;

// Per-SM limits of sm_80 / sm_90 GPUs (Target has no fields for them): resident blocks, warps
// (2048 threads), shared memory (228 KiB) and 32-bit registers; and the registers a thread needs
// beyond its local buffers (the search's annotation rules assume the same overhead).
constexpr double kMaxBlocksPerSm = 32;
constexpr double kMaxWarpsPerSm = 64;
constexpr double kSharedBytesPerSm = 233472;
constexpr double kRegistersPerSm = 65536;
constexpr double kRegisterOverhead = 32;

// One enclosing loop.
struct Loop {
  std::string var;
  int64_t min = 0;
  int64_t extent = 1;
  double effective = 1;  // extent, or 1 for a threadIdx loop nested in one of the same dimension
  ForKind kind = ForKind::kSerial;
};

struct AllocInScope {
  const ir::BufferDecl* decl;
  double outer_prod;  // product of effective extents of the loops around the Allocate
};

// One access (a Load or the Store) of a buffer.
struct Access {
  const std::vector<Expr>* indices;
};

struct BufferAccesses {
  std::string name;
  const ir::BufferDecl* decl = nullptr;
  bool read = false;
  bool write = false;
  std::vector<Access> accesses;
};

using AccessMap = std::map<std::string, BufferAccesses>;

// The group-4 entries of one buffer, and its name (the last sort key).
struct BufRow {
  std::string name;
  double v[kBufferFeatures] = {};
};

// Bytes of each buffer's region at each level: bytes[b][l], l = 0..n (element bytes x region
// size), and the per-dimension lengths of the level-0 region.
struct BufferRegions {
  std::vector<std::vector<double>> bytes;
  std::vector<std::vector<int64_t>> level0_dims;
};

// What group 8 needs of one kernel launch: its grid, block, shared memory and local buffers.
struct KernelShape {
  double blocks = 1;
  double threads = 1;
  double shared_bytes = 0;
  double local_elements = 0;  // per thread: every local Allocate of the kernel
};

// The kernels of a lowered GPU nest: the top-level statements under its global Allocates
// (schedule::LoweredKernel), one per launch.
std::vector<ir::Stmt> KernelStatements(const ir::LoopNest& nest) {
  ir::Stmt body = nest.body;
  while (body.defined() && body.as<ir::AllocateNode>()) body = body.as<ir::AllocateNode>()->body;
  if (!body.defined()) return {};
  if (const auto* seq = body.as<ir::SeqNode>()) return seq->stmts;
  return {body};
}

// Operation counts of one execution.
struct OpCounts {
  double v[12] = {};
};

class OpCounter : public ir::ExprVisitor {
 public:
  OpCounts counts;
  std::vector<std::pair<std::string, const ir::LoadNode*>> loads;

  void Visit(const Expr& e) override {
    const ExprKind k = e.kind();
    if (ir::IsBinaryKind(k)) {
      const auto& [a, b] = ir::BinaryOperands(e);
      const bool is_float = ir::IsFloat(a.type());
      switch (k) {
        case ExprKind::kAdd:
        case ExprKind::kSub:
          counts.v[is_float ? 0 : 5] += 1;
          break;
        case ExprKind::kMul:
          counts.v[is_float ? 1 : 6] += 1;
          break;
        case ExprKind::kDiv:
        case ExprKind::kMod:
          counts.v[is_float ? 2 : 7] += 1;
          break;
        case ExprKind::kAnd:
        case ExprKind::kOr:
          counts.v[9] += 1;
          break;
        default:  // Min, Max and comparisons
          if (ir::IsBool(a.type())) {
            counts.v[9] += 1;  // comparing bools is boolean logic
          } else {
            counts.v[is_float ? 3 : 8] += 1;
          }
          break;
      }
    } else if (k == ExprKind::kNot) {
      counts.v[9] += 1;
    } else if (k == ExprKind::kSelect) {
      counts.v[10] += 1;
    } else if (k == ExprKind::kCast) {
      counts.v[11] += 1;
    } else if (k == ExprKind::kCall) {
      counts.v[4] += 1;
    } else if (const auto* load = e.as<ir::LoadNode>()) {
      loads.emplace_back(load->buffer, load);
    }
    ir::ExprVisitor::Visit(e);
  }
};

class VarCollector : public ir::ExprVisitor {
 public:
  std::set<std::string>* vars;
  explicit VarCollector(std::set<std::string>* v) : vars(v) {}
  void Visit(const Expr& e) override {
    if (const auto* var = e.as<ir::VarNode>()) vars->insert(var->name);
    ir::ExprVisitor::Visit(e);
  }
};

// Integer evaluation of an index expression (floor division, ir/expr.h); nullopt for anything
// that is not integer arithmetic on the given variables.
std::optional<int64_t> EvalInt(const Expr& e, const std::map<std::string, int64_t>& env) {
  if (auto c = ir::AsConstInt(e)) return *c;
  if (const auto* v = e.as<ir::VarNode>()) {
    auto it = env.find(v->name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  }
  if (const auto* c = e.as<ir::CastNode>()) {
    if (!ir::IsInt(c->type) || !ir::IsInt(c->value.type())) return std::nullopt;
    return EvalInt(c->value, env);
  }
  if (!ir::IsBinaryKind(e.kind()) || !ir::IsInt(e.type())) return std::nullopt;
  const auto& [ea, eb] = ir::BinaryOperands(e);
  auto a = EvalInt(ea, env);
  auto b = EvalInt(eb, env);
  if (!a || !b) return std::nullopt;
  switch (e.kind()) {
    case ExprKind::kAdd:
      return *a + *b;
    case ExprKind::kSub:
      return *a - *b;
    case ExprKind::kMul:
      return *a * *b;
    case ExprKind::kMin:
      return std::min(*a, *b);
    case ExprKind::kMax:
      return std::max(*a, *b);
    case ExprKind::kDiv: {
      if (*b == 0) return std::nullopt;
      int64_t q = *a / *b;
      if ((*a % *b != 0) && ((*a < 0) != (*b < 0))) --q;
      return q;
    }
    case ExprKind::kMod: {
      if (*b == 0) return std::nullopt;
      int64_t r = *a % *b;
      if (r != 0 && ((r < 0) != (*b < 0))) r += *b;
      return r;
    }
    default:
      return std::nullopt;
  }
}

std::optional<int64_t> FlatIndex(const std::vector<Expr>& indices, const ir::BufferDecl& decl,
                                 const std::map<std::string, int64_t>& env) {
  int64_t flat = 0;
  for (size_t d = 0; d < indices.size(); ++d) {
    auto v = EvalInt(indices[d], env);
    if (!v) return std::nullopt;
    const int64_t dim = d < decl.shape.size() ? decl.shape[d] : 1;
    flat = flat * dim + *v;
  }
  return flat;
}

class Extractor {
 public:
  Extractor(const ir::LoopNest& nest, const Target& target, const FeatureOptions& options)
      : target_(target), options_(options), line_bytes_(target.is_gpu() ? 128 : 64) {
    for (const auto& p : nest.params) buffers_[p.name] = &p;
    const std::vector<ir::Stmt> kernels = KernelStatements(nest);
    if (!target.is_gpu() || kernels.size() != options.launches.size()) return;
    for (size_t i = 0; i < kernels.size(); ++i) {
      const LaunchConfig& l = options.launches[i];
      KernelShape k;
      k.blocks = static_cast<double>(l.grid[0] * l.grid[1] * l.grid[2]);
      k.threads = static_cast<double>(l.block[0] * l.block[1] * l.block[2]);
      k.shared_bytes = static_cast<double>(l.shared_memory_bytes);
      k.local_elements = static_cast<double>(ir::LocalElements(kernels[i]));
      kernel_of_[kernels[i].get()] = static_cast<int>(kernel_shapes_.size());
      kernel_shapes_.push_back(k);
    }
  }

  absl::Status Walk(const ir::Stmt& s) {
    if (!s.defined()) return absl::OkStatus();
    if (auto k = kernel_of_.find(s.get()); k != kernel_of_.end()) {
      const int saved = current_kernel_;
      current_kernel_ = k->second;
      absl::Status st = WalkStmt(s);
      current_kernel_ = saved;
      return st;
    }
    return WalkStmt(s);
  }

  StoreFeatures TakeRows() { return std::move(rows_); }

 private:
  absl::Status WalkStmt(const ir::Stmt& s) {
    switch (s.kind()) {
      case ir::StmtKind::kFor: {
        const auto* op = s.as<ir::ForNode>();
        Loop loop;
        loop.var = op->var.as<ir::VarNode>()->name;
        loop.kind = op->for_kind;
        loop.min = ConstOrBound(op->min, /*upper=*/false);
        loop.extent = std::max<int64_t>(1, ConstOrBound(op->extent, /*upper=*/true));
        loop.effective = static_cast<double>(loop.extent);
        if (ir::IsThreadBound(op->for_kind)) {
          for (const Loop& l : loops_) {
            if (l.kind == op->for_kind) loop.effective = 1;
          }
        }
        loops_.push_back(loop);
        ranges_[loop.var] = {loop.min, loop.min + loop.extent - 1};
        absl::Status st = Walk(op->body);
        ranges_.erase(loop.var);
        loops_.pop_back();
        return st;
      }
      case ir::StmtKind::kSeq:
        for (const auto& c : s.as<ir::SeqNode>()->stmts) RETURN_IF_ERROR(Walk(c));
        return absl::OkStatus();
      case ir::StmtKind::kAllocate: {
        const auto* op = s.as<ir::AllocateNode>();
        const ir::BufferDecl* saved = nullptr;
        auto it = buffers_.find(op->buffer.name);
        if (it != buffers_.end()) saved = it->second;
        buffers_[op->buffer.name] = &op->buffer;
        allocs_.push_back({&op->buffer, OuterProd(loops_.size())});
        absl::Status st = Walk(op->body);
        allocs_.pop_back();
        if (saved) {
          buffers_[op->buffer.name] = saved;
        } else {
          buffers_.erase(op->buffer.name);
        }
        return st;
      }
      case ir::StmtKind::kIfThenElse: {
        const auto* op = s.as<ir::IfThenElseNode>();
        ++guards_;
        absl::Status st = Walk(op->then_case);
        if (st.ok()) st = Walk(op->else_case);
        --guards_;
        return st;
      }
      case ir::StmtKind::kStore: {
        ASSIGN_OR_RETURN(std::vector<float> row, StoreRow(*s.as<ir::StoreNode>()));
        rows_.push_back(std::move(row));
        return absl::OkStatus();
      }
      case ir::StmtKind::kBarrier:
      case ir::StmtKind::kEvaluate:
      case ir::StmtKind::kAsyncGroup:  // async copies are Stores (rows like the store they are)
        return absl::OkStatus();
      case ir::StmtKind::kWarpMma:
        return WarpMmaRow(*s.as<ir::WarpMmaNode>());
      case ir::StmtKind::kWgmma:
        return WgmmaRow(*s.as<ir::WgmmaNode>());
      case ir::StmtKind::kTmaLoad:
        return TmaRow(*s.as<ir::TmaLoadNode>());
      case ir::StmtKind::kMbarrier:  // synchronization, like a Barrier
      case ir::StmtKind::kSetMaxNReg:
        return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  int64_t ConstOrBound(const Expr& e, bool upper) const {
    if (auto c = ir::AsConstInt(ir::Simplify(e, ranges_))) return *c;
    ir::BoundResult b = ir::BoundOf(e, ranges_);
    if (b.ok) return upper ? b.range.max : b.range.min;
    return upper ? 1 : 0;
  }

  // Product of the effective extents of loops at depth >= first.
  double InnerProd(size_t first) const {
    double p = 1;
    for (size_t i = first; i < loops_.size(); ++i) p *= loops_[i].effective;
    return p;
  }
  double OuterProd(size_t count) const {
    double p = 1;
    for (size_t i = 0; i < count; ++i) p *= loops_[i].effective;
    return p;
  }

  // The loop ranges at `level`: loops above it fixed at their min, the others over their range.
  ir::RangeMap LevelRanges(size_t level) const {
    ir::RangeMap ranges;
    for (size_t i = 0; i < loops_.size(); ++i) {
      const Loop& l = loops_[i];
      ranges[l.var] =
          i < level ? ir::Interval{l.min, l.min} : ir::Interval{l.min, l.min + l.extent - 1};
    }
    return ranges;
  }

  // Region size (elements) of `buf` with the loop ranges of one level (`bounds`, LevelRanges),
  // and the per-dimension range lengths.
  double RegionSize(const BufferAccesses& buf, ir::BoundMemo& bounds,
                    std::vector<int64_t>* dims) const {
    const auto& shape = buf.decl->shape;
    std::vector<int64_t> lens(shape.size(), 1);
    double size = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t lo = 0, hi = -1;
      bool first = true, known = true;
      for (const Access& a : buf.accesses) {
        if (d >= a.indices->size()) continue;
        ir::BoundResult b = bounds.Of((*a.indices)[d]);
        if (!b.ok) {
          known = false;
          break;
        }
        lo = first ? b.range.min : std::min(lo, b.range.min);
        hi = first ? b.range.max : std::max(hi, b.range.max);
        first = false;
      }
      int64_t len = known && !first ? hi - lo + 1 : shape[d];
      len = std::clamp<int64_t>(len, 1, shape[d]);
      lens[d] = len;
      size *= static_cast<double>(len);
    }
    if (dims) *dims = lens;
    return size;
  }

  // Stride (elements) of `buf`'s flat index along loop `depth`, 0 when it does not change it.
  double StrideAlong(const BufferAccesses& buf, size_t depth) const {
    const Loop& loop = loops_[depth];
    if (loop.extent < 2) return 0;
    std::map<std::string, int64_t> env;
    for (const Loop& l : loops_) env[l.var] = l.min;
    double best = 0;
    for (const Access& a : buf.accesses) {
      env[loop.var] = loop.min;
      auto f0 = FlatIndex(*a.indices, *buf.decl, env);
      env[loop.var] = loop.min + 1;
      auto f1 = FlatIndex(*a.indices, *buf.decl, env);
      env[loop.var] = loop.min + loop.extent - 1;
      auto fn = FlatIndex(*a.indices, *buf.decl, env);
      if (!f0 || !f1 || !fn) continue;
      double s = 0;
      if (*f1 != *f0) {
        s = std::fabs(static_cast<double>(*f1 - *f0));
      } else if (*fn != *f0) {
        s = std::fabs(static_cast<double>(*fn - *f0)) / static_cast<double>(loop.extent - 1);
      }
      if (s > 0 && (best == 0 || s < best)) best = s;
    }
    return best;
  }

  // A warp mma is featurized as the per-thread multiply-accumulate it amounts to: one row of
  // acc[e] = acc[e] + A[r, k] * B[k, c] under an unrolled loop over the thread's accumulator
  // elements and a serial loop over the depth, so the counts, bytes and intensity match the work.
  absl::Status WarpMmaRow(const ir::WarpMmaNode& op) {
    const Expr elem = ir::MakeVar("mma.elem");
    const Expr k = ir::MakeVar("mma.k");
    auto at = [](std::vector<Expr> origin, const Expr& row, const Expr& col, bool k_inner) {
      const size_t n = origin.size();
      origin[n - 2] = ir::Simplify(origin[n - 2] + (k_inner ? row : col));
      origin[n - 1] = ir::Simplify(origin[n - 1] + (k_inner ? col : row));
      return origin;
    };
    const Expr zero = ir::IntConst(0);
    std::vector<Expr> acc_idx = {zero, zero, elem};
    auto a_it = buffers_.find(op.a);
    auto b_it = buffers_.find(op.b);
    if (a_it == buffers_.end() || b_it == buffers_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("warp mma reads an unknown buffer ('", op.a, "' or '", op.b, "')"));
    }
    const ir::ScalarType in = a_it->second->dtype;
    const Expr a = ir::Cast(ir::ScalarType::kFloat32,
                            ir::LoadNode::Make(in, op.a, at(op.a_origin, elem, k, op.a_k_inner)));
    const Expr b = ir::Cast(ir::ScalarType::kFloat32,
                            ir::LoadNode::Make(in, op.b, at(op.b_origin, elem, k, op.b_k_inner)));
    const Expr value = ir::LoadNode::Make(ir::ScalarType::kFloat32, op.acc, acc_idx) + a * b;
    const ir::Stmt store = ir::StoreNode::Make(op.acc, acc_idx, value);
    const int64_t depth =
        op.k_steps * ir::MmaK(op.kind) * (op.kind == ir::MmaKind::kTF32x3 ? 3 : 1);
    return MacRow(store, depth, op.m_frags * op.n_frags * 4);
  }

  // The indices of element `offset` of `decl` read as a flat array (the mma and TMA statements
  // address their shared buffers by element offset): zeros, then the offset.
  static std::vector<Expr> FlatElementIndex(const ir::BufferDecl& decl, const Expr& offset) {
    std::vector<Expr> idx(decl.shape.size(), ir::IntConst(0));
    if (!idx.empty()) idx.back() = ir::Simplify(offset);
    return idx;
  }

  // A wgmma as the per-thread multiply-accumulate it amounts to, like WarpMmaRow; the operands
  // are flat shared buffers read from the tile origins.
  absl::Status WgmmaRow(const ir::WgmmaNode& op) {
    auto a_it = buffers_.find(op.a);
    auto b_it = buffers_.find(op.b);
    if (a_it == buffers_.end() || b_it == buffers_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("wgmma reads an unknown buffer ('", op.a, "' or '", op.b, "')"));
    }
    const Expr elem = ir::MakeVar("mma.elem");
    const Expr k = ir::MakeVar("mma.k");
    const Expr zero = ir::IntConst(0);
    const ir::ScalarType in = a_it->second->dtype;
    const Expr a =
        ir::Cast(ir::ScalarType::kFloat32,
                 ir::LoadNode::Make(in, op.a, FlatElementIndex(*a_it->second, op.a_offset + k)));
    const Expr b =
        ir::Cast(ir::ScalarType::kFloat32,
                 ir::LoadNode::Make(in, op.b, FlatElementIndex(*b_it->second, op.b_offset + elem)));
    const std::vector<Expr> acc_idx = {zero, zero, elem};
    const Expr value = ir::LoadNode::Make(ir::ScalarType::kFloat32, op.acc, acc_idx) + a * b;
    const ir::Stmt store = ir::StoreNode::Make(op.acc, acc_idx, value);
    return MacRow(store, op.k_steps * 16, op.m_tiles * op.n / 2);
  }

  // A TMA box copy as the cooperative asynchronous copy it replaces: the rows count every
  // statement once per thread of the block (the one issuing thread's guard is not modelled), so
  // the box's elements are spread over the block's threads, each copying a contiguous run (read
  // as contiguous in the source throughout) into the shared destination.
  absl::Status TmaRow(const ir::TmaLoadNode& op) {
    auto map_it = buffers_.find(op.tensor_map);
    auto dst_it = buffers_.find(op.dst);
    if (map_it == buffers_.end() || !map_it->second->tensor_map || dst_it == buffers_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("tma load from '", op.tensor_map, "' into '",
                                                     op.dst, "': unknown buffer or no map"));
    }
    const ir::TensorMapSpec& map = *map_it->second->tensor_map;
    auto src_it = buffers_.find(map.source);
    if (src_it == buffers_.end()) {
      return absl::InvalidArgumentError("tma map of unknown buffer '" + map.source + "'");
    }
    const Expr zero = ir::IntConst(0);
    const Expr e = ir::MakeVar("tma.e");
    Expr origin = zero;
    for (size_t d = 0; d < map.dims.size() && d < op.coords.size(); ++d) {
      origin = origin * ir::IntConst(map.dims[d]) + op.coords[d];
    }
    // The block's linear thread index over the enclosing threadIdx loops (x fastest).
    double threads = 1;
    Expr tid = zero;
    for (int d = 2; d >= 0; --d) {
      for (const Loop& t : loops_) {
        if (t.kind != static_cast<ForKind>(static_cast<int>(ForKind::kThreadIdxX) + d) ||
            t.effective <= 1) {
          continue;
        }
        tid = tid * ir::IntConst(t.extent) + ir::MakeVar(t.var);
        threads *= t.effective;
      }
    }
    const int64_t chunk = std::max<int64_t>(
        1, static_cast<int64_t>(std::ceil(static_cast<double>(map.BoxElements()) / threads)));
    const Expr at = tid * ir::IntConst(chunk) + e;
    const Expr value = ir::LoadNode::Make(src_it->second->dtype, map.source,
                                          FlatElementIndex(*src_it->second, origin + at));
    const ir::Stmt store = ir::StoreNode::Make(
        op.dst, FlatElementIndex(*dst_it->second, op.dst_offset + at), value, true);
    Loop l;
    l.var = "tma.e";
    l.extent = chunk;
    // A multicast box is started by one block of the cluster for all of them: each block's share
    // of the L2 reads is 1/multicast.
    l.effective = static_cast<double>(l.extent) / static_cast<double>(op.multicast);
    loops_.push_back(l);
    ranges_[l.var] = {0, l.extent - 1};
    absl::StatusOr<std::vector<float>> row = StoreRow(*store.as<ir::StoreNode>());
    ranges_.erase("tma.e");
    loops_.pop_back();
    if (!row.ok()) return row.status();
    rows_.push_back(*std::move(row));
    return absl::OkStatus();
  }

  // The row of an mma's per-thread update `store` (acc[elem] += a(k) · b(elem), variables
  // "mma.elem" and "mma.k") under a serial loop over the depth and an unrolled loop over the
  // thread's `elems` accumulator elements.
  absl::Status MacRow(const ir::Stmt& store, int64_t depth, int64_t elems) {
    for (const auto& [var, extent, kind] : {std::tuple{"mma.k", depth, ForKind::kSerial},
                                            std::tuple{"mma.elem", elems, ForKind::kUnrolled}}) {
      Loop l;
      l.var = var;
      l.extent = extent;
      l.effective = static_cast<double>(extent);
      l.kind = kind;
      loops_.push_back(l);
      ranges_[l.var] = {0, extent - 1};
    }
    absl::StatusOr<std::vector<float>> row = StoreRow(*store.as<ir::StoreNode>());
    for (const std::string name : {"mma.elem", "mma.k"}) ranges_.erase(name);
    loops_.pop_back();
    loops_.pop_back();
    if (!row.ok()) return row.status();
    rows_.push_back(*std::move(row));
    return absl::OkStatus();
  }

  // The feature vector (costmodel/features.h) of `store` under the current loop stack.
  absl::StatusOr<std::vector<float>> StoreRow(const ir::StoreNode& store) {
    std::vector<double> f(kNumFeatures, 0.0);
    const double outer_prod = OuterProd(loops_.size());

    // Group 1: operation counts. Index expressions of loads are visited inside the value
    // (ExprVisitor descends into them).
    OpCounter counter;
    counter.Visit(store.value);
    for (const Expr& i : store.indices) counter.Visit(i);
    ASSIGN_OR_RETURN(AccessMap by_name, CollectAccesses(store, counter.loads));
    for (int i = 0; i < 12; ++i) f[kComputationOffset + i] = counter.counts.v[i] * outer_prod;
    const double float_ops = counter.counts.v[0] + counter.counts.v[1] + counter.counts.v[2] +
                             counter.counts.v[3] + counter.counts.v[4];

    AnnotationFeatures(store, &f);
    GpuFeatures(&f);
    std::vector<const BufferAccesses*> bufs;
    for (const auto& [name, b] : by_name) bufs.push_back(&b);
    const BufferRegions regions = Regions(bufs);
    BufferFeatures(bufs, regions, outer_prod, &f);
    IntensityFeatures(bufs, regions, float_ops, &f);
    AllocationFeatures(store, &f);
    OuterFeatures(store, outer_prod, &f);
    LaunchFeatures(bufs, float_ops * outer_prod, &f);

    std::vector<float> out(kNumFeatures);
    for (int i = 0; i < kNumFeatures; ++i) {
      out[i] = options_.log_scale ? LogScale(f[i]) : static_cast<float>(f[i]);
    }
    return out;
  }

  // The accesses of `store` by buffer name: the store itself and its value's `loads`. Errors
  // (kInvalidArgument) on a buffer that is neither a parameter nor an enclosing Allocate.
  absl::StatusOr<AccessMap> CollectAccesses(
      const ir::StoreNode& store,
      const std::vector<std::pair<std::string, const ir::LoadNode*>>& loads) const {
    AccessMap by_name;
    auto add_access = [&](const std::string& name, const std::vector<Expr>* idx,
                          bool is_write) -> absl::Status {
      auto it = buffers_.find(name);
      if (it == buffers_.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(is_write ? "store to" : "load of", " unknown buffer '", name, "'"));
      }
      BufferAccesses& b = by_name[name];
      b.name = name;
      b.decl = it->second;
      (is_write ? b.write : b.read) = true;
      b.accesses.push_back({idx});
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(add_access(store.buffer, &store.indices, true));
    for (const auto& [name, load] : loads) {
      RETURN_IF_ERROR(add_access(name, &load->indices, false));
    }
    return by_name;
  }

  // Group 2: vectorize, unroll and parallel loops of the stack.
  void AnnotationFeatures(const ir::StoreNode& store, std::vector<double>* f) const {
    const size_t n = loops_.size();
    std::set<std::string> store_vars;
    VarCollector store_collector(&store_vars);
    for (const Expr& i : store.indices) store_collector.Visit(i);
    const std::pair<ForKind, int> annotated[] = {{ForKind::kVectorized, kVectorizeOffset},
                                                 {ForKind::kUnrolled, kUnrollOffset},
                                                 {ForKind::kParallel, kParallelOffset}};
    for (const auto& [kind, base] : annotated) {
      double num = 0, prod = 1, len = 0;
      int innermost = -1;
      for (size_t i = 0; i < n; ++i) {
        if (loops_[i].kind != kind) continue;
        num += 1;
        prod *= static_cast<double>(loops_[i].extent);
        len = static_cast<double>(loops_[i].extent);
        innermost = static_cast<int>(i);
      }
      (*f)[base + 0] = num;
      (*f)[base + 1] = num > 0 ? prod : 0;
      (*f)[base + 2] = len;
      int pos = 0;
      if (innermost >= 0) {
        const bool spatial = store_vars.count(loops_[innermost].var) > 0;
        const int where = innermost == static_cast<int>(n) - 1 ? 0 : innermost == 0 ? 2 : 1;
        pos = 1 + (spatial ? 0 : 3) + where;
      }
      (*f)[base + 3 + pos] = 1;
    }
  }

  // Group 3: GPU bindings of the stack.
  void GpuFeatures(std::vector<double>* f) const {
    double* g = f->data() + kGpuOffset;
    g[0] = target_.is_gpu() ? 1 : 0;
    for (int i = 1; i <= 7; ++i) g[i] = 1;
    for (const Loop& l : loops_) {
      const double e = static_cast<double>(l.extent);
      if (ir::IsBlockBound(l.kind)) {
        int d = static_cast<int>(l.kind) - static_cast<int>(ForKind::kBlockIdxX);
        g[1 + d] = std::max(g[1 + d], e);
      } else if (ir::IsThreadBound(l.kind)) {
        int d = static_cast<int>(l.kind) - static_cast<int>(ForKind::kThreadIdxX);
        g[4 + d] = std::max(g[4 + d], e);
      } else if (l.kind == ForKind::kVThread) {
        g[7] *= e;
      }
    }
  }

  // Region bytes of every buffer of the store at every level (used by groups 4 and 5).
  BufferRegions Regions(const std::vector<const BufferAccesses*>& bufs) const {
    const size_t n = loops_.size();
    BufferRegions r;
    r.bytes.assign(bufs.size(), std::vector<double>(n + 1));
    r.level0_dims.resize(bufs.size());
    // One range map and one memo of bounds per level, shared by the buffers: their index
    // expressions share subexpressions, and this was half of the extraction's time.
    for (size_t l = 0; l <= n; ++l) {
      const ir::RangeMap ranges = LevelRanges(l);
      ir::BoundMemo bounds(ranges);
      for (size_t b = 0; b < bufs.size(); ++b) {
        const double eb = ir::BytesOf(bufs[b]->decl->dtype);
        r.bytes[b][l] = eb * RegionSize(*bufs[b], bounds, l == 0 ? &r.level0_dims[b] : nullptr);
      }
    }
    return r;
  }

  // Group 4: the buffer rows, sorted by bytes, then lines, then name; the first kMaxBuffers.
  void BufferFeatures(const std::vector<const BufferAccesses*>& bufs, const BufferRegions& regions,
                      double outer_prod, std::vector<double>* f) const {
    std::vector<BufRow> buf_rows;
    for (size_t b = 0; b < bufs.size(); ++b) {
      buf_rows.push_back(BufferRow(b, bufs, regions, outer_prod));
    }
    std::sort(buf_rows.begin(), buf_rows.end(), [](const BufRow& a, const BufRow& b) {
      if (a.v[3] != b.v[3]) return a.v[3] > b.v[3];
      if (a.v[5] != b.v[5]) return a.v[5] > b.v[5];
      return a.name < b.name;
    });
    for (size_t b = 0; b < buf_rows.size() && b < static_cast<size_t>(kMaxBuffers); ++b) {
      for (int i = 0; i < kBufferFeatures; ++i) {
        (*f)[kBufferOffset + kBufferFeatures * b + i] = buf_rows[b].v[i];
      }
    }
  }

  // The group-4 entries of buffer bufs[b].
  BufRow BufferRow(size_t b, const std::vector<const BufferAccesses*>& bufs,
                   const BufferRegions& regions, double outer_prod) const {
    const BufferAccesses& buf = *bufs[b];
    const double eb = ir::BytesOf(buf.decl->dtype);
    const double n_acc = static_cast<double>(buf.accesses.size());
    BufRow row;
    row.name = buf.name;
    double* v = row.v;
    v[buf.read && buf.write ? 2 : buf.write ? 1 : 0] = 1;
    const double bytes = eb * n_acc * outer_prod;
    const double unique_bytes = regions.bytes[b][0];
    double stride = 0;
    const double lines = LinesWithRepeats(buf, eb, &stride);
    const double unique_lines = UniqueLines(buf.decl->shape, regions.level0_dims[b], eb);
    // Reuse.
    const int reuse_loop = ReuseLoop(buf);
    double dis_iter = 0, dis_bytes = 0, reuse_ct = 0;
    if (reuse_loop >= 0) {
      v[7] = 1;
      dis_iter = InnerProd(reuse_loop + 1);
      for (size_t o = 0; o < bufs.size(); ++o) dis_bytes += regions.bytes[o][reuse_loop + 1];
      reuse_ct = loops_[reuse_loop].effective;
    } else if (buf.accesses.size() > 1) {
      v[8] = 1;
      dis_iter = 1;
      for (const BufferAccesses* o : bufs) {
        dis_bytes += ir::BytesOf(o->decl->dtype) * static_cast<double>(o->accesses.size());
      }
      reuse_ct = n_acc - 1;
    } else {
      v[9] = 1;
    }
    const double div = std::max(1.0, reuse_ct);
    v[3] = bytes;
    v[4] = unique_bytes;
    v[5] = lines;
    v[6] = unique_lines;
    v[10] = dis_iter;
    v[11] = dis_bytes;
    v[12] = reuse_ct;
    v[13] = bytes / div;
    v[14] = unique_bytes / div;
    v[15] = lines / div;
    v[16] = unique_lines / div;
    v[17] = stride;
    return row;
  }

  // Cache lines `buf` moves, with repeats, from its stride loop (the innermost loop along which
  // its flat index changes; its stride goes to `stride`, 0 when there is none).
  double LinesWithRepeats(const BufferAccesses& buf, double eb, double* stride) const {
    for (size_t i = loops_.size(); i-- > 0;) {
      const double s = StrideAlong(buf, i);
      if (s > 0) {
        *stride = s;
        const double e = loops_[i].effective;
        const double per_run = std::max(1.0, std::min(e, e * s * eb / line_bytes_));
        return per_run * OuterProd(i);
      }
    }
    return 1;
  }

  // Distinct cache lines of a level-0 region of per-dimension lengths `lens` in a buffer of
  // `shape`: trailing dimensions covered whole are merged into one contiguous run.
  double UniqueLines(const std::vector<int64_t>& shape, const std::vector<int64_t>& lens,
                     double eb) const {
    double run = 1, outer_points = 1;
    int d = static_cast<int>(shape.size()) - 1;
    for (; d >= 0; --d) {
      run *= static_cast<double>(lens[d]);
      if (lens[d] != shape[d]) {
        --d;
        break;
      }
    }
    for (; d >= 0; --d) outer_points *= static_cast<double>(lens[d]);
    return outer_points * std::ceil(run * eb / line_bytes_);
  }

  // Depth of the innermost loop that does not touch `buf`, or -1.
  int ReuseLoop(const BufferAccesses& buf) const {
    std::set<std::string> buf_vars;
    VarCollector collector(&buf_vars);
    for (const Access& a : buf.accesses) {
      for (const Expr& e : *a.indices) collector.Visit(e);
    }
    for (int i = static_cast<int>(loops_.size()) - 1; i >= 0; --i) {
      if (buf_vars.count(loops_[i].var) == 0) return i;
    }
    return -1;
  }

  // Group 5: the arithmetic intensity curve over levels n..0.
  void IntensityFeatures(const std::vector<const BufferAccesses*>& bufs,
                         const BufferRegions& regions, double float_ops,
                         std::vector<double>* f) const {
    std::vector<std::pair<double, double>> points;  // (x, y), x non-decreasing
    for (size_t l = loops_.size() + 1; l-- > 0;) {
      const double iters = InnerProd(l);
      double bytes = 0;
      for (size_t b = 0; b < bufs.size(); ++b) bytes += regions.bytes[b][l];
      points.emplace_back(std::log2(iters), bytes > 0 ? float_ops * iters / bytes : 0);
    }
    const double x_max = points.back().first;
    for (int j = 0; j < 10; ++j) {
      const double x = x_max * (j + 1) / 10.0;
      double y = points.back().second;
      for (size_t p = 0; p < points.size(); ++p) {
        if (points[p].first < x) continue;
        // First point at or beyond x; among equal x the outermost one.
        size_t q = p;
        while (q + 1 < points.size() && points[q + 1].first == points[p].first) ++q;
        if (p == 0 || points[p].first == x) {
          y = points[q].second;
        } else {
          const auto& [x0, y0] = points[p - 1];
          const auto& [x1, y1] = points[p];
          y = y0 + (y1 - y0) * (x - x0) / (x1 - x0);
        }
        break;
      }
      (*f)[kIntensityOffset + j] = y;
    }
  }

  // Group 6: the Allocates around the store.
  void AllocationFeatures(const ir::StoreNode& store, std::vector<double>* f) const {
    double* a = f->data() + kAllocationOffset;
    for (const AllocInScope& alloc : allocs_) {
      if (alloc.decl->name == store.buffer) {
        a[0] = static_cast<double>(alloc.decl->Bytes());
        a[1] = alloc.outer_prod;
      }
      if (alloc.decl->scope == ir::MemoryScope::kShared) {
        a[2] += static_cast<double>(alloc.decl->Bytes());
      } else if (alloc.decl->scope == ir::MemoryScope::kLocal) {
        a[3] += static_cast<double>(alloc.decl->Bytes());
      }
      a[4] += 1;
    }
  }

  // The launch the current store belongs to: the lowered kernel's LaunchConfig where the nest's
  // kernels and FeatureOptions::launches correspond, else what the store's own loop stack and the
  // Allocates around it show (its blockIdx / threadIdx extents, shared and local buffers).
  KernelShape CurrentKernel() const {
    if (current_kernel_ >= 0) return kernel_shapes_[current_kernel_];
    KernelShape k;
    double grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
    for (const Loop& l : loops_) {
      const double e = static_cast<double>(l.extent);
      if (ir::IsBlockBound(l.kind)) {
        double& g = grid[static_cast<int>(l.kind) - static_cast<int>(ForKind::kBlockIdxX)];
        g = std::max(g, e);
      } else if (ir::IsThreadBound(l.kind)) {
        double& b = block[static_cast<int>(l.kind) - static_cast<int>(ForKind::kThreadIdxX)];
        b = std::max(b, e);
      }
    }
    k.blocks = grid[0] * grid[1] * grid[2];
    k.threads = block[0] * block[1] * block[2];
    for (const AllocInScope& alloc : allocs_) {
      if (alloc.decl->scope == ir::MemoryScope::kShared) {
        k.shared_bytes += static_cast<double>(alloc.decl->Bytes());
      } else if (alloc.decl->scope == ir::MemoryScope::kLocal) {
        k.local_elements += static_cast<double>(alloc.decl->NumElements());
      }
    }
    return k;
  }

  // Group 8: the store's kernel launch against the SMs (see the header for each entry).
  void LaunchFeatures(const std::vector<const BufferAccesses*>& bufs, double store_float_ops,
                      std::vector<double>* f) const {
    if (!target_.is_gpu()) return;
    double* o = f->data() + kLaunchOffset;
    const KernelShape k = CurrentKernel();
    const double regs = std::min(255.0, k.local_elements + kRegisterOverhead);
    const double warps = std::ceil(k.threads / 32);
    // Resident blocks per SM: the least of the limits by blocks, warps, shared memory (with the
    // 1 KiB the driver reserves per block) and registers (allocated per warp in units of 256).
    double resident = kMaxBlocksPerSm;
    resident = std::min(resident, std::floor(kMaxWarpsPerSm / warps));
    if (k.shared_bytes > 0) {
      resident = std::min(resident, std::floor(kSharedBytesPerSm / (k.shared_bytes + 1024)));
    }
    const double regs_per_warp = std::ceil(regs * 32 / 256) * 256;
    resident = std::min(resident, std::floor(kRegistersPerSm / (regs_per_warp * warps)));
    // A measured kernel did launch: at least one block fits (ptxas caps the registers).
    resident = std::max(1.0, resident);
    const double sms = std::max(1, target_.sm_count);
    const double wave = sms * resident;
    const double waves = std::ceil(k.blocks / wave);
    double global_bytes = 0;
    for (const BufferAccesses* b : bufs) {
      if (b->decl->scope != ir::MemoryScope::kGlobal) continue;
      global_bytes += ir::BytesOf(b->decl->dtype) * static_cast<double>(b->accesses.size()) *
                      OuterProd(loops_.size());
    }
    double k_tiles = 1;
    for (const Loop& l : loops_) {
      if (l.kind == ForKind::kSerial && l.extent > 1) {
        k_tiles = static_cast<double>(l.extent);
        break;
      }
    }
    const double stages = static_cast<double>(options_.pipeline_stages);
    o[0] = k.blocks;
    o[1] = k.threads;
    o[2] = k.shared_bytes;
    o[3] = regs;
    o[4] = resident;
    o[5] = resident * warps / kMaxWarpsPerSm;
    o[6] = k.blocks / sms;
    o[7] = waves;
    o[8] = (k.blocks - (waves - 1) * wave) / wave;
    o[9] = store_float_ops / k.blocks;
    o[10] = global_bytes / k.blocks;
    o[11] = k_tiles;
    o[12] = stages;
    o[13] = stages / k_tiles;
  }

  // Group 7: the outer scope.
  void OuterFeatures(const ir::StoreNode& store, double outer_prod, std::vector<double>* f) const {
    double* o = f->data() + kOuterOffset;
    o[0] = outer_prod;
    o[1] = static_cast<double>(loops_.size());
    auto unroll = options_.auto_unroll_max_step.find(store.buffer);
    if (unroll != options_.auto_unroll_max_step.end()) {
      o[2] = static_cast<double>(unroll->second);
    }
    o[3] = guards_;
  }

  const Target& target_;
  const FeatureOptions& options_;
  const double line_bytes_;
  std::map<std::string, const ir::BufferDecl*> buffers_;
  std::vector<Loop> loops_;
  ir::RangeMap ranges_;
  std::vector<AllocInScope> allocs_;
  int guards_ = 0;
  StoreFeatures rows_;
  // Launches of the nest's kernels (group 8), by kernel statement; the one being walked.
  std::vector<KernelShape> kernel_shapes_;
  std::map<const ir::StmtNode*, int> kernel_of_;
  int current_kernel_ = -1;
};

std::vector<std::string> MakeNames() {
  std::vector<std::string> names = {"float_addsub", "float_mul",  "float_divmod", "float_cmp",
                                    "float_math",   "int_addsub", "int_mul",      "int_divmod",
                                    "int_cmp",      "bool_op",    "select_op",    "cast_op"};
  const char* positions[] = {"none",         "inner_spatial", "middle_spatial", "outer_spatial",
                             "inner_reduce", "middle_reduce", "outer_reduce"};
  for (const char* k : {"vec", "unroll", "parallel"}) {
    names.push_back(absl::StrCat(k, "_num"));
    names.push_back(absl::StrCat(k, "_prod"));
    names.push_back(absl::StrCat(k, "_len"));
    for (const char* p : positions) names.push_back(absl::StrCat(k, "_pos_", p));
  }
  for (const char* g : {"is_gpu", "blockIdx_x_len", "blockIdx_y_len", "blockIdx_z_len",
                        "threadIdx_x_len", "threadIdx_y_len", "threadIdx_z_len", "vthread_len"}) {
    names.push_back(g);
  }
  const char* buf_names[] = {"acc_read",
                             "acc_write",
                             "acc_rw",
                             "bytes",
                             "unique_bytes",
                             "lines",
                             "unique_lines",
                             "reuse_loop",
                             "reuse_serial",
                             "reuse_none",
                             "reuse_dis_iter",
                             "reuse_dis_bytes",
                             "reuse_ct",
                             "bytes_d_reuse_ct",
                             "unique_bytes_d_reuse_ct",
                             "lines_d_reuse_ct",
                             "unique_lines_d_reuse_ct",
                             "stride"};
  for (int b = 0; b < kMaxBuffers; ++b) {
    for (const char* n : buf_names) names.push_back(absl::StrCat("buf", b, "_", n));
  }
  for (int j = 0; j < 10; ++j) names.push_back(absl::StrCat("ai_curve_", j));
  for (const char* a : {"store_alloc_bytes", "store_alloc_outer_prod", "shared_bytes_in_scope",
                        "local_bytes_in_scope", "num_allocs_in_scope", "outer_prod", "num_loops",
                        "auto_unroll_max_step", "num_guards"}) {
    names.push_back(a);
  }
  for (const char* l :
       {"launch_blocks", "launch_threads", "launch_shared_bytes", "launch_registers",
        "resident_blocks_per_sm", "occupancy", "blocks_per_sm_count", "waves", "last_wave_fill",
        "float_ops_per_block", "global_bytes_per_block", "k_tiles", "pipeline_stages",
        "stages_per_k_tile"}) {
    names.push_back(l);
  }
  CHECK(static_cast<int>(names.size()) == kNumFeatures) << "feature names " << names.size();
  return names;
}

}  // namespace

const std::vector<std::string>& FeatureNames() {
  static const std::vector<std::string>* names = new std::vector<std::string>(MakeNames());
  return *names;
}

float LogScale(double x) {
  return static_cast<float>(x < 0 ? -std::log2(1.0 - x) : std::log2(1.0 + x));
}

absl::StatusOr<StoreFeatures> ExtractFeatures(const ir::LoopNest& nest, const Target& target,
                                              const FeatureOptions& options) {
  Extractor extractor(nest, target, options);
  RETURN_IF_ERROR(extractor.Walk(nest.body));
  return extractor.TakeRows();
}

absl::StatusOr<StoreFeatures> ExtractLoweredFeatures(const schedule::State& state,
                                                     const schedule::LoweredKernel& kernel,
                                                     const Target& target) {
  FeatureOptions options;
  options.launches = kernel.launches;
  for (int i = 0; i < state.num_stages(); ++i) {
    const schedule::Stage& stage = state.stage(i);
    if (stage.auto_unroll_max_step > 0) {
      options.auto_unroll_max_step[stage.name()] = stage.auto_unroll_max_step;
    }
    options.pipeline_stages = std::max(options.pipeline_stages, stage.software_pipeline);
    if (stage.tensor_core) {
      options.pipeline_stages = std::max(options.pipeline_stages, stage.tensor_core->pipeline);
    }
  }
  return ExtractFeatures(kernel.nest, target, options);
}

absl::StatusOr<StoreFeatures> ExtractStateFeatures(const ir::ComputeDAG& dag,
                                                   const schedule::State& state,
                                                   const Target& target) {
  ASSIGN_OR_RETURN(schedule::LoweredKernel kernel, schedule::Lower(dag, state, target));
  return ExtractLoweredFeatures(state, kernel, target);
}

}  // namespace tilesearch::costmodel
