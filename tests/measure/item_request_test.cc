// Requests to the kept measurement worker: a host candidate's nest and a GPU candidate's module
// (compiled here, no device needed) come back with every field the worker reads; truncated bytes
// are errors.
#include "measure/item_request.h"

#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/loop_nest_codec.h"
#include "tests/measure/cuda_test_util.h"

namespace tilesearch::measure {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::Ok;
using ::tilesearch::testing::StatusIs;

TEST(ItemRequestTest, HostRequestCarriesTheNestAndTheBatch) {
  const ir::ComputeDAG dag = Ok(testing_util::AddDag(8, 16));
  HostRequest request;
  request.context = {7, 1.5, 42.25, 20, 100.5, 250.25};
  request.nest = Ok(testing_util::AddNest(dag, 2.0));
  const HostRequest back = Ok(DecodeHostRequest(EncodeHostRequest(request)));
  EXPECT_EQ(back.context.batch, 7u);
  EXPECT_EQ(back.context.screen_above_ms, 1.5);
  EXPECT_EQ(back.context.compile_ms, 42.25);
  EXPECT_EQ(back.context.min_runs, 20);
  EXPECT_EQ(back.context.min_total_ms, 100.5);
  EXPECT_EQ(back.context.soak_ms, 250.25);
  EXPECT_EQ(ir::ToString(back.nest), ir::ToString(request.nest));
  EXPECT_EQ(ir::EncodeLoopNest(back.nest), ir::EncodeLoopNest(request.nest));
}

TEST(ItemRequestTest, ATimingOverrideReplacesTheRunsAndTimeAndDropsTheScreen) {
  MeasureOptions options;
  options.timing.min_runs = 5;
  options.timing.min_total_ms = 10;
  options.timing.max_runs = 8;
  options.timing.warmup_runs = 2;
  options.screen_factor = 1.5;
  options.screen_above_ms = 0;
  options.run_timeout_ms = 20000;
  options.timing.max_wall_ms = 1000;
  MeasureOptions same = options;
  ApplyRequestContext({1, 0.25, 0, 0, 0, 300}, &same);  // min_runs 0: the worker's own
  EXPECT_EQ(same.timing.min_runs, 5);
  EXPECT_EQ(same.timing.soak_ms, 0);
  EXPECT_EQ(same.run_timeout_ms, 20000);
  EXPECT_EQ(same.timing.min_total_ms, 10);
  EXPECT_EQ(same.timing.max_runs, 8);
  EXPECT_EQ(same.screen_factor, 1.5);
  EXPECT_EQ(same.screen_above_ms, 0.25);  // the request's, always
  ApplyRequestContext({1, 0.25, 0, 20, 100, 300}, &options);
  EXPECT_EQ(options.timing.min_runs, 20);
  EXPECT_EQ(options.timing.soak_ms, 300);
  EXPECT_EQ(options.timing.min_total_ms, 100);
  // The wall limit of a 100 ms timing stays the default 1000 ms (WallLimitFor); the run timeout
  // covers the soak and that limit on top of its own.
  EXPECT_EQ(options.timing.max_wall_ms, 1000);
  EXPECT_EQ(options.run_timeout_ms, 20000 + 300 + 1000);
  EXPECT_EQ(options.timing.max_runs, 20);  // raised to min_runs
  EXPECT_EQ(options.timing.warmup_runs, 2);
  EXPECT_EQ(options.screen_factor, 0);  // timed in full
  EXPECT_EQ(options.screen_above_ms, 0.25);
}

TEST(ItemRequestTest, GpuRequestCarriesWhatTheWorkerLoadsAndLaunches) {
  const ir::ComputeDAG dag = Ok(testing_util::AddDag(8, 16));
  BuildResult built = Ok(testing_util::AddCandidate(dag, 1.0));
  GpuRequest request;
  request.context = {3, 0, 12.5, 8, 0};
  request.tf32x3_gate = true;
  request.module = *built.gpu_module;
  const GpuRequest back = Ok(DecodeGpuRequest(EncodeGpuRequest(request)));
  EXPECT_EQ(back.context.batch, 3u);
  EXPECT_EQ(back.context.compile_ms, 12.5);
  EXPECT_EQ(back.context.min_runs, 8);
  EXPECT_TRUE(back.tf32x3_gate);
  const codegen::GpuModule& m = back.module;
  // The PTX travels only where there is no cubin (the loader reads one of them).
  EXPECT_EQ(m.ptx, request.module.cubin.empty() ? request.module.ptx : "");
  EXPECT_EQ(m.cubin, request.module.cubin);
  EXPECT_EQ(m.arch, request.module.arch);
  ASSERT_EQ(m.kernels.size(), request.module.kernels.size());
  for (size_t k = 0; k < m.kernels.size(); ++k) {
    EXPECT_EQ(m.kernels[k].name, request.module.kernels[k].name);
    EXPECT_EQ(m.kernels[k].grid, request.module.kernels[k].grid);
    EXPECT_EQ(m.kernels[k].block, request.module.kernels[k].block);
    EXPECT_EQ(m.kernels[k].static_shared_bytes, request.module.kernels[k].static_shared_bytes);
    EXPECT_EQ(m.kernels[k].dynamic_shared_bytes, request.module.kernels[k].dynamic_shared_bytes);
  }
  ASSERT_EQ(m.args.size(), request.module.args.size());
  ASSERT_EQ(m.args.size(), 3u);  // A, B (inputs), C (output)
  for (size_t a = 0; a < m.args.size(); ++a) {
    EXPECT_EQ(m.args[a].buffer.name, request.module.args[a].buffer.name);
    EXPECT_EQ(m.args[a].buffer.dtype, request.module.args[a].buffer.dtype);
    EXPECT_EQ(m.args[a].buffer.shape, request.module.args[a].buffer.shape);
    EXPECT_EQ(m.args[a].kind, request.module.args[a].kind);
  }
  EXPECT_EQ(m.args[2].kind, codegen::KernelArg::Kind::kOutput);
}

TEST(ItemRequestTest, TruncatedRequestsAreErrors) {
  const ir::ComputeDAG dag = Ok(testing_util::AddDag(8, 16));
  GpuRequest gpu;
  gpu.module = *Ok(testing_util::AddCandidate(dag, 1.0)).gpu_module;
  const std::string gpu_bytes = EncodeGpuRequest(gpu);
  HostRequest host;
  host.nest = Ok(testing_util::AddNest(dag, 1.0));
  const std::string host_bytes = EncodeHostRequest(host);
  for (size_t n : {size_t{0}, size_t{5}, gpu_bytes.size() / 2, gpu_bytes.size() - 1}) {
    EXPECT_THAT(DecodeGpuRequest(gpu_bytes.substr(0, n)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("corrupt measure request")));
  }
  for (size_t n : {size_t{0}, size_t{20}, host_bytes.size() - 1}) {
    EXPECT_THAT(DecodeHostRequest(host_bytes.substr(0, n)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("corrupt measure request")));
  }
  EXPECT_THAT(DecodeHostRequest(host_bytes + "x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("corrupt measure request")));
}

using testing_util::KernelArgOf;

// A module of a TMA kernel by hand: A (bf16 [256, 128]), C, and A's tensor map.
GpuRequest TensorMapRequest() {
  GpuRequest request;
  codegen::GpuModule& m = request.module;
  m.ptx = "// ptx";
  m.arch = "sm_90a";
  m.kernels.push_back({"k0", {2, 1, 1}, {128, 1, 1}, 0, 1024});
  m.args.push_back(
      KernelArgOf("A", ir::ScalarType::kBFloat16, {256, 128}, codegen::KernelArg::Kind::kInput));
  m.args.push_back(
      KernelArgOf("C", ir::ScalarType::kFloat32, {256}, codegen::KernelArg::Kind::kOutput));
  codegen::KernelArg map = KernelArgOf("A_map", ir::ScalarType::kInt64, {ir::kTensorMapWords},
                                       codegen::KernelArg::Kind::kTensorMap);
  map.buffer.tensor_map = ir::TensorMapSpec{"A", {256, 128}, {128, 64}, 128};
  m.args.push_back(std::move(map));
  return request;
}

TEST(ItemRequestTest, GpuRequestCarriesTensorMaps) {
  const GpuRequest request = TensorMapRequest();
  const GpuRequest back = Ok(DecodeGpuRequest(EncodeGpuRequest(request)));
  ASSERT_EQ(back.module.args.size(), 3u);
  EXPECT_FALSE(back.module.args[0].buffer.tensor_map.has_value());
  const codegen::KernelArg& map = back.module.args[2];
  EXPECT_EQ(map.kind, codegen::KernelArg::Kind::kTensorMap);
  EXPECT_EQ(map.buffer.name, "A_map");
  EXPECT_EQ(map.buffer.dtype, ir::ScalarType::kInt64);
  EXPECT_EQ(map.buffer.shape, std::vector<int64_t>{16});
  ASSERT_TRUE(map.buffer.tensor_map.has_value());
  EXPECT_EQ(map.buffer.tensor_map->source, "A");
  EXPECT_EQ(map.buffer.tensor_map->dims, (std::vector<int64_t>{256, 128}));
  EXPECT_EQ(map.buffer.tensor_map->box, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(map.buffer.tensor_map->swizzle, 128);
}

TEST(ItemRequestTest, TensorMapsTravelOnlyWithTheirKind) {
  GpuRequest no_map = TensorMapRequest();
  no_map.module.args[2].buffer.tensor_map.reset();
  EXPECT_THAT(DecodeGpuRequest(EncodeGpuRequest(no_map)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("corrupt measure request"), HasSubstr("argument 2"),
                             HasSubstr("lacks a tensor map"))));
  GpuRequest scratch_map = TensorMapRequest();
  scratch_map.module.args[2].kind = codegen::KernelArg::Kind::kScratch;
  EXPECT_THAT(DecodeGpuRequest(EncodeGpuRequest(scratch_map)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has a tensor map")));
  // Cut inside the map's fields (its swizzle is the request's last 8 bytes).
  const std::string bytes = EncodeGpuRequest(TensorMapRequest());
  for (size_t cut : {size_t{4}, size_t{8}, size_t{24}, size_t{40}}) {
    EXPECT_THAT(DecodeGpuRequest(bytes.substr(0, bytes.size() - cut)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("truncated or malformed")))
        << cut;
  }
}

}  // namespace
}  // namespace tilesearch::measure
