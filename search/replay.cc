#include "search/replay.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status.h"
#include "base/write_file.h"
#include "measure/runner.h"
#include "measure/tensor_map_args.h"
#include "nlohmann/json.hpp"
#include "runtime/tensor_map.h"
#include "schedule/apply_step.h"
#include "search/log_io.h"

namespace tilesearch::search {
namespace {

using json = nlohmann::json;

std::string TrialName(const MeasureRecord& record) { return absl::StrCat("trial ", record.trial); }

absl::Status Prefixed(const std::string& prefix, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(prefix, ": ", std::string(status.message())));
}

bool IsCIdentifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

std::string Sanitize(const std::string& text) {
  std::string out;
  for (char c : text) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out;
}

// Refuses a pick that lines the log could not read may beat (LogContents::suspect_lines).
absl::Status CheckNoSuspectLines(const std::string& log_path, const LogContents& log,
                                 const std::string& workload_key) {
  if (log.suspect_lines == 0) return absl::OkStatus();
  std::string lines = absl::StrJoin(log.suspect_line_numbers, ", ");
  if (log.suspect_lines > static_cast<int64_t>(log.suspect_line_numbers.size())) {
    absl::StrAppend(&lines, ", ...");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      log_path, ": ", log.suspect_lines,
      log.suspect_lines == 1 ? " line that may hold a record" : " lines that may hold records",
      " of workload ", workload_key, " could not be read (line",
      log.suspect_lines == 1 ? " " : "s ", lines,
      "; the warnings say why), so the best record may be among them: repair or remove ",
      log.suspect_lines == 1 ? "it" : "them", ", or allow replaying from the lines that were read ",
      "(replay or bench --allow-unreadable-lines)"));
}

absl::StatusOr<ReplayedRecord> BestOfLog(const std::string& log_path,
                                         const std::string& workload_key, const Target& target,
                                         const std::string& op, bool allow_unreadable_lines) {
  ReadOptions read;
  read.workload_key = workload_key;  // every target kept: BestRecord names the others
  read.verify_workload_keys = true;  // a record whose key lies about its workload is skipped
  ASSIGN_OR_RETURN(LogContents log, ReadLog(log_path, read));
  if (!allow_unreadable_lines) RETURN_IF_ERROR(CheckNoSuspectLines(log_path, log, workload_key));
  if (log.corrupt_lines > 0) {
    log.warnings.push_back(absl::StrCat(log_path, ": ", log.corrupt_lines, " of ", log.lines,
                                        " lines could not be used (see above)"));
  }
  // The best valid record that still replays: one that no longer does (a log of an older build,
  // a hand-edited line) is skipped with a warning and the next best is tried; when none
  // replays, the best one's error.
  std::vector<MeasureRecord>& records = log.records;
  std::vector<std::string> skipped;
  absl::Status best_error;
  while (true) {
    absl::StatusOr<MeasureRecord> best = BestRecord(records, workload_key, target);
    if (!best.ok() && best_error.ok() && absl::StartsWith(best.status().message(), "no record ")) {
      // Say what the log does hold: a wrong shape or dtype is the usual reason.
      const std::string others = OtherWorkloadsText(log, op);
      if (!others.empty()) {
        return absl::NotFoundError(
            absl::StrCat(log_path, ": ", best.status().message(), "; ", others));
      }
    }
    if (!best.ok()) return Prefixed(log_path, best_error.ok() ? best.status() : best_error);
    absl::StatusOr<ReplayedRecord> replayed = ReplayRecord(*best);
    if (replayed.ok()) {
      replayed->warnings = std::move(log.warnings);
      replayed->warnings.insert(replayed->warnings.end(), skipped.begin(), skipped.end());
      return replayed;
    }
    if (best_error.ok()) best_error = replayed.status();
    skipped.push_back(absl::StrCat(
        log_path, ": skipped the record of trial ", best->trial, " (", best->median_ms(),
        " ms), which does not replay: ", replayed.status().message(), "; using the next best"));
    // Drop that record (the first equal one) and pick again.
    auto it = std::find_if(records.begin(), records.end(), [&](const MeasureRecord& r) {
      return r.trial == best->trial && r.steps == best->steps &&
             r.workload_key == best->workload_key && r.median_ms() == best->median_ms();
    });
    if (it == records.end()) return Prefixed(log_path, best_error);  // cannot happen
    records.erase(it);
  }
}

// ---------------------------------------------------------------------------------------------
// ptxas.

// ---------------------------------------------------------------------------------------------
// Description of the artifact.

