// Requests to the kept measurement worker: a host candidate's nest and a GPU candidate's module
// (compiled here, no device needed) come back with every field the worker reads; truncated bytes
// are errors.
#include "measure/item_request.h"

#include <string>

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
  request.context = {7, 1.5, 42.25};
  request.nest = Ok(testing_util::AddNest(dag, 2.0));
  const HostRequest back = Ok(DecodeHostRequest(EncodeHostRequest(request)));
  EXPECT_EQ(back.context.batch, 7u);
  EXPECT_EQ(back.context.screen_above_ms, 1.5);
  EXPECT_EQ(back.context.compile_ms, 42.25);
  EXPECT_EQ(ir::ToString(back.nest), ir::ToString(request.nest));
  EXPECT_EQ(ir::EncodeLoopNest(back.nest), ir::EncodeLoopNest(request.nest));
}

TEST(ItemRequestTest, GpuRequestCarriesWhatTheWorkerLoadsAndLaunches) {
  const ir::ComputeDAG dag = Ok(testing_util::AddDag(8, 16));
  BuildResult built = Ok(testing_util::AddCandidate(dag, 1.0));
  GpuRequest request;
  request.context = {3, 0, 12.5};
  request.tf32x3_gate = true;
  request.module = *built.gpu_module;
  const GpuRequest back = Ok(DecodeGpuRequest(EncodeGpuRequest(request)));
  EXPECT_EQ(back.context.batch, 3u);
  EXPECT_EQ(back.context.compile_ms, 12.5);
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

}  // namespace
}  // namespace tilesearch::measure
