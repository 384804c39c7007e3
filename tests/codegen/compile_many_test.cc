// Parallel compilation of many candidates: results in job order equal to one-by-one compilation,
// a candidate over its time limit reports compile_timeout without affecting the others (worker
// processes and threads), and a bad candidate reports only its own error. Each result is also
// reported once, as it ends, to the caller's callback; a cancel flag ends the unfinished ones.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/codegen/nest_builders.h"

namespace tilesearch::codegen {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;
using namespace ::tilesearch::codegen::testing;  // NOLINT: nest builders

GpuCompileJob Job(ir::LoopNest nest) {
  return GpuCompileJob{std::make_shared<const ir::LoopNest>(std::move(nest)), {}};
}

// A kernel whose unrolled loop of `n` statements makes the compiler work for seconds.
ir::LoopNest Huge(int64_t n) {
  ir::Stmt body = Loop("u", n, St("Y", {V("u") % C(64)}, Ld("Y", {V("u") % C(64)}) * 1.5 + 1.0),
                       ir::ForKind::kUnrolled);
  return ir::LoopNest{"huge", {Decl("Y", {64})}, 0, Loop("tx", 1, body, ir::ForKind::kThreadIdxX)};
}

TEST(CompileManyTest, WorkerProcessesGiveTheSamePtxAsDirectCompilation) {
  std::vector<GpuCompileJob> jobs = {Job(GpuSimpleMatmul(16, 16, 4)),
                                     Job(GpuTiledMatmul(32, 32, 8)), Job(GpuSimpleMatmul(8, 24, 3)),
                                     Job(GpuTiledMatmul(64, 32, 16))};
  ParallelCompileOptions parallel;
  parallel.num_workers = 2;
  std::vector<absl::StatusOr<GpuModule>> results = CompileManyToPtx(jobs, {}, parallel);
  ASSERT_EQ(results.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_THAT(results[i], IsOk());
    absl::StatusOr<GpuModule> direct = CompileToPtx(*jobs[i].nest, {});
    ASSERT_THAT(direct, IsOk());
    EXPECT_EQ(results[i]->ptx, direct->ptx);
    ASSERT_EQ(results[i]->kernels.size(), direct->kernels.size());
    EXPECT_EQ(results[i]->kernels[0].name, direct->kernels[0].name);
    EXPECT_EQ(results[i]->kernels[0].block, direct->kernels[0].block);
    EXPECT_EQ(results[i]->kernels[0].static_shared_bytes, direct->kernels[0].static_shared_bytes);
    EXPECT_EQ(results[i]->args.size(), 3u);
    EXPECT_GT(results[i]->compile_ms, 0);
  }
}

void ExpectTimeoutIsolated(ParallelCompileOptions::Isolation isolation, int64_t n,
                           double timeout_ms) {
  std::vector<GpuCompileJob> jobs = {Job(GpuSimpleMatmul(16, 16, 4)), Job(Huge(n)),
                                     Job(GpuSimpleMatmul(8, 8, 2))};
  GpuCompileOptions options;
  options.max_unroll = 1 << 20;  // unroll the huge loop for real
  ParallelCompileOptions parallel;
  parallel.num_workers = 2;
  parallel.timeout_ms = timeout_ms;
  parallel.isolation = isolation;
  std::vector<absl::StatusOr<GpuModule>> results = CompileManyToPtx(jobs, options, parallel);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_THAT(results[0], IsOk());
  EXPECT_THAT(results[1],
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("compile_timeout")));
  EXPECT_THAT(results[2], IsOk());
}

TEST(CompileManyTest, TimeoutKillsOnlyThatCandidatesWorker) {
  ExpectTimeoutIsolated(ParallelCompileOptions::Isolation::kProcess, 200000, 1500);
}

TEST(CompileManyTest, TimeoutInThreadModeAbandonsOnlyThatCandidate) {
  // Smaller, so the abandoned compilation ends while the later tests run.
  ExpectTimeoutIsolated(ParallelCompileOptions::Isolation::kThread, 20000, 300);
}

TEST(CompileManyTest, InvalidCandidateReportsItsOwnError) {
  LaunchConfig small;
  small.grid = {2, 2, 1};
  small.block = {2, 1, 1};
  std::vector<GpuCompileJob> jobs = {
      Job(GpuSimpleMatmul(16, 16, 4)),
      GpuCompileJob{std::make_shared<const ir::LoopNest>(GpuSimpleMatmul(16, 16, 4)), {small}},
      GpuCompileJob{nullptr, {}}};
  std::vector<absl::StatusOr<GpuModule>> results = CompileManyToPtx(jobs);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_THAT(results[0], IsOk());
  EXPECT_THAT(results[1], StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("blockDim.x")));
  EXPECT_THAT(results[2],
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("without a loop nest")));
}

