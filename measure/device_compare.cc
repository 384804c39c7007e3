// The device compare module: PTX text, slot encoding, and launches through the driver.
#include "measure/device_compare.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tilesearch::measure {

namespace cuda = runtime::cuda;
using runtime::CudaContext;
using runtime::CudaDriver;
using runtime::CudaModule;
namespace {

constexpr int kThreadsPerBlock = 256;  // a multiple of the warp size (the kernels rely on it)
constexpr int64_t kMaxBlocks = 1024;   // ~2 blocks of 256 threads per SM of an H200 (132 SMs)

// One butterfly step of a warp reduction of the 64-bit register `reg` with `op` (add, min, max
// on .u64): both 32-bit halves exchanged with the lane `offset` away.
std::string ReduceStep(const std::string& reg, const std::string& op, int offset) {
  return absl::StrCat("  mov.b64 {%r5, %r6}, ", reg,
                      ";\n"
                      "  shfl.sync.bfly.b32 %r7, %r5, ",
                      offset,
                      ", 31, 0xffffffff;\n"
                      "  shfl.sync.bfly.b32 %r8, %r6, ",
                      offset,
                      ", 31, 0xffffffff;\n"
                      "  mov.b64 %rd14, {%r7, %r8};\n"
                      "  ",
                      op, ".u64 ", reg, ", ", reg, ", %rd14;\n");
}

// The element types the compare kernels read: float32, and float16 / bfloat16 widened to float32
// (exactly) before the same float64 rule.
enum class CompareElement16 { kNone, kFloat16, kBFloat16 };

// PTX loading element %rd5 of the buffer at `base` into the float32 register `f` (%h1 / %r10 are
// scratch), the byte offset in %rd8.
std::string LoadElement(CompareElement16 kind, const char* base, const char* f) {
  switch (kind) {
    case CompareElement16::kNone:
      return absl::StrCat("  add.u64 %rd9, ", base, ", %rd8;\n  ld.global.f32 ", f, ", [%rd9];\n");
    case CompareElement16::kFloat16:
      return absl::StrCat("  add.u64 %rd9, ", base, ", %rd8;\n  ld.global.b16 %h1, [%rd9];\n",
                          "  cvt.f32.f16 ", f, ", %h1;\n");
    case CompareElement16::kBFloat16:
      // bfloat16 is the upper half of a float32.
      return absl::StrCat("  add.u64 %rd9, ", base, ", %rd8;\n  ld.global.b16 %h1, [%rd9];\n",
                          "  cvt.u32.u16 %r10, %h1;\n  shl.b32 %r10, %r10, 16;\n  mov.b32 ", f,
                          ", %r10;\n");
  }
  return "";
}

// The entry tilesearch_compare_<suffix>(got, expected, n, atol, rtol, slot, list, list_capacity,
// magnitude, allowance) (see the header comment).
std::string CompareEntry(const char* suffix, CompareElement16 kind) {
  std::string ptx = absl::StrCat(".visible .entry tilesearch_compare_", suffix,
                                 "(\n"
                                 "  .param .u64 p_got,\n"
                                 "  .param .u64 p_expected,\n"
                                 "  .param .u64 p_n,\n"
                                 "  .param .f64 p_atol,\n"
                                 "  .param .f64 p_rtol,\n"
                                 "  .param .u64 p_slot,\n"
                                 "  .param .u64 p_list,\n"
                                 "  .param .u64 p_capacity,\n"
                                 "  .param .u64 p_magnitude,\n"
                                 "  .param .f64 p_allowance)\n"
                                 "{\n"
                                 "  .reg .pred %p<14>;\n"
                                 "  .reg .b16 %h<4>;\n"
                                 "  .reg .b32 %r<12>;\n"
                                 "  .reg .b64 %rd<22>;\n"
                                 "  .reg .f32 %f<4>;\n"
                                 "  .reg .f64 %fd<18>;\n"
                                 "  ld.param.u64 %rd1, [p_got];\n"
                                 "  ld.param.u64 %rd2, [p_expected];\n"
                                 "  ld.param.u64 %rd3, [p_n];\n"
                                 "  ld.param.f64 %fd1, [p_atol];\n"
                                 "  ld.param.f64 %fd2, [p_rtol];\n"
                                 "  ld.param.u64 %rd4, [p_slot];\n"
                                 "  ld.param.u64 %rd17, [p_list];\n"
                                 "  ld.param.u64 %rd16, [p_capacity];\n"
                                 "  ld.param.u64 %rd20, [p_magnitude];\n"
                                 "  ld.param.f64 %fd16, [p_allowance];\n"
                                 "  setp.ne.u64 %p12, %rd20, 0;\n"  // magnitudes given
                                 "  cvta.to.global.u64 %rd20, %rd20;\n"
                                 "  cvta.to.global.u64 %rd1, %rd1;\n"
                                 "  cvta.to.global.u64 %rd2, %rd2;\n"
                                 "  cvta.to.global.u64 %rd4, %rd4;\n"
                                 "  cvta.to.global.u64 %rd17, %rd17;\n");
  absl::StrAppend(
      &ptx,
      "  mov.u32 %r1, %ctaid.x;\n"
      "  mov.u32 %r2, %ntid.x;\n"
      "  mov.u32 %r3, %tid.x;\n"
      "  mov.u32 %r4, %nctaid.x;\n"
      "  mul.wide.u32 %rd5, %r1, %r2;\n"
      "  cvt.u64.u32 %rd6, %r3;\n"
      "  add.u64 %rd5, %rd5, %rd6;\n"           // i: this thread's first element
      "  mul.wide.u32 %rd7, %r4, %r2;\n"        // stride: threads in the grid
      "  mov.u64 %rd10, 0;\n"                   // mismatches
      "  mov.u64 %rd11, 0xffffffffffffffff;\n"  // first mismatching index
      "  mov.f64 %fd10, 0d0000000000000000;\n"  // max abs error
      "  mov.f64 %fd11, 0d0000000000000000;\n"  // max rel error
      "  mov.f64 %fd12, 0d7FF0000000000000;\n"  // +inf
      "  mov.f64 %fd13, 0d39B4484BFEEBC2A0;\n"  // 1e-30
      "$Lc_loop:\n"
      "  setp.ge.u64 %p1, %rd5, %rd3;\n"
      "  @%p1 bra $Lc_reduce;\n"
      "  shl.b64 %rd8, %rd5, ",
      kind == CompareElement16::kNone ? 2 : 1, ";\n", LoadElement(kind, "%rd1", "%f1"),
      LoadElement(kind, "%rd2", "%f2"),
      "  cvt.f64.f32 %fd3, %f1;\n"  // got (exact)
      "  cvt.f64.f32 %fd4, %f2;\n"  // expected (exact)
      "  testp.finite.f64 %p2, %fd4;\n"
      "  testp.finite.f64 %p3, %fd3;\n"
      "  @!%p2 bra $Lc_nonfinite;\n"
      // Finite expected: errors, then |got - expected| <= atol + rtol * |expected| and got finite.
      "  abs.f64 %fd5, %fd4;\n"
      "  sub.rn.f64 %fd6, %fd3, %fd4;\n"
      "  abs.f64 %fd6, %fd6;\n"
      "  selp.f64 %fd7, %fd6, %fd12, %p3;\n"  // abs error: +inf for a non-finite got
      "  max.f64 %fd10, %fd10, %fd7;\n"
      "  setp.gt.f64 %p4, %fd5, %fd1;\n"  // rel error only where |expected| > atol
      "  @!%p4 bra $Lc_tolerance;\n"
      "  max.f64 %fd8, %fd5, %fd13;\n"
      "  div.rn.f64 %fd9, %fd7, %fd8;\n"
      "  max.f64 %fd11, %fd11, %fd9;\n"
      "$Lc_tolerance:\n"
      "  mul.rn.f64 %fd14, %fd2, %fd5;\n"
      "  add.rn.f64 %fd14, %fd1, %fd14;\n"
      // The cancellation allowance: + allowance * M where M (float32) is given and finite.
      "  @!%p12 bra $Lc_bound;\n"
      "  shl.b64 %rd21, %rd5, 2;\n"
      "  add.u64 %rd21, %rd20, %rd21;\n"
      "  ld.global.f32 %f3, [%rd21];\n"
      "  cvt.f64.f32 %fd15, %f3;\n"
      "  testp.finite.f64 %p13, %fd15;\n"
      "  @!%p13 bra $Lc_bound;\n"
      "  mul.rn.f64 %fd17, %fd16, %fd15;\n"
      "  add.rn.f64 %fd14, %fd14, %fd17;\n"
      "$Lc_bound:\n"
      "  setp.le.f64 %p5, %fd6, %fd14;\n"
      "  and.pred %p5, %p5, %p3;\n"
      "  bra $Lc_judged;\n"
      // Non-finite expected: the same Inf, or NaN for NaN.
      "$Lc_nonfinite:\n"
      "  setp.eq.f64 %p5, %fd3, %fd4;\n"
      "  testp.notanumber.f64 %p6, %fd4;\n"
      "  testp.notanumber.f64 %p7, %fd3;\n"
      "  and.pred %p6, %p6, %p7;\n"
      "  or.pred %p5, %p5, %p6;\n"
      "$Lc_judged:\n"
      "  @%p5 bra $Lc_next;\n"
      "  add.u64 %rd10, %rd10, 1;\n"
      "  min.u64 %rd11, %rd11, %rd5;\n"
      // The list: (index, got as float64 bits) at the next of `capacity` places, counted in slot
      // word 4; once full, only the (cheap, approximate) read of the count is left per mismatch.
      "  setp.eq.u64 %p6, %rd16, 0;\n"
      "  @%p6 bra $Lc_next;\n"
      "  ld.volatile.global.u64 %rd18, [%rd4+32];\n"
      "  setp.ge.u64 %p6, %rd18, %rd16;\n"
      "  @%p6 bra $Lc_next;\n"
      "  atom.global.add.u64 %rd18, [%rd4+32], 1;\n"
      "  setp.ge.u64 %p6, %rd18, %rd16;\n"
      "  @%p6 bra $Lc_next;\n"
      "  shl.b64 %rd19, %rd18, 4;\n"
      "  add.u64 %rd19, %rd17, %rd19;\n"
      "  mov.b64 %rd15, %fd3;\n"
      "  st.global.v2.u64 [%rd19], {%rd5, %rd15};\n"
      "$Lc_next:\n"
      "  add.u64 %rd5, %rd5, %rd7;\n"
      "  bra $Lc_loop;\n"
      "$Lc_reduce:\n"
      "  mov.b64 %rd12, %fd10;\n"
      "  mov.b64 %rd13, %fd11;\n");
  for (int offset : {16, 8, 4, 2, 1}) {
    absl::StrAppend(&ptx, ReduceStep("%rd10", "add", offset), ReduceStep("%rd11", "min", offset),
                    ReduceStep("%rd12", "max", offset), ReduceStep("%rd13", "max", offset));
  }
  absl::StrAppend(&ptx,
                  "  and.b32 %r9, %r3, 31;\n"
                  "  setp.ne.u32 %p8, %r9, 0;\n"
                  "  @%p8 bra $Lc_done;\n"
                  "  setp.eq.u64 %p9, %rd10, 0;\n"
                  "  @%p9 bra $Lc_abs;\n"
                  "  atom.global.add.u64 %rd15, [%rd4], %rd10;\n"
                  "  atom.global.min.u64 %rd15, [%rd4+24], %rd11;\n"
                  "$Lc_abs:\n"
                  "  setp.eq.u64 %p10, %rd12, 0;\n"
                  "  @%p10 bra $Lc_rel;\n"
                  "  atom.global.max.u64 %rd15, [%rd4+8], %rd12;\n"
                  "$Lc_rel:\n"
                  "  setp.eq.u64 %p11, %rd13, 0;\n"
                  "  @%p11 bra $Lc_done;\n"
                  "  atom.global.max.u64 %rd15, [%rd4+16], %rd13;\n"
                  "$Lc_done:\n"
                  "  ret;\n"
                  "}\n");
  return ptx;
}

// The entry tilesearch_bytes_differ(a, b, bytes, slot) (see the header comment).
std::string BytesDifferEntry() {
  return ".visible .entry tilesearch_bytes_differ(\n"
         "  .param .u64 p_a,\n"
         "  .param .u64 p_b,\n"
         "  .param .u64 p_bytes,\n"
         "  .param .u64 p_slot)\n"
         "{\n"
         "  .reg .pred %p<6>;\n"
         "  .reg .b32 %r<8>;\n"
         "  .reg .b64 %rd<16>;\n"
         "  ld.param.u64 %rd1, [p_a];\n"
         "  ld.param.u64 %rd2, [p_b];\n"
         "  ld.param.u64 %rd3, [p_bytes];\n"
         "  ld.param.u64 %rd4, [p_slot];\n"
         "  cvta.to.global.u64 %rd1, %rd1;\n"
         "  cvta.to.global.u64 %rd2, %rd2;\n"
         "  cvta.to.global.u64 %rd4, %rd4;\n"
         "  shr.u64 %rd5, %rd3, 2;\n"  // whole words
         "  mov.u32 %r1, %ctaid.x;\n"
         "  mov.u32 %r2, %ntid.x;\n"
         "  mov.u32 %r3, %tid.x;\n"
         "  mov.u32 %r4, %nctaid.x;\n"
         "  mul.wide.u32 %rd6, %r1, %r2;\n"
         "  cvt.u64.u32 %rd8, %r3;\n"
         "  add.u64 %rd6, %rd6, %rd8;\n"  // this thread's first word
         "  mov.u64 %rd11, %rd6;\n"       // the thread's index in the grid
         "  mul.wide.u32 %rd7, %r4, %r2;\n"
         "  mov.u64 %rd10, 0;\n"  // differing words
         "$Lb_loop:\n"
         "  setp.ge.u64 %p1, %rd6, %rd5;\n"
         "  @%p1 bra $Lb_tail;\n"
         "  shl.b64 %rd8, %rd6, 2;\n"
         "  add.u64 %rd9, %rd1, %rd8;\n"
         "  ld.global.u32 %r5, [%rd9];\n"
         "  add.u64 %rd9, %rd2, %rd8;\n"
         "  ld.global.u32 %r6, [%rd9];\n"
         "  setp.ne.u32 %p2, %r5, %r6;\n"
         "  @%p2 add.u64 %rd10, %rd10, 1;\n"
         "  add.u64 %rd6, %rd6, %rd7;\n"
         "  bra $Lb_loop;\n"
         "$Lb_tail:\n"  // thread 0 of the grid compares the last bytes % 4 bytes
         "  setp.ne.u64 %p3, %rd11, 0;\n"
         "  @%p3 bra $Lb_add;\n"
         "  shl.b64 %rd12, %rd5, 2;\n"
         "$Lb_tail_loop:\n"
         "  setp.ge.u64 %p4, %rd12, %rd3;\n"
         "  @%p4 bra $Lb_add;\n"
         "  add.u64 %rd9, %rd1, %rd12;\n"
         "  ld.global.u8 %r5, [%rd9];\n"
         "  add.u64 %rd9, %rd2, %rd12;\n"
         "  ld.global.u8 %r6, [%rd9];\n"
         "  setp.ne.u32 %p2, %r5, %r6;\n"
         "  @%p2 add.u64 %rd10, %rd10, 1;\n"
         "  add.u64 %rd12, %rd12, 1;\n"
         "  bra $Lb_tail_loop;\n"
         "$Lb_add:\n"
         "  setp.eq.u64 %p5, %rd10, 0;\n"
         "  @%p5 bra $Lb_done;\n"
         "  atom.global.add.u64 %rd13, [%rd4], %rd10;\n"
         "$Lb_done:\n"
         "  ret;\n"
         "}\n";
}

// The module: PTX ISA 7.0 for sm_75 (JIT-compiled by the driver for any newer device).
std::string BuildPtx() {
  return absl::StrCat(".version 7.0\n.target sm_75\n.address_size 64\n\n",
                      CompareEntry("f32", CompareElement16::kNone), "\n",
                      CompareEntry("f16", CompareElement16::kFloat16), "\n",
                      CompareEntry("bf16", CompareElement16::kBFloat16), "\n", BytesDifferEntry());
}

unsigned int GridFor(int64_t items) {
  const int64_t blocks = (items + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned int>(std::clamp<int64_t>(blocks, 1, kMaxBlocks));
}

}  // namespace

const std::string& DeviceComparePtx() {
  static const std::string* ptx = new std::string(BuildPtx());
  return *ptx;
}

CompareSlot InitialCompareSlot() {
  return {0, std::bit_cast<uint64_t>(0.0), std::bit_cast<uint64_t>(0.0), ~uint64_t{0}, 0};
}

CompareSummary DecodeCompareSlot(const CompareSlot& slot, int64_t elements) {
  CompareSummary s;
  s.elements = elements;
  s.mismatches = static_cast<int64_t>(slot[0]);
  s.max_abs_error = std::bit_cast<double>(slot[1]);
  s.max_rel_error = std::bit_cast<double>(slot[2]);
  s.first_mismatch = s.mismatches > 0 ? static_cast<int64_t>(slot[3]) : -1;
  return s;
}

absl::StatusOr<std::unique_ptr<DeviceComparer>> DeviceComparer::Create(const CudaContext& context) {
  std::unique_ptr<DeviceComparer> c(new DeviceComparer);
  c->context_ = &context;
  ASSIGN_OR_RETURN(c->module_, CudaModule::LoadPtx(context.driver(), DeviceComparePtx()));
  ASSIGN_OR_RETURN(c->compare_f32_, c->module_->GetFunction("tilesearch_compare_f32"));
  ASSIGN_OR_RETURN(c->compare_f16_, c->module_->GetFunction("tilesearch_compare_f16"));
  ASSIGN_OR_RETURN(c->compare_bf16_, c->module_->GetFunction("tilesearch_compare_bf16"));
  ASSIGN_OR_RETURN(c->bytes_differ_, c->module_->GetFunction("tilesearch_bytes_differ"));
  return c;
}

bool DeviceComparer::Supports(ir::ScalarType dtype) {
  return dtype == ir::ScalarType::kFloat32 || dtype == ir::ScalarType::kFloat16 ||
         dtype == ir::ScalarType::kBFloat16;
}

absl::Status DeviceComparer::Compare(ir::ScalarType dtype, cuda::CUdeviceptr got,
                                     cuda::CUdeviceptr expected, int64_t n,
                                     const Tolerance& tolerance, cuda::CUdeviceptr slot,
                                     cuda::CUdeviceptr list, int64_t list_capacity,
                                     cuda::CUdeviceptr magnitude) const {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("compare of ", n, " elements"));
  if (list_capacity < 0 || (list_capacity > 0 && list == 0)) {
    return absl::InvalidArgumentError(absl::StrCat("compare with a mismatch list of capacity ",
                                                   list_capacity, list == 0 ? " and no list" : ""));
  }
  cuda::CUfunction f = dtype == ir::ScalarType::kFloat32    ? compare_f32_
                       : dtype == ir::ScalarType::kFloat16  ? compare_f16_
                       : dtype == ir::ScalarType::kBFloat16 ? compare_bf16_
                                                            : nullptr;
  if (f == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the device compare reads float32, float16 and bfloat16, not ", ir::TypeName(dtype)));
  }
  if (n == 0) return absl::OkStatus();
  uint64_t count = static_cast<uint64_t>(n);
  uint64_t capacity = static_cast<uint64_t>(list_capacity);
  double atol = tolerance.atol;
  double rtol = tolerance.rtol;
  double allowance = tolerance.allowance;
  void* params[] = {&got,  &expected, &count,    &atol,      &rtol,
                    &slot, &list,     &capacity, &magnitude, &allowance};
  const CudaDriver& d = context_->driver();
  return d.Check(
      d.cuLaunchKernel(f, GridFor(n), 1, 1, kThreadsPerBlock, 1, 1, 0, nullptr, params, nullptr),
      absl::StrCat("cuLaunchKernel(tilesearch_compare_", ir::TypeName(dtype), ")"));
}

absl::Status DeviceComparer::CompareFloat32(cuda::CUdeviceptr got, cuda::CUdeviceptr expected,
                                            int64_t n, const Tolerance& tolerance,
                                            cuda::CUdeviceptr slot) const {
  return Compare(ir::ScalarType::kFloat32, got, expected, n, tolerance, slot, 0, 0);
}

absl::Status DeviceComparer::CountDifferences(cuda::CUdeviceptr a, cuda::CUdeviceptr b,
                                              int64_t bytes, cuda::CUdeviceptr slot) const {
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("byte compare of ", bytes, " bytes"));
  }
  if (bytes == 0) return absl::OkStatus();
  uint64_t count = static_cast<uint64_t>(bytes);
  void* params[] = {&a, &b, &count, &slot};
  const CudaDriver& d = context_->driver();
  return d.Check(d.cuLaunchKernel(bytes_differ_, GridFor(bytes / 4), 1, 1, kThreadsPerBlock, 1, 1,
                                  0, nullptr, params, nullptr),
                 "cuLaunchKernel(tilesearch_bytes_differ)");
}

}  // namespace tilesearch::measure