// C names of the arguments: sanitized buffer names, made unique, never a C keyword or a name the
// generated code uses itself.
std::vector<std::string> ArgumentNames(const std::vector<codegen::KernelArg>& args,
                                       const std::string& prefix) {
  static const std::set<std::string> kReserved = {
      "auto",     "break",  "case",   "char",     "const",    "continue",  "default",  "do",
      "double",   "else",   "enum",   "extern",   "float",    "for",       "goto",     "if",
      "inline",   "int",    "long",   "register", "restrict", "return",    "short",    "signed",
      "sizeof",   "static", "struct", "switch",   "typedef",  "union",     "unsigned", "void",
      "volatile", "while",  "bool",   "stream",   "params",   "functions", "result"};
  std::vector<std::string> names;
  std::set<std::string> used;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = prefix + Sanitize(args[i].buffer.name);
    if (kReserved.count(name) > 0 || used.count(name) > 0) name = absl::StrCat(name, "_", i);
    used.insert(name);
    names.push_back(name);
  }
  return names;
}

const char* CType(ir::ScalarType t) {
  switch (t) {
    case ir::ScalarType::kFloat32:
      return "float";
    case ir::ScalarType::kFloat16:
    case ir::ScalarType::kBFloat16:
      return "uint16_t";
    case ir::ScalarType::kInt32:
      return "int32_t";
    case ir::ScalarType::kInt64:
      return "int64_t";
    case ir::ScalarType::kBool:
      return "uint8_t";
  }
  return "void";
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string Upper(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// The argument table of the header comment, one line per named argument: the first
// names.size() of a.args (cuda: all of them; cpu: the entry's parameters, scratch buffers being
// allocated by the entry itself).
std::string ArgumentTable(const KernelArtifact& a, const std::vector<std::string>& names) {
  CHECK(names.size() <= a.args.size()) << names.size() << " names for " << a.args.size() << " args";
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    const codegen::KernelArg& arg = a.args[i];
    absl::StrAppend(
        &out, absl::StrFormat(" *   %-2d %-12s %-7s %-8s %-16s %d bytes\n", i, names[i],
                              codegen::KernelArgKindName(arg.kind), ir::TypeName(arg.buffer.dtype),
                              ShapeText(arg.buffer.shape), arg.bytes()));
  }
  return out;
}

std::string HeaderPreamble(const KernelArtifact& a) {
  const MeasureRecord& r = a.record;
  return absl::StrCat("/* ", a.name, ".h: generated by tilesearch replay (do not edit).\n",
                      " * Workload: ", r.workload.ToString(), " (key ", r.workload_key, ")\n",
                      " * Target: ", r.target.ToString(),
                      r.device_name.empty() ? "" : " (" + r.device_name + ")", "\n * Tuning trial ",
                      r.trial, ": median ", absl::StrFormat("%.6g", r.median_ms()), " ms, ",
                      absl::StrFormat("%.4g", a.gflops()), " GFLOP/s\n");
}

// cuda.h's names of the CU_TENSOR_MAP_* enum values, indexed by value.
std::string TensorMapDataTypeName(int value) {
  static const char* const kNames[] = {"UINT8", "UINT16",  "UINT32",  "INT32",   "UINT64",
                                       "INT64", "FLOAT16", "FLOAT32", "FLOAT64", "BFLOAT16"};
  return value >= 0 && value < 10 ? absl::StrCat("CU_TENSOR_MAP_DATA_TYPE_", kNames[value])
                                  : absl::StrCat("(CUtensorMapDataType)", value);
}
std::string TensorMapSwizzleName(int value) {
  static const char* const kNames[] = {"NONE", "32B", "64B", "128B"};
  return value >= 0 && value < 4 ? absl::StrCat("CU_TENSOR_MAP_SWIZZLE_", kNames[value])
                                 : absl::StrCat("(CUtensorMapSwizzle)", value);
}

// The launcher's code that encodes tensor-map argument i over its source's buffer (both named as
// in `names`) and copies it into the argument's buffer on `stream`. The maps are encoded at every
// launch because only then are the source addresses known; encoding costs microseconds.
std::string TensorMapEncodeCode(const KernelArtifact& a, const std::vector<std::string>& names,
                                size_t i) {
  const ir::TensorMapSpec& m = *a.args[i].buffer.tensor_map;
  absl::StatusOr<size_t> source = measure::TensorMapSource(a.args, i);
  absl::StatusOr<runtime::TensorMapEncoding> e =
      source.ok() ? runtime::TensorMapEncodeArgs(m, a.args[*source].buffer.dtype)
                  : absl::StatusOr<runtime::TensorMapEncoding>(source.status());
  if (!e.ok()) {
    // Codegen checked every map (codegen::KernelArgs), so only a hand-made artifact gets here:
    // its launcher refuses at run time and says why beside the refusal.
    return absl::StrCat("  /* ", names[i], " cannot be encoded: ", e.status().message(),
                        " */\n  return CUDA_ERROR_INVALID_VALUE;\n");
  }
  auto list = [](const auto& v) { return absl::StrCat("{", absl::StrJoin(v, ", "), "}"); };
  const size_t rank = e->rank;
  // Rank 1 has no strides: the driver gets a valid (ignored) one-element array all the same.
  const std::string strides = rank > 1 ? list(e->global_strides) : "{0}";
  std::string c = absl::StrCat("  {\n    /* ", names[i], ": TMA tensor map of ", names[*source],
                               " (dims ", ShapeText(m.dims), ", box ", ShapeText(m.box), ", ",
                               m.swizzle, "-byte swizzle); dimensions innermost first */\n");
  absl::StrAppend(&c, "    static const cuuint64_t dims[", rank, "] = ", list(e->global_dim),
                  ";\n    static const cuuint64_t strides[", std::max<size_t>(1, rank - 1),
                  "] = ", strides, ";  /* bytes */\n    static const cuuint32_t box[", rank,
                  "] = ", list(e->box_dim), ";\n    static const cuuint32_t element_strides[", rank,
                  "] = ", list(e->element_strides), ";\n");
  absl::StrAppend(
      &c,
      "    /* The driver wants the map 64-byte aligned, which C99 cannot declare. */\n"
      "    unsigned char raw[sizeof(CUtensorMap) + 64];\n"
      "    CUtensorMap* map = (CUtensorMap*)(raw + (64 - (uintptr_t)raw % 64) % 64);\n");
  absl::StrAppend(&c, "    result = cuTensorMapEncodeTiled(map, ",
                  TensorMapDataTypeName(e->data_type), ", ", rank, ", (void*)(uintptr_t)",
                  names[*source],
                  ", dims, strides, box,\n"
                  "                                    element_strides, "
                  "CU_TENSOR_MAP_INTERLEAVE_NONE, ",
                  TensorMapSwizzleName(e->swizzle),
                  ",\n                                    CU_TENSOR_MAP_L2_PROMOTION_L2_128B, "
                  "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);\n"
                  "    if (result != CUDA_SUCCESS) return result;\n"
                  "    result = cuMemcpyHtoDAsync(",
                  names[i],
                  ", map, sizeof(CUtensorMap), stream);\n"
                  "    if (result != CUDA_SUCCESS) return result;\n  }\n");
  return c;
}

std::string CudaHeader(const KernelArtifact& a) {
  const std::string upper = Upper(a.name);
  const std::vector<std::string> names = ArgumentNames(a.args, "d_");
  const std::vector<codegen::GpuKernelInfo>& kernels = a.gpu->kernels;
  std::vector<size_t> maps;
  for (size_t i = 0; i < a.args.size(); ++i) {
    if (a.args[i].kind == codegen::KernelArg::Kind::kTensorMap) maps.push_back(i);
  }
  std::string h = HeaderPreamble(a);
  absl::StrAppend(&h, " *\n * Use: load ", a.name, ".cubin (or ", a.name,
                  ".ptx) with cuModuleLoad or cuModuleLoadData,\n * look the kernels up with ",
                  a.name,
                  "_get_functions, allocate one device buffer per argument\n"
                  " * (dense row-major, in this order; scratch buffers only hold intermediates) "
                  "and call\n * ",
                  a.name, "_launch:\n", ArgumentTable(a, names));
  if (!maps.empty()) {
    absl::StrAppend(&h,
                    " * A tensor_map argument is a TMA descriptor (CUtensorMap, 128 bytes, 64-byte "
                    "aligned as\n * cuMemAlloc's are): ",
                    a.name,
                    "_launch encodes it over its source's buffer with\n"
                    " * cuTensorMapEncodeTiled and copies it there on `stream` before the "
                    "launches (CUDA 12+).\n");
  }
  absl::StrAppend(&h, " */\n#ifndef TILESEARCH_", upper, "_H_\n#define TILESEARCH_", upper,
                  "_H_\n\n#include <cuda.h>\n#include <stddef.h>\n",
                  maps.empty() ? "" : "#include <stdint.h>\n", "\n");
  if (!maps.empty()) {
    absl::StrAppend(&h,
                    "#if CUDA_VERSION < 12000\n#error \"the kernel takes TMA tensor maps: "
                    "cuTensorMapEncodeTiled needs CUDA 12.0 or newer\"\n#endif\n\n");
  }
  absl::StrAppend(&h, "#define ", upper, "_NUM_KERNELS ", kernels.size(), "\n");
  absl::StrAppend(&h, "#define ", upper, "_NUM_ARGS ", a.args.size(), "\n");
  for (size_t i = 0; i < a.args.size(); ++i) {
    absl::StrAppend(&h, "#define ", upper, "_ARG", i, "_BYTES ((size_t)", a.args[i].bytes(), ")\n");
  }
  absl::StrAppend(&h, "\nstatic const char* const ", a.name, "_kernel_names[", kernels.size(),
                  "] = {");
  for (size_t k = 0; k < kernels.size(); ++k) {
    absl::StrAppend(&h, k > 0 ? ", " : "", "\"", kernels[k].name, "\"");
  }
  absl::StrAppend(&h, "};\n\n");

  absl::StrAppend(&h, "/* Looks up the kernels of the loaded module, in launch order. */\n",
                  "static inline CUresult ", a.name, "_get_functions(CUmodule module, CUfunction ",
                  "functions[", kernels.size(), "]) {\n  CUresult result;\n");
  for (size_t k = 0; k < kernels.size(); ++k) {
    absl::StrAppend(&h, "  result = cuModuleGetFunction(&functions[", k, "], module, \"",
                    kernels[k].name, "\");\n  if (result != CUDA_SUCCESS) return result;\n");
    const int64_t total = kernels[k].static_shared_bytes + kernels[k].dynamic_shared_bytes;
    if (kernels[k].dynamic_shared_bytes > 0 && total > 48 * 1024) {
      absl::StrAppend(&h, "  result = cuFuncSetAttribute(functions[", k,
                      "], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, ",
                      kernels[k].dynamic_shared_bytes,
                      ");\n  if (result != CUDA_SUCCESS) return result;\n");
    }
  }
  absl::StrAppend(&h, "  return CUDA_SUCCESS;\n}\n\n");

  absl::StrAppend(&h, "/* Launches every kernel in order on `stream` (asynchronous). */\n",
                  "static inline CUresult ", a.name, "_launch(const CUfunction functions[",
                  kernels.size(), "]");
  for (const std::string& n : names) absl::StrAppend(&h, ", CUdeviceptr ", n);
  absl::StrAppend(&h, ", CUstream stream) {\n  void* params[", std::max<size_t>(1, names.size()),
                  "] = {");
  for (size_t i = 0; i < names.size(); ++i) absl::StrAppend(&h, i > 0 ? ", " : "", "&", names[i]);
  if (names.empty()) absl::StrAppend(&h, "NULL");
  absl::StrAppend(&h, "};\n  CUresult result;\n");
  for (size_t i : maps) absl::StrAppend(&h, TensorMapEncodeCode(a, names, i));
  for (size_t k = 0; k < kernels.size(); ++k) {
    const codegen::GpuKernelInfo& kn = kernels[k];
    absl::StrAppend(&h, "  /* ", kn.name, ": ", kn.static_shared_bytes,
                    " bytes of static shared memory */\n  result = cuLaunchKernel(functions[", k,
                    "], ", kn.grid[0], ", ", kn.grid[1], ", ", kn.grid[2], ", ", kn.block[0], ", ",
                    kn.block[1], ", ", kn.block[2], ", ", kn.dynamic_shared_bytes,
                    ", stream, params, NULL);\n  if (result != CUDA_SUCCESS) return result;\n");
  }
  absl::StrAppend(&h, "  return CUDA_SUCCESS;\n}\n\n#endif  /* TILESEARCH_", upper, "_H_ */\n");
  return h;
}

std::string CpuHeader(const KernelArtifact& a) {
  const std::string upper = Upper(a.name);
  std::vector<codegen::KernelArg> params(a.args.begin(), a.args.begin() + a.num_params);
  const std::vector<std::string> names = ArgumentNames(params, "");
  std::string h = HeaderPreamble(a);
  absl::StrAppend(&h, " * Object: ", a.name, ".o (", a.host->target_triple, ") for CPU '",
                  a.host->cpu, "' (this host's; it may use its vector extensions)\n *\n * ", a.name,
                  "(...) runs the kernel on dense row-major arrays, in this order (16-byte "
                  "aligned):\n",
                  ArgumentTable(a, names));
  if (static_cast<int>(a.args.size()) > a.num_params) {
    absl::StrAppend(&h, " * (plus ", a.args.size() - a.num_params,
                    " scratch buffer(s) the function allocates itself)\n");
  }
  absl::StrAppend(
      &h,
      " * float16 / bfloat16 arrays hold the 16-bit patterns; bool arrays one byte (0 or 1) per "
      "element.\n * Returns 0, or 1 when a scratch buffer could not be allocated (nothing ran).\n"
      " * Parallel loops call tilesearch_parallel_for, defined weak and serial in the object: a\n"
      " * program may define it to run body(captures, begin, end) over disjoint ranges covering\n"
      " * [min, min + extent) on threads, returning when all are done.\n */\n");
  absl::StrAppend(&h, "#ifndef TILESEARCH_", upper, "_H_\n#define TILESEARCH_", upper,
                  "_H_\n\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
  absl::StrAppend(&h, "int ", a.name, "(");
  for (size_t i = 0; i < params.size(); ++i) {
    const bool input = params[i].kind == codegen::KernelArg::Kind::kInput;
    absl::StrAppend(&h, i > 0 ? ", " : "", input ? "const " : "", CType(params[i].buffer.dtype),
                    "* ", names[i]);
  }
  if (params.empty()) absl::StrAppend(&h, "void");
  absl::StrAppend(&h, ");\n\nvoid ", codegen::kHostObjectParallelFor,
                  "(void* reserved, void (*body)(void*, int64_t, int64_t), void* captures,\n"
                  "                             int64_t min, int64_t extent);\n");
  absl::StrAppend(&h,
                  "\n#ifdef __cplusplus\n}  /* extern \"C\" */\n#endif\n\n#endif  /* TILESEARCH_",
                  upper, "_H_ */\n");
  return h;
}

json ArgumentsJson(const KernelArtifact& a) {
  json args = json::array();
  for (size_t i = 0; i < a.args.size(); ++i) {
    const codegen::KernelArg& arg = a.args[i];
    json entry = {{"index", i},
                  {"name", arg.buffer.name},
                  {"kind", codegen::KernelArgKindName(arg.kind)},
                  {"dtype", ir::TypeName(arg.buffer.dtype)},
                  {"shape", arg.buffer.shape},
                  {"bytes", arg.bytes()}};
    if (arg.buffer.tensor_map) {
      // "source" is the "name" of its source's own entry, which a reader looks the buffer up by.
      const ir::TensorMapSpec& m = *arg.buffer.tensor_map;
      entry["tensor_map"] = {
          {"source", m.source}, {"dims", m.dims}, {"box", m.box}, {"swizzle", m.swizzle}};
    }
    args.push_back(std::move(entry));
  }
  return args;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Picking and replaying records.

absl::StatusOr<ReplayedRecord> ReplayRecord(const MeasureRecord& record) {
  const std::string trial = TrialName(record);
  absl::StatusOr<ir::ComputeDAG> dag = record.workload.Build();
  if (!dag.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(trial, ": workload: ", std::string(dag.status().message())));
  }
  const std::string key = measure::PrecisionWorkloadKey(dag->WorkloadKey(), record.precision);
  if (key != record.workload_key) {
    return absl::InvalidArgumentError(absl::StrCat(trial, ": workload key ", record.workload_key,
                                                   " of the record differs from ", key,
                                                   " of its workload rebuilt by this build"));
  }
  absl::StatusOr<schedule::State> state = schedule::ReplaySteps(*dag, record.steps);
  if (!state.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(trial, ": ", std::string(state.status().message())));
  return ReplayedRecord{record, *std::move(dag), *std::move(state), {}, false, {}};
}

absl::StatusOr<ReplayedRecord> ApplyHistoryBest(const std::string& log_path,
                                                const schedule::Workload& workload,
                                                const Target& target,
                                                measure::Fp32Precision precision,
                                                bool allow_unreadable_lines) {
  absl::StatusOr<ir::ComputeDAG> dag = workload.Build();
  if (!dag.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("workload ", workload.ToString(), ": ", std::string(dag.status().message())));
  }
  return BestOfLog(log_path, measure::PrecisionWorkloadKey(dag->WorkloadKey(), precision), target,
                   workload.op, allow_unreadable_lines);
}

absl::StatusOr<ReplayedRecord> ApplyHistoryBestByKey(const std::string& log_path,
                                                     const std::string& workload_key,
                                                     const Target& target,
                                                     bool allow_unreadable_lines) {
  if (workload_key.empty()) return absl::InvalidArgumentError("empty workload key");
  return BestOfLog(log_path, workload_key, target, "", allow_unreadable_lines);
}

// ---------------------------------------------------------------------------------------------
// Building.

double KernelArtifact::gflops() const {
  return record.valid() ? flops / (record.median_ms() * 1e-3) * 1e-9 : 0;
}

std::string DefaultArtifactName(const MeasureRecord& record) {
  return Sanitize(absl::StrCat(record.workload.op, "_", record.workload_key.substr(0, 8)));
}

absl::Status ValidateArtifactName(const std::string& name) {
  // Keyword → its language: C23's (the _Capitalized ones are caught as reserved below), then
  // C++20's others.
  static const auto* const kKeywords = [] {
    auto* keywords = new std::map<std::string, std::string>;
    const std::pair<const char*, const char*> kLists[] = {
        {"C",
         "alignas alignof auto bool break case char const constexpr continue default do double "
         "else enum extern false float for goto if inline int long nullptr register restrict "
         "return short signed sizeof static static_assert struct switch thread_local true typedef "
         "typeof typeof_unqual union unsigned void volatile while"},
        {"C++",
         "and and_eq asm bitand bitor catch char8_t char16_t char32_t class compl concept "
         "consteval constinit const_cast co_await co_return co_yield decltype delete dynamic_cast "
         "explicit export friend mutable namespace new noexcept not not_eq operator or or_eq "
         "private protected public reinterpret_cast requires static_cast template this throw try "
         "typeid typename using virtual wchar_t xor xor_eq"}};
    for (const auto& [language, words] : kLists) {
      for (absl::string_view w : absl::StrSplit(words, ' ')) {
        keywords->emplace(std::string(w), language);
      }
    }
    return keywords;
  }();
  const std::string quoted = absl::StrCat("artifact name '", name, "'");
  const char* hint = "; give a C identifier such as my_kernel";
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat("artifact name is empty", hint));
  if (!IsCIdentifier(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        quoted, " is not a C identifier (letters, digits and '_', not starting with a digit)",
        hint));
  }
  if (auto it = kKeywords->find(name); it != kKeywords->end()) {
    return absl::InvalidArgumentError(absl::StrCat(quoted, " is a ", it->second, " keyword", hint));
  }
  if (name[0] == '_') {
    return absl::InvalidArgumentError(absl::StrCat(
        quoted, " is reserved in C (it starts with '_': names of the implementation)", hint));
  }
  if (name.find("__") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(quoted, " is reserved in C++ (it contains '__')", hint));
  }
  if (name == "main" || name == codegen::kHostObjectParallelFor) {
    return absl::InvalidArgumentError(
        absl::StrCat(quoted, " is a symbol the artifact's program already defines", hint));
  }
  return absl::OkStatus();
}

