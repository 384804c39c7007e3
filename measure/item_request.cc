// Fixed-width little-endian fields, strings as length + bytes, integer lists as count + values; the
// nest in ir::EncodeLoopNest's form as the last string. A GPU argument ends with a tensor map flag
// and, when set, the map (source, dims, box, swizzle).
#include "measure/item_request.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/loop_nest_codec.h"

namespace tilesearch::measure {
namespace {

class Writer {
 public:
  void I64(int64_t v) { Raw(&v, sizeof v); }
  void F64(double v) { Raw(&v, sizeof v); }
  void Str(const std::string& s) {
    I64(static_cast<int64_t>(s.size()));
    out_ += s;
  }
  void Ints(const std::vector<int64_t>& v) {
    I64(static_cast<int64_t>(v.size()));
    for (int64_t x : v) I64(x);
  }
  void Context(const RequestContext& c) {
    I64(static_cast<int64_t>(c.batch));
    F64(c.screen_above_ms);
    F64(c.compile_ms);
    I64(c.min_runs);
    F64(c.min_total_ms);
    F64(c.soak_ms);
  }
  std::string Take() { return std::move(out_); }

 private:
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  bool ok() const { return ok_; }
  bool AtEnd() const { return pos_ == bytes_.size(); }
  int64_t I64() {
    int64_t v = 0;
    Raw(&v, sizeof v);
    return v;
  }
  double F64() {
    double v = 0;
    Raw(&v, sizeof v);
    return v;
  }
  std::string Str() {
    const int64_t n = I64();
    if (!ok_ || n < 0 || static_cast<uint64_t>(n) > bytes_.size() - pos_) {
      ok_ = false;
      return "";
    }
    std::string s = bytes_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  std::vector<int64_t> Ints() {
    std::vector<int64_t> v(static_cast<size_t>(Count(8)));
    for (int64_t& x : v) x = I64();
    return v;
  }
  // A count of following items of at least `min_bytes` each.
  int64_t Count(size_t min_bytes) {
    const int64_t n = I64();
    if (!ok_ || n < 0 || static_cast<uint64_t>(n) > (bytes_.size() - pos_) / min_bytes) {
      ok_ = false;
      return 0;
    }
    return n;
  }
  RequestContext Context() {
    RequestContext c;
    c.batch = static_cast<uint64_t>(I64());
    c.screen_above_ms = F64();
    c.compile_ms = F64();
    c.min_runs = I64();
    c.min_total_ms = F64();
    c.soak_ms = F64();
    return c;
  }

 private:
  void Raw(void* p, size_t n) {
    if (!ok_ || bytes_.size() - pos_ < n) {
      ok_ = false;
      return;
    }
    std::memcpy(p, bytes_.data() + pos_, n);
    pos_ += n;
  }
  const std::string& bytes_;
  size_t pos_ = 0;
  bool ok_ = true;
};

absl::Status Corrupt(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("corrupt measure request: ", what));
}

}  // namespace

void ApplyRequestContext(const RequestContext& context, MeasureOptions* options) {
  options->screen_above_ms = context.screen_above_ms;
  if (context.min_runs <= 0) return;
  runtime::TimingOptions& timing = options->timing;
  timing.min_runs = static_cast<int>(context.min_runs);
  timing.min_total_ms = context.min_total_ms;
  timing.soak_ms = context.soak_ms;
  timing.max_runs = std::max(timing.max_runs, timing.min_runs);
  // A long timing asked for (a held final timing) is not cut at the default wall limit, nor the
  // worker killed at the default run timeout while it soaks and times.
  timing.max_wall_ms = runtime::WallLimitFor(timing.max_wall_ms, timing.min_total_ms);
  options->run_timeout_ms += timing.soak_ms + timing.max_wall_ms;
  options->screen_factor = 0;
}

std::string EncodeHostRequest(const HostRequest& request) {
  Writer w;
  w.Context(request.context);
  w.Str(ir::EncodeLoopNest(request.nest));
  return w.Take();
}

absl::StatusOr<HostRequest> DecodeHostRequest(const std::string& bytes) {
  Reader r(bytes);
  HostRequest request;
  request.context = r.Context();
  const std::string nest = r.Str();
  if (!r.ok() || !r.AtEnd()) return Corrupt("truncated or malformed host request");
  absl::StatusOr<ir::LoopNest> decoded = ir::DecodeLoopNest(nest);
  if (!decoded.ok()) return Corrupt(std::string(decoded.status().message()));
  request.nest = *std::move(decoded);
  return request;
}

std::string EncodeGpuRequest(const GpuRequest& request) {
  Writer w;
  w.Context(request.context);
  w.I64(request.tf32x3_gate ? 1 : 0);
  const codegen::GpuModule& m = request.module;
  w.Str(m.cubin.empty() ? m.ptx : "");
  w.Str(m.arch);
  w.Str(m.cubin);
  w.I64(static_cast<int64_t>(m.kernels.size()));
  for (const codegen::GpuKernelInfo& k : m.kernels) {
    w.Str(k.name);
    for (int64_t v : k.grid) w.I64(v);
    for (int64_t v : k.block) w.I64(v);
    w.I64(k.static_shared_bytes);
    w.I64(k.dynamic_shared_bytes);
  }
  w.I64(static_cast<int64_t>(m.args.size()));
  for (const codegen::KernelArg& a : m.args) {
    w.Str(a.buffer.name);
    w.I64(static_cast<int64_t>(a.buffer.dtype));
    w.I64(static_cast<int64_t>(a.buffer.shape.size()));
    for (int64_t d : a.buffer.shape) w.I64(d);
    w.I64(static_cast<int64_t>(a.buffer.scope));
    w.I64(static_cast<int64_t>(a.kind));
    w.I64(a.buffer.tensor_map ? 1 : 0);
    if (a.buffer.tensor_map) {
      w.Str(a.buffer.tensor_map->source);
      w.Ints(a.buffer.tensor_map->dims);
      w.Ints(a.buffer.tensor_map->box);
      w.I64(a.buffer.tensor_map->swizzle);
    }
  }
  return w.Take();
}

absl::StatusOr<GpuRequest> DecodeGpuRequest(const std::string& bytes) {
  Reader r(bytes);
  GpuRequest request;
  request.context = r.Context();
  request.tf32x3_gate = r.I64() != 0;
  codegen::GpuModule& m = request.module;
  m.ptx = r.Str();
  m.arch = r.Str();
  m.cubin = r.Str();
  const int64_t kernels = r.Count(8);
  for (int64_t i = 0; i < kernels && r.ok(); ++i) {
    codegen::GpuKernelInfo k;
    k.name = r.Str();
    for (int64_t& v : k.grid) v = r.I64();
    for (int64_t& v : k.block) v = r.I64();
    k.static_shared_bytes = r.I64();
    k.dynamic_shared_bytes = r.I64();
    m.kernels.push_back(std::move(k));
  }
  const int64_t args = r.Count(8);
  for (int64_t i = 0; i < args && r.ok(); ++i) {
    codegen::KernelArg a;
    a.buffer.name = r.Str();
    const int64_t dtype = r.I64();
    const int64_t rank = r.Count(8);
    for (int64_t d = 0; d < rank && r.ok(); ++d) a.buffer.shape.push_back(r.I64());
    const int64_t scope = r.I64();
    const int64_t kind = r.I64();
    const int64_t has_map = r.I64();
    if (has_map == 1) {
      ir::TensorMapSpec map;
      map.source = r.Str();
      map.dims = r.Ints();
      map.box = r.Ints();
      map.swizzle = r.I64();
      a.buffer.tensor_map = std::move(map);
    }
    if (!r.ok()) break;  // reported below as truncated
    if (dtype < 0 || dtype > static_cast<int64_t>(ir::ScalarType::kBool) || scope < 0 ||
        scope > static_cast<int64_t>(ir::MemoryScope::kLocal) || kind < 0 ||
        kind > static_cast<int64_t>(codegen::KernelArg::Kind::kTensorMap) || has_map < 0 ||
        has_map > 1) {
      return Corrupt(absl::StrCat("argument ", i, " has dtype ", dtype, ", scope ", scope,
                                  ", kind ", kind, ", tensor map flag ", has_map));
    }
    // A tensor map travels exactly with its kind: the worker encodes one for each such argument.
    if ((kind == static_cast<int64_t>(codegen::KernelArg::Kind::kTensorMap)) != (has_map == 1)) {
      return Corrupt(absl::StrCat("argument ", i, " of kind ", kind,
                                  has_map == 1 ? " has" : " lacks", " a tensor map"));
    }
    a.buffer.dtype = static_cast<ir::ScalarType>(dtype);
    a.buffer.scope = static_cast<ir::MemoryScope>(scope);
    a.kind = static_cast<codegen::KernelArg::Kind>(kind);
    m.args.push_back(std::move(a));
  }
  if (!r.ok() || !r.AtEnd()) return Corrupt("truncated or malformed GPU request");
  return request;
}

}  // namespace tilesearch::measure
