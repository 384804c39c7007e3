// The untuned program is always a candidate: tuning any library operator on the cpu target
// measures it in the first round, logs it marked "untuned", and the tuned best is never slower
// than it (the best is the fastest record, and the untuned program's is one of them). Every
// operator of the library on a small shape, two trials each (the untuned program and one
// searched schedule).
#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/registry.h"
#include "search/log_io.h"
#include "search/measure_record.h"
#include "search/tuner.h"
#include "tests/search/scratch_dir.h"
#include "tests/search/tiny_tune_options.h"

namespace tilesearch::search {
namespace {

using ::tilesearch::testing::IsOk;

schedule::Workload W(const std::string& op, std::vector<std::vector<int64_t>> shapes,
                     std::map<std::string, std::string> attrs = {}) {
  schedule::Workload w;
  w.op = op;
  w.args.shapes = std::move(shapes);
  w.args.attrs = std::move(attrs);
  return w;
}

// One small workload per library operator.
std::vector<schedule::Workload> SmallWorkloads() {
  return {
      W("matmul", {{5, 9}, {9, 7}}),
      W("batch_matmul", {{2, 3, 5}, {2, 5, 7}}),
      W("dense", {{3, 6}, {5, 6}}),
      W("gemv", {{7, 9}, {9}}),
      W("conv1d", {{1, 2, 9}, {3, 2, 3}}, {{"padding", "1"}}),
      W("conv2d_nchw", {{1, 2, 6, 5}, {3, 2, 3, 3}}, {{"padding", "1"}}),
      W("conv2d_nhwc", {{1, 6, 5, 2}, {3, 3, 2, 3}}, {{"stride", "2"}}),
      W("conv2d_nchw_padded", {{1, 2, 6, 5}, {3, 2, 3, 3}}, {{"padding", "1"}}),
      W("depthwise_conv2d_nchw", {{1, 2, 6, 5}, {2, 1, 3, 3}}, {{"padding", "1"}}),
      W("max_pool2d", {{1, 2, 6, 5}}, {{"kernel", "2"}}),
      W("avg_pool2d", {{1, 2, 6, 5}}, {{"kernel", "3"}, {"stride", "1"}}),
      W("conv2d_bias_relu", {{1, 2, 6, 5}, {3, 2, 3, 3}, {3}}),
      W("dense_bias_relu", {{3, 5}, {4, 5}, {4}}),
      W("matmul_scale_residual", {{3, 5}, {5, 4}, {3, 4}}, {{"scale", "0.5"}}),
      W("reduce_sum", {{3, 7}}, {{"axes", "1"}}),
      W("reduce_mean", {{3, 7}}),
      W("reduce_max", {{3, 7}}, {{"axes", "0"}, {"keepdim", "true"}}),
      W("reduce_min", {{4, 3, 5}}, {{"axes", "0,2"}}),
      W("softmax", {{3, 17}}),
      W("log_softmax", {{5, 7}}, {{"axis", "0"}}),
      W("layernorm", {{3, 16}, {16}, {16}}),
      W("rmsnorm", {{3, 16}, {16}}),
      W("relu", {{3, 37}}),
      W("leaky_relu", {{3, 37}}),
      W("gelu", {{3, 37}}),
      W("sigmoid", {{3, 37}}),
      W("tanh", {{3, 37}}),
      W("swish", {{3, 37}}),
      W("softplus", {{3, 37}}),
      W("elu", {{3, 37}}),
      W("hardtanh", {{3, 37}}),
      W("add", {{3, 7}, {7}}),
      W("sub", {{3, 1}, {7}}),
      W("mul", {{3, 7}, {3, 7}}),
      W("div", {{3, 7}, {1}}),
      W("maximum", {{3, 7}, {3, 1}}),
      W("minimum", {{7}, {3, 7}}),
      W("scale", {{3, 7}}, {{"scale", "0.5"}}),
      W("transpose", {{3, 7, 2}}, {{"perm", "2,0,1"}}),
  };
}

TEST(UntunedCandidateTest, EveryOperatorsBestIsNeverSlowerThanItsUntunedProgram) {
  const std::vector<schedule::Workload> workloads = SmallWorkloads();
  // Every operator of the library is covered.
  std::vector<std::string> ops;
  for (const schedule::Workload& w : workloads) ops.push_back(w.op);
  std::sort(ops.begin(), ops.end());
  std::vector<std::string> library;
  for (const ir::OpInfo& info : ir::OpLibrary()) library.push_back(info.name);
  EXPECT_EQ(ops, library);

  const std::string log = ::tilesearch::testing::ScratchPath("untuned.jsonl");
  const Target cpu = Target::HostCpu();
  for (const schedule::Workload& w : workloads) {
    SCOPED_TRACE(w.ToString());
    TuneOptions options = testing::TinyCpuTuneOptions(log, 2, 2, 3);
    absl::StatusOr<TuneResult> result = Tune(w, cpu, options);
    ASSERT_THAT(result, IsOk());
    // The log's records of the workload, read back: exactly one untuned record, with no steps
    // (the cpu's untuned program), measured in the first round.
    absl::StatusOr<ir::ComputeDAG> dag = w.Build();
    ASSERT_THAT(dag, IsOk());
    ReadOptions read;
    read.workload_key = dag->WorkloadKey();
    absl::StatusOr<LogContents> contents = ReadLog(log, read);
    ASSERT_THAT(contents, IsOk());
    ASSERT_EQ(contents->records.size(), 2u);
    const MeasureRecord* untuned = nullptr;
    double fastest = std::numeric_limits<double>::infinity();
    for (const MeasureRecord& r : contents->records) {
      if (r.untuned) {
        EXPECT_EQ(untuned, nullptr) << "two untuned records";
        untuned = &r;
      }
      fastest = std::min(fastest, r.median_ms());
    }
    ASSERT_NE(untuned, nullptr) << "no untuned record";
    EXPECT_TRUE(untuned->steps.empty());
    ASSERT_TRUE(untuned->valid()) << untuned->result.message;
    // The tuned best is the fastest record, so never slower than the untuned program.
    ASSERT_TRUE(result->best.has_value());
    EXPECT_EQ(result->best->median_ms(), fastest);
    EXPECT_LE(result->best->median_ms(), untuned->median_ms());
    ASSERT_TRUE(result->untuned.has_value());
    EXPECT_EQ(result->untuned->trial, untuned->trial);
  }
  // A resumed job does not measure the untuned program again.
  TuneOptions more = testing::TinyCpuTuneOptions(log, 3, 1, 3);
  absl::StatusOr<TuneResult> resumed = Tune(workloads[0], cpu, more);
  ASSERT_THAT(resumed, IsOk());
  absl::StatusOr<LogContents> all = ReadLog(log);
  ASSERT_THAT(all, IsOk());
  int untuned_records = 0;
  for (const MeasureRecord& r : all->records) untuned_records += r.untuned ? 1 : 0;
  EXPECT_EQ(untuned_records, static_cast<int>(workloads.size()));
}

}  // namespace
}  // namespace tilesearch::search