// The callback gets every job exactly once, with the result the call then returns, in both
// isolation modes; a failing job is reported too.
void ExpectEachResultReportedOnce(ParallelCompileOptions::Isolation isolation) {
  std::vector<GpuCompileJob> jobs = {
      Job(GpuSimpleMatmul(16, 16, 4)), Job(GpuTiledMatmul(32, 32, 8)), GpuCompileJob{nullptr, {}},
      Job(GpuSimpleMatmul(8, 24, 3)), Job(GpuTiledMatmul(64, 32, 16))};
  ParallelCompileOptions parallel;
  parallel.num_workers = 2;
  parallel.isolation = isolation;
  std::map<size_t, int> calls;
  std::map<size_t, std::string> reported_ptx;
  std::map<size_t, absl::StatusCode> reported_code;
  std::vector<absl::StatusOr<GpuModule>> results =
      CompileManyToPtx(jobs, {}, parallel, [&](size_t j, const absl::StatusOr<GpuModule>& r) {
        ++calls[j];
        reported_code[j] = r.status().code();
        if (r.ok()) reported_ptx[j] = r->ptx;
      });
  ASSERT_EQ(results.size(), jobs.size());
  ASSERT_EQ(calls.size(), jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    SCOPED_TRACE(j);
    EXPECT_EQ(calls[j], 1);
    EXPECT_EQ(reported_code[j], results[j].status().code());
    if (j == 2) {
      EXPECT_THAT(results[j], StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nest")));
      continue;
    }
    ASSERT_THAT(results[j], IsOk());
    absl::StatusOr<GpuModule> direct = CompileToPtx(*jobs[j].nest, {});
    ASSERT_THAT(direct, IsOk());
    EXPECT_EQ(reported_ptx[j], direct->ptx);
    EXPECT_EQ(results[j]->ptx, direct->ptx);
  }
}

TEST(CompileManyTest, EachResultIsReportedOnceAsItEndsByWorkerProcesses) {
  ExpectEachResultReportedOnce(ParallelCompileOptions::Isolation::kProcess);
}

TEST(CompileManyTest, EachResultIsReportedOnceAsItEndsByThreads) {
  ExpectEachResultReportedOnce(ParallelCompileOptions::Isolation::kThread);
}

// A cancel flag that is already set ends every job as cancelled, each reported once.
void ExpectCancelledJobs(ParallelCompileOptions::Isolation isolation) {
  std::vector<GpuCompileJob> jobs = {Job(GpuSimpleMatmul(16, 16, 4)), Job(Huge(200000)),
                                     Job(GpuSimpleMatmul(8, 8, 2))};
  std::atomic<bool> cancel{true};
  ParallelCompileOptions parallel;
  parallel.num_workers = 2;
  parallel.isolation = isolation;
  parallel.cancel = &cancel;
  std::map<size_t, int> calls;
  std::vector<absl::StatusOr<GpuModule>> results = CompileManyToPtx(
      jobs, {}, parallel, [&](size_t j, const absl::StatusOr<GpuModule>&) { ++calls[j]; });
  ASSERT_EQ(results.size(), jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    SCOPED_TRACE(j);
    EXPECT_EQ(calls[j], 1);
    EXPECT_THAT(results[j], StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
  }
}

TEST(CompileManyTest, ASetCancelFlagEndsEveryJobInWorkerProcesses) {
  ExpectCancelledJobs(ParallelCompileOptions::Isolation::kProcess);
}

TEST(CompileManyTest, ASetCancelFlagEndsEveryJobInThreads) {
  ExpectCancelledJobs(ParallelCompileOptions::Isolation::kThread);
}

// A worker process keeps no descriptor of its parent's but its own socket: once the parent closes
// a pipe's write end (as a device lock's owner closes its file), the pipe reads end-of-file while
// the workers still run (the callback runs before the pool ends them).
TEST(CompileManyTest, WorkerProcessesDoNotHoldTheParentsDescriptors) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
  std::vector<GpuCompileJob> jobs = {Job(GpuSimpleMatmul(16, 16, 4)), Job(GpuSimpleMatmul(8, 8, 2)),
                                     Job(GpuTiledMatmul(32, 32, 8))};
  ParallelCompileOptions parallel;
  parallel.num_workers = 2;
  ssize_t read_after_close = -2;
  int read_errno = 0;
  std::vector<absl::StatusOr<GpuModule>> results =
      CompileManyToPtx(jobs, {}, parallel, [&](size_t, const absl::StatusOr<GpuModule>&) {
        if (read_after_close != -2) return;
        ::close(fds[1]);
        char c;
        read_after_close = ::read(fds[0], &c, 1);
        read_errno = errno;
      });
  ::close(fds[0]);
  ASSERT_EQ(results.size(), jobs.size());
  for (const auto& r : results) EXPECT_THAT(r, IsOk());
  // 0: end of file, no worker holds the write end; -1 with EAGAIN: one still does.
  EXPECT_EQ(read_after_close, 0) << "errno " << read_errno;
}

}  // namespace
}  // namespace tilesearch::codegen
