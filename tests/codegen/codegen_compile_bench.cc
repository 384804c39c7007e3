// Compile-time benchmark (not a test): MLIR → PTX milliseconds per kernel for ~20 GPU kernels
// (tiled and simple matmuls of several sizes, naive operators bound to blocks and threads),
// one by one in this process, then as one CompileManyToPtx batch; prints each time, the median
// and the batch throughput.
//   codegen_compile_bench [workers]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "codegen/codegen.h"
#include "ir/lower_naive.h"
#include "ir/ops/registry.h"
#include "tests/codegen/nest_builders.h"

using namespace tilesearch;                    // NOLINT
using namespace tilesearch::codegen::testing;  // NOLINT

int main(int argc, char** argv) {
  std::vector<std::shared_ptr<const ir::LoopNest>> nests;
  for (int64_t s : {32, 64, 128, 256, 512})
    nests.push_back(std::make_shared<ir::LoopNest>(GpuTiledMatmul(s, s, s)));
  for (int64_t s : {16, 64, 256})
    nests.push_back(std::make_shared<ir::LoopNest>(GpuSimpleMatmul(s, s, s)));
  const std::vector<std::pair<std::string, ir::OpArgs>> ops = {
      {"softmax", {{{64, 256}}, ir::ScalarType::kFloat32, {}}},
      {"layernorm", {{{64, 256}, {256}, {256}}, ir::ScalarType::kFloat32, {}}},
      {"conv2d_nchw",
       {{{1, 16, 32, 32}, {32, 16, 3, 3}}, ir::ScalarType::kFloat32, {{"padding", "1"}}}},
      {"gelu", {{{128, 512}}, ir::ScalarType::kFloat32, {}}},
      {"add", {{{128, 512}, {512}}, ir::ScalarType::kFloat32, {}}},
      {"reduce_sum", {{{128, 512}}, ir::ScalarType::kFloat32, {{"axes", "1"}}}},
      {"max_pool2d", {{{1, 16, 32, 32}}, ir::ScalarType::kFloat32, {{"kernel", "2"}}}},
      {"batch_matmul", {{{4, 64, 32}, {4, 32, 64}}, ir::ScalarType::kFloat32, {}}},
      {"dense_bias_relu", {{{64, 128}, {256, 128}, {256}}, ir::ScalarType::kFloat32, {}}},
      {"transpose", {{{64, 128}}, ir::ScalarType::kFloat32, {}}},
      {"rmsnorm", {{{64, 256}, {256}}, ir::ScalarType::kFloat32, {}}},
      {"log_softmax", {{{64, 256}}, ir::ScalarType::kFloat32, {}}},
  };
  for (const auto& [name, args] : ops) {
    auto dag = ir::BuildOp(name, args);
    if (!dag.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), dag.status().ToString().c_str());
      return 1;
    }
    auto naive = ir::LowerNaive(*dag);
    nests.push_back(std::make_shared<ir::LoopNest>(BindNaive(*naive)));
  }
  std::vector<double> per_kernel;
  codegen::GpuModule::Phases total;
  for (const auto& nest : nests) {
    auto m = codegen::CompileToPtx(*nest, {});
    if (!m.ok()) {
      std::fprintf(stderr, "%s: %s\n", nest->name.c_str(), m.status().ToString().c_str());
      return 1;
    }
    const double ms = m->compile_ms / static_cast<double>(m->kernels.size());
    per_kernel.push_back(ms);
    total.emit_ms += m->phases.emit_ms;
    total.lower_ms += m->phases.lower_ms;
    total.translate_ms += m->phases.translate_ms;
    total.optimize_ms += m->phases.optimize_ms;
    total.codegen_ms += m->phases.codegen_ms;
    std::printf("%-24s kernels %zu  %.1f ms/kernel  ptx %zu bytes\n", nest->name.c_str(),
                m->kernels.size(), ms, m->ptx.size());
  }
  std::vector<double> sorted = per_kernel;
  std::sort(sorted.begin(), sorted.end());
  std::printf("modules %zu, median %.1f ms per kernel (min %.1f, max %.1f)\n", sorted.size(),
              sorted[sorted.size() / 2], sorted.front(), sorted.back());

  const double sum =
      total.emit_ms + total.lower_ms + total.translate_ms + total.optimize_ms + total.codegen_ms;
  std::printf(
      "phases: emit %.0f%%, lower %.0f%%, translate %.0f%%, LLVM opt %.0f%%, NVPTX %.0f%%\n",
      100 * total.emit_ms / sum, 100 * total.lower_ms / sum, 100 * total.translate_ms / sum,
      100 * total.optimize_ms / sum, 100 * total.codegen_ms / sum);
  std::vector<codegen::GpuCompileJob> jobs;
  for (int rep = 0; rep < 4; ++rep) {
    for (const auto& nest : nests) jobs.push_back({nest, {}});
  }
  codegen::ParallelCompileOptions parallel;
  if (argc > 1) parallel.num_workers = std::atoi(argv[1]);
  const auto start = std::chrono::steady_clock::now();
  auto results = codegen::CompileManyToPtx(jobs, {}, parallel);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  size_t ok = 0;
  for (const auto& r : results) ok += r.ok();
  std::printf("batch: %zu candidates (%zu ok) in %.2f s = %.1f candidates/s\n", results.size(), ok,
              s, results.size() / s);
  return 0;
}