absl::Status ValidateArtifactDir(const std::string& out_dir) {
  if (out_dir.empty()) return absl::InvalidArgumentError("output directory '' is empty");
  // The directory itself when it exists, else its nearest existing ancestor, which must be a
  // directory this process may create entries in.
  std::filesystem::path probe = out_dir;
  while (true) {
    struct stat st;
    if (::stat(probe.c_str(), &st) == 0) {
      const bool self = probe == std::filesystem::path(out_dir);
      const std::string what = self ? absl::StrCat("output directory '", out_dir, "'")
                                    : absl::StrCat("cannot create output directory '", out_dir,
                                                   "': '", probe.string(), "'");
      if (!S_ISDIR(st.st_mode)) {
        return absl::InvalidArgumentError(absl::StrCat(what, " is not a directory"));
      }
      if (::access(probe.c_str(), W_OK | X_OK) != 0) {
        return absl::PermissionDeniedError(
            absl::StrCat(what, " is not writable: ", std::strerror(errno)));
      }
      return absl::OkStatus();
    }
    if (errno != ENOENT) {
      const int err = errno;
      const bool denied = err == EACCES || err == EPERM;
      return absl::Status(
          denied ? absl::StatusCode::kPermissionDenied : absl::StatusCode::kInvalidArgument,
          absl::StrCat("cannot create output directory '", out_dir, "': ", std::strerror(err)));
    }
    std::filesystem::path parent = probe.parent_path();
    if (parent.empty()) parent = ".";
    if (parent == probe) return absl::OkStatus();  // nothing exists, not even the root
    probe = parent;
  }
}

