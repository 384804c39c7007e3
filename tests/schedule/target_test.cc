// Target: the H200 and host defaults and target text parsing.
#include "base/target.h"

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch::schedule {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

TEST(TargetTest, H200HasItsPublishedLimits) {
  Target t = Target::H200();
  EXPECT_TRUE(t.is_gpu());
  EXPECT_EQ(t.arch, "sm_90");
  EXPECT_EQ(t.max_threads_per_block, 1024);
  EXPECT_EQ(t.max_shared_memory_per_block, 48 * 1024);
  EXPECT_EQ(t.max_shared_memory_optin, 227 * 1024);
  EXPECT_EQ(t.sm_count, 132);
  EXPECT_EQ(t.l2_bytes, 60ll * 1024 * 1024);
  EXPECT_EQ(t.warp_size, 32);
  EXPECT_EQ(t.max_vthread_extent, 8);
  EXPECT_EQ(t.max_vector_bytes, 16);
  EXPECT_EQ(t.ToString(), "cuda -arch=sm_90");
}

TEST(TargetTest, HostCpuIsACpu) {
  Target t = Target::HostCpu();
  EXPECT_FALSE(t.is_gpu());
  EXPECT_GE(t.host_cores, 1);
  EXPECT_EQ(t.ToString(), "cpu");
}

TEST(TargetTest, ParsesTargetTexts) {
  absl::StatusOr<Target> t = ParseTarget("cuda");
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->arch, "sm_90");
  t = ParseTarget("cuda -arch=sm_80");
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE(t->is_gpu());
  EXPECT_EQ(t->arch, "sm_80");
  t = ParseTarget("sm_90");
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE(t->is_gpu());
  EXPECT_FALSE(ParseTarget("cpu")->is_gpu());
  EXPECT_FALSE(ParseTarget("llvm")->is_gpu());
}

TEST(TargetTest, UnknownTargetsAreErrors) {
  for (const char* text : {"", "rocm", "cuda -arch=90", "cuda -foo", "sm_x"}) {
    EXPECT_THAT(ParseTarget(text), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("(expected cuda[-arch=sm_XX] or cpu)")))
        << text;
  }
  EXPECT_THAT(ParseTarget("rocm"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown target 'rocm'")));
}

}  // namespace
}  // namespace tilesearch::schedule