absl::StatusOr<KernelArtifact> BuildKernel(const ReplayedRecord& replayed,
                                           const BuildOptions& options) {
  const MeasureRecord& record = replayed.record;
  const std::string trial = TrialName(record);
  KernelArtifact a;
  a.name = options.name.empty() ? DefaultArtifactName(record) : options.name;
  RETURN_IF_ERROR(ValidateArtifactName(a.name));
  a.record = record;
  a.dag = replayed.dag;
  a.flops = replayed.dag.Flops();
  absl::StatusOr<schedule::LoweredKernel> lowered =
      schedule::Lower(replayed.dag, replayed.state, record.target);
  if (!lowered.ok()) {
    return absl::Status(lowered.status().code(),
                        absl::StrCat(trial, ": cannot lower for ", record.target.ToString(), ": ",
                                     std::string(lowered.status().message())));
  }
  a.lowered = *std::move(lowered);
  a.num_params = static_cast<int>(a.lowered.nest.params.size());

  if (record.target.is_gpu()) {
    measure::BuilderOptions build;
    build.gpu = options.gpu;
    build.assemble_cubin = false;  // assembled below, with a note when ptxas is missing
    measure::BuildInput input;
    input.lowered = std::make_shared<const schedule::LoweredKernel>(a.lowered);
    measure::BuildResult built = measure::Builder(record.target, build).BuildInProcess(input);
    if (!built.build_status.ok()) return Prefixed(trial + ": compile", built.build_status);
    a.args = built.gpu_module->args;
    a.gpu = std::move(built.gpu_module);
    if (options.cubin) {
      std::optional<std::string> ptxas = FindPtxas();
      if (ptxas.has_value()) {
        // The module's own arch: sm_90a where it uses wgmma.
        const std::string& arch = a.gpu->arch.empty() ? record.target.arch : a.gpu->arch;
        absl::StatusOr<std::string> cubin = AssemblePtx(*ptxas, a.gpu->ptx, arch);
        if (!cubin.ok()) return Prefixed(trial, cubin.status());
        a.cubin = *std::move(cubin);
      } else {
        a.notes.push_back(
            "no cubin: ptxas not found ($TILESEARCH_PTXAS unset, no ptxas on PATH, no "
            "/usr/local/cuda/bin/ptxas); the driver JIT-compiles the PTX at load time");
      }
    }
  } else {
    codegen::HostObjectOptions host = options.host;
    host.entry_name = a.name;
    absl::StatusOr<codegen::HostObject> object = codegen::CompileHostObject(a.lowered.nest, host);
    if (!object.ok()) return Prefixed(trial + ": compile", object.status());
    a.args = object->args;
    a.host = *std::move(object);
  }
  return a;
}

absl::StatusOr<KernelArtifact> BuildKernel(const MeasureRecord& record,
                                           const BuildOptions& options) {
  ASSIGN_OR_RETURN(ReplayedRecord replayed, ReplayRecord(record));
  return BuildKernel(replayed, options);
}

// ---------------------------------------------------------------------------------------------
// Re-check.

measure::MeasureOptions CheckOptions::DefaultMeasure() {
  measure::MeasureOptions m;
  m.seed = 0x7e5eed;  // not the tuning job's default (1): fresh inputs
  m.timing.warmup_runs = 0;
  m.timing.min_runs = 1;
  m.timing.min_total_ms = 0;
  m.timing.max_runs = 1;
  m.timing.flush_cache = false;
  return m;
}

absl::StatusOr<CheckOutcome> CheckKernel(const KernelArtifact& artifact,
                                         const CheckOptions& options) {
  CheckOutcome out;
  measure::MeasureOptions measure_options = options.measure;
  measure_options.precision = artifact.record.precision;
  RETURN_IF_ERROR(measure::ValidateMeasureOptions(measure_options));
  RETURN_IF_ERROR(
      measure::CheckMeasureHostMemory(artifact.dag, measure_options, artifact.record.target));
  absl::StatusOr<std::unique_ptr<measure::Runner>> measurer =
      measure::CreateRunner(artifact.record.target, measure_options);
  if (!measurer.ok()) {
    if (artifact.is_gpu() && measurer.status().code() == absl::StatusCode::kFailedPrecondition) {
      out.note = absl::StrCat("not re-checked: ", std::string(measurer.status().message()));
      return out;
    }
    return measurer.status();
  }
  measure::BuildResult candidate;
  candidate.nest = std::make_shared<const ir::LoopNest>(artifact.lowered.nest);
  if (artifact.is_gpu()) {
    candidate.launches = artifact.lowered.launches;
    candidate.gpu_module = artifact.gpu;
  }
  std::vector<measure::MeasureResult> results = (*measurer)->Run(artifact.dag, {candidate});
  CHECK(results.size() == 1) << "measurer returned " << results.size() << " results for 1";
  out.result = std::move(results[0]);
  if (out.result.error == measure::MeasureError::kNoDevice) {
    out.note = absl::StrCat("not re-checked: ", out.result.message);
    return out;
  }
  out.checked = true;
  out.passed = out.result.ok() && out.result.check.mismatches == 0;
  if (!out.passed) {
    out.note = absl::StrCat(measure::MeasureErrorName(out.result.error), ": ", out.result.message);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writing.

std::string ArtifactHeader(const KernelArtifact& artifact) {
  return artifact.is_gpu() ? CudaHeader(artifact) : CpuHeader(artifact);
}

json KernelLaunchJson(const codegen::GpuKernelInfo& k) {
  json j = {{"grid", k.grid},
            {"block", k.block},
            {"static_shared_bytes", k.static_shared_bytes},
            {"dynamic_shared_bytes", k.dynamic_shared_bytes}};
  if (k.cluster > 1) j["cluster"] = {k.cluster, 1, 1};
  return j;
}

json ArtifactToJson(const KernelArtifact& a, const CheckOutcome* check) {
  const MeasureRecord& r = a.record;
  json j;
  j["name"] = a.name;
  j["workload"] = schedule::WorkloadToJson(r.workload);
  j["workload_key"] = r.workload_key;
  j["target"] = r.target.ToString();
  j["device_name"] = r.device_name;
  j["trial"] = r.trial;
  j["seed"] = r.seed;
  j["steps"] = MeasureRecordToJson(r)["steps"];
  j["median_ms"] = r.valid() ? json(r.median_ms()) : json(nullptr);
  j["gflops"] = a.gflops();
  j["flops"] = a.flops;
  json files;
  json entries = json::array();
  json launches = json::array();
  if (a.is_gpu()) {
    files["ptx"] = a.name + ".ptx";
    files["cubin"] = a.cubin.empty() ? json(nullptr) : json(a.name + ".cubin");
    j["arch"] = a.gpu->arch;  // what the PTX and cubin are for (sm_90a with wgmma)
    for (const codegen::GpuKernelInfo& k : a.gpu->kernels) {
      entries.push_back(k.name);
      launches.push_back(KernelLaunchJson(k));
      launches.back()["entry"] = k.name;
    }
  } else {
    files["object"] = a.name + ".o";
    entries.push_back(a.host->entry_name);
    j["cpu"] = {{"triple", a.host->target_triple}, {"cpu", a.host->cpu}};
  }
  files["header"] = a.name + ".h";
  files["json"] = a.name + ".json";
  j["files"] = files;
  j["entries"] = entries;
  j["launches"] = launches;
  j["arguments"] = ArgumentsJson(a);
  j["notes"] = a.notes;
  if (check != nullptr) {
    j["check"] = {{"checked", check->checked},
                  {"passed", check->passed},
                  {"note", check->note},
                  {"trials", check->result.check.trials},
                  {"max_abs_error", check->result.check.max_abs_error},
                  {"max_rel_error", check->result.check.max_rel_error}};
  }
  return j;
}

absl::StatusOr<std::vector<std::string>> WriteArtifacts(const KernelArtifact& artifact,
                                                        const std::string& out_dir,
                                                        const CheckOutcome* check) {
  RETURN_IF_ERROR(ValidateArtifactName(artifact.name));
  RETURN_IF_ERROR(ValidateArtifactDir(out_dir));
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    return absl::Status(
        absl::ErrnoToStatusCode(ec.value()),
        absl::StrCat("cannot create output directory '", out_dir, "': ", ec.message()));
  }
  const std::string base = (std::filesystem::path(out_dir) / artifact.name).string();
  std::vector<std::pair<std::string, std::string>> files;
  if (artifact.is_gpu()) {
    files.emplace_back(base + ".ptx", artifact.gpu->ptx);
    if (!artifact.cubin.empty()) files.emplace_back(base + ".cubin", artifact.cubin);
  } else {
    files.emplace_back(base + ".o", artifact.host->bytes);
  }
  files.emplace_back(base + ".h", ArtifactHeader(artifact));
  files.emplace_back(base + ".json", ArtifactToJson(artifact, check).dump(2) + "\n");
  // A destination a rename cannot replace is refused before anything is written.
  for (const auto& [path, bytes] : files) {
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write '", path, "': it is ",
          S_ISDIR(st.st_mode) ? "a directory" : "not a regular file", "; nothing was written"));
    }
  }
  // All under temporary names first, then renamed into place: all files or none.
  std::vector<std::string> temps;
  auto remove_all = [](const std::vector<std::string>& paths) {
    for (const std::string& p : paths) ::unlink(p.c_str());
  };
  for (const auto& [path, bytes] : files) {
    const std::string temp =
        absl::StrCat((std::filesystem::path(out_dir) /
                      absl::StrCat(".", std::filesystem::path(path).filename().string()))
                         .string(),
                     ".tmp", ::getpid());
    temps.push_back(temp);
    if (absl::Status s = WriteFile(temp, bytes); !s.ok()) {
      remove_all(temps);
      return absl::Status(
          s.code(), absl::StrCat(std::string(s.message()), "; none of the artifacts was written"));
    }
  }
  std::vector<std::string> written;
  for (size_t i = 0; i < files.size(); ++i) {
    if (::rename(temps[i].c_str(), files[i].first.c_str()) != 0) {
      const int err = errno;
      remove_all(written);
      remove_all(
          std::vector<std::string>(temps.begin() + static_cast<std::ptrdiff_t>(i), temps.end()));
      return absl::Status(absl::ErrnoToStatusCode(err),
                          absl::StrCat("cannot rename '", temps[i], "' to '", files[i].first, "': ",
                                       std::strerror(err), "; none of the artifacts was written"));
    }
    written.push_back(files[i].first);
  }
  return written;
}

}  // namespace tilesearch::search
