// Codegen on nests produced by schedule::Lower from random schedules (seeded): random CPU
// schedules of every operator (splits with guarded tails, reorders, parallel, vectorize, unroll,
// inlining) JIT-compiled in one merged module and compared with the interpreter's reference;
// random GPU schedules of several operators (block/thread bindings, cross-thread reductions, the
// Ansor-style shared-memory matmul with random tiles) compiled in parallel to PTX that ptxas
// accepts, and, where the host can run them (no barriers), JIT-run against the reference.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/registry.h"
#include "ir/reference.h"
#include "schedule/lower.h"
#include "tests/codegen/nest_builders.h"
#include "tests/schedule/lower_test_util.h"

namespace tilesearch::codegen {
namespace {

using schedule::IteratorAnnotation;
using schedule::IteratorKind;
using schedule::testing::Sched;
using ::tilesearch::testing::IsOk;

constexpr char kPtxas[] = "/usr/local/cuda/bin/ptxas";

struct Candidate {
  std::string label;
  ir::ComputeDAG dag;
  schedule::LoweredKernel lowered;
};

class Rng {
 public:
  explicit Rng(uint64_t seed) : rng_(seed) {}
  int Pick(int lo, int hi) { return lo + static_cast<int>(rng_() % (hi - lo + 1)); }
  bool Coin() { return rng_() & 1; }

 private:
  std::mt19937_64 rng_;
};

// Nests with barriers cannot run as serial loops on the host.
bool HasBarrier(const ir::Stmt& s) {
  class Finder : public ir::StmtVisitor {
   public:
    bool found = false;

   protected:
    void VisitBarrier(const ir::BarrierNode*, const ir::Stmt&) override { found = true; }
  };
  Finder f;
  f.Visit(s);
  return f.found;
}

bool IsOutput(const ir::ComputeDAG& dag, int id) {
  return std::count(dag.output_ids().begin(), dag.output_ids().end(), id) > 0;
}

void InlineAtRandom(const ir::ComputeDAG& dag, Sched& s, Rng& rng) {
  for (int id = 0; id < dag.num_stages(); ++id) {
    if (dag.IsInlinable(id) && !IsOutput(dag, id) && rng.Coin()) s.Inline(dag.stage(id).name());
  }
}

// Names of the stages computed at root (not placeholders, not inlined), outputs last.
std::vector<std::string> RootStages(const schedule::State& state) {
  std::vector<std::string> names;
  for (int id = 0; id < state.num_stages(); ++id) {
    const schedule::Stage& st = state.stage(id);
    if (!st.is_placeholder() && st.location == schedule::ComputeLocation::kRoot) {
      names.push_back(st.name());
    }
  }
  return names;
}

// CPU tiling per root stage: space iterators split at random (outer parts first), reduce
// iterators in the middle, inner space parts last; the first outer loop parallel and the last
// inner loop vectorized or unrolled, at random.
void RandomCpuSchedule(const ir::ComputeDAG& dag, Sched& s, Rng& rng) {
  InlineAtRandom(dag, s, rng);
  for (const std::string& name : RootStages(s.state())) {
    const schedule::Stage stage = s.state().stage(s.state().StageId(name));
    std::vector<std::string> outer, reduce, inner;
    for (const schedule::Iterator& it : stage.iters) {
      if (it.kind != IteratorKind::kSpace) {
        reduce.push_back(it.name);
      } else if (it.extent >= 2 && rng.Pick(0, 2) > 0) {
        s.Split(name, it.name, {rng.Pick(1, static_cast<int>(std::min<int64_t>(it.extent, 8)))});
        outer.push_back(it.name + ".0");
        inner.push_back(it.name + ".1");
      } else {
        outer.push_back(it.name);
      }
    }
    std::vector<std::string> order = outer;
    order.insert(order.end(), reduce.begin(), reduce.end());
    order.insert(order.end(), inner.begin(), inner.end());
    if (order.size() > 1) s.Reorder(name, order);
    if (!outer.empty() && rng.Coin()) s.Annotate(name, outer[0], IteratorAnnotation::kParallel);
    if (!inner.empty()) {
      const int pick = rng.Pick(0, 2);
      if (pick == 1) s.Annotate(name, inner.back(), IteratorAnnotation::kVectorize);
      if (pick == 2) s.Annotate(name, inner.back(), IteratorAnnotation::kUnroll);
    }
  }
}

// GPU bindings per root stage: space iterators fused and split over blocks and threads, or (for
// reductions, at random) reduce iterators fused and split with the inner part on threadIdx.x
// (a cross-thread reduction).
void RandomGpuSchedule(const ir::ComputeDAG& dag, Sched& s, Rng& rng) {
  InlineAtRandom(dag, s, rng);
  for (const std::string& name : RootStages(s.state())) {
    const schedule::Stage stage = s.state().stage(s.state().StageId(name));
    std::vector<std::string> space, reduce;
    for (const schedule::Iterator& it : stage.iters) {
      (it.kind == IteratorKind::kSpace ? space : reduce).push_back(it.name);
    }
    if (space.empty()) continue;  // a one-thread kernel
    if (space.size() > 1) s.Fuse(name, space);
    const std::string f = absl::StrJoin(space, "@");
    if (!reduce.empty() && rng.Coin()) {
      if (reduce.size() > 1) s.Fuse(name, reduce);
      const std::string r = absl::StrJoin(reduce, "@");
      s.Split(name, r, {rng.Pick(1, 16)});
      s.Annotate(name, r + ".1", IteratorAnnotation::kThreadIdxX);
      s.Annotate(name, f, IteratorAnnotation::kBlockIdxX);
    } else {
      s.Split(name, f, {rng.Pick(1, 64)});
      s.Annotate(name, f + ".1", IteratorAnnotation::kThreadIdxX);
      s.Annotate(name, f + ".0", IteratorAnnotation::kBlockIdxX);
    }
  }
}

// The Ansor-style GPU matmul sketch: local accumulator, vthread, shared tiles of A and B filled
// cooperatively by the block's threads, random tile sizes.
void SharedMemoryMatmulSchedule(Sched& s, Rng& rng) {
  s.CacheWrite("C", ir::MemoryScope::kLocal);
  s.Split("C", "i", {rng.Pick(1, 2), rng.Pick(1, 4), rng.Pick(1, 4)});
  s.Split("C", "j", {rng.Pick(1, 2), rng.Pick(1, 8), rng.Pick(1, 4)});
  s.Reorder("C", {"i.0", "j.0", "i.1", "j.1", "i.2", "j.2", "i.3", "j.3"});
  s.Fuse("C", {"i.0", "j.0"}).Fuse("C", {"i.1", "j.1"}).Fuse("C", {"i.2", "j.2"});
  s.Annotate("C", "i.0@j.0", IteratorAnnotation::kBlockIdxX)
      .Annotate("C", "i.1@j.1", IteratorAnnotation::kVThread)
      .Annotate("C", "i.2@j.2", IteratorAnnotation::kThreadIdxX);
  s.ComputeAt("C.local", "C", "i.2@j.2");
  s.Split("C.local", "k", {rng.Pick(1, 8)}).Reorder("C.local", {"k.0", "k.1", "i", "j"});
  s.CacheRead("A", ir::MemoryScope::kShared, {"C.local"});
  s.CacheRead("B", ir::MemoryScope::kShared, {"C.local"});
  s.ComputeAt("A.shared", "C.local", "k.0").ComputeAt("B.shared", "C.local", "k.0");
  const int64_t threads =
      s.state().stage(s.state().StageId("C")).iters[s.IterId("C", "i.2@j.2")].extent;
  for (const std::string name : {"A.shared", "B.shared"}) {
    const schedule::Stage& st = s.state().stage(s.state().StageId(name));
    std::vector<std::string> iters;
    for (const schedule::Iterator& it : st.iters) iters.push_back(it.name);
    s.Fuse(name, iters);
    const std::string fused = s.state().stage(s.state().StageId(name)).iters[0].name;
    s.Split(name, fused, {threads});
    s.Annotate(name, fused + ".1", IteratorAnnotation::kThreadIdxX);
  }
}

// Merges the candidates' nests into one host module, runs it on random inputs and compares every
// output with the interpreter's reference of its DAG (1e-5 relative to max(1, |reference|)).
void ExpectHostMatchesReference(const std::vector<Candidate>& candidates, int opt_level) {
  std::vector<ir::LoopNest> nests;
  std::vector<std::string> prefixes;
  for (size_t i = 0; i < candidates.size(); ++i) {
    nests.push_back(candidates[i].lowered.nest);
    prefixes.push_back(absl::StrCat("c", i, "_"));
  }
  const ir::LoopNest merged = testing::MergeNests("scheduled", nests, prefixes);
  HostCompileOptions options;
  options.opt_level = opt_level;
  absl::StatusOr<std::unique_ptr<HostKernel>> kernel = CompileForHost(merged, options);
  ASSERT_THAT(kernel, IsOk());
  ir::BufferMap buffers;
  std::vector<ir::BufferMap> inputs;
  for (size_t i = 0; i < candidates.size(); ++i) {
    inputs.push_back(ir::MakeRandomInputs(candidates[i].dag, 50 + i));
    for (const ir::BufferDecl& p : nests[i].params) {
      auto it = inputs.back().find(p.name);
      buffers[prefixes[i] + p.name] =
          it != inputs.back().end() ? it->second : ir::HostBuffer::Zeros(p.dtype, p.shape);
    }
  }
  ASSERT_THAT(RunOnBuffers(**kernel, merged, buffers), IsOk());
  for (size_t i = 0; i < candidates.size(); ++i) {
    SCOPED_TRACE(candidates[i].label);
    absl::StatusOr<ir::BufferMap> want = ir::RunReference(candidates[i].dag, inputs[i]);
    ASSERT_THAT(want, IsOk());
    for (const auto& [name, ref] : *want) {
      const ir::HostBuffer& got = buffers.at(prefixes[i] + name);
      double worst = 0;
      for (size_t e = 0; e < ref.data.size(); ++e) {
        const double d =
            std::fabs(got.data[e] - ref.data[e]) / std::max(1.0, std::fabs(ref.data[e]));
        if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
      }
      EXPECT_LE(worst, 1e-5) << candidates[i].label << " output " << name << "\n"
                             << candidates[i].lowered.nest;
    }
  }
}

const std::set<std::string> kTwoTrials = {"matmul",      "batch_matmul",   "conv2d_nchw",
                                          "conv2d_nhwc", "softmax",        "layernorm",
                                          "avg_pool2d",  "dense_bias_relu"};

TEST(ScheduledCodegenTest, RandomCpuSchedulesOfEveryOperatorMatchTheReference) {
  Rng rng(2024);
  const std::map<std::string, ir::OpArgs> examples = testing::OpExamples();
  std::vector<Candidate> candidates;
  for (const ir::OpInfo& op : ir::OpLibrary()) {
    auto ex = examples.find(op.name);
    ASSERT_NE(ex, examples.end()) << "no example for operator '" << op.name << "'";
    absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp(op.name, ex->second);
    ASSERT_THAT(dag, IsOk());
    // A second schedule for the operators with the most loop structure.
    const int trials = kTwoTrials.count(op.name) ? 2 : 1;
    for (int trial = 0; trial < trials; ++trial) {
      Sched s(*dag);
      RandomCpuSchedule(*dag, s, rng);
      ASSERT_THAT(s.status(), IsOk()) << op.name << "\n" << s.state().ToString();
      absl::StatusOr<schedule::LoweredKernel> lowered =
          schedule::Lower(*dag, s.state(), Target::HostCpu());
      ASSERT_THAT(lowered, IsOk()) << op.name << "\n" << s.state().ToString();
      candidates.push_back({absl::StrCat(op.name, " trial ", trial), *dag, *std::move(lowered)});
    }
  }
  // LLVM -O1 keeps the one large module quick (host_jit_ops_test and host_jit_test cover -O3).
  ExpectHostMatchesReference(candidates, /*opt_level=*/1);
}

TEST(ScheduledCodegenTest, RandomGpuSchedulesAssembleAndRunOnTheHostWhereSerial) {
  Rng rng(77);
  const std::map<std::string, ir::OpArgs> examples = testing::OpExamples();
  std::vector<Candidate> candidates;
  for (const std::string op :
       {"matmul", "batch_matmul", "softmax", "layernorm", "conv2d_nchw", "reduce_sum", "gelu",
        "max_pool2d", "transpose", "dense_bias_relu"}) {
    absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp(op, examples.at(op));
    ASSERT_THAT(dag, IsOk());
    for (int trial = 0; trial < 3; ++trial) {
      Sched s(*dag);
      RandomGpuSchedule(*dag, s, rng);
      ASSERT_THAT(s.status(), IsOk()) << op;
      absl::StatusOr<schedule::LoweredKernel> lowered =
          schedule::Lower(*dag, s.state(), Target::H200());
      ASSERT_THAT(lowered, IsOk()) << op << "\n" << s.state().ToString();
      candidates.push_back({absl::StrCat(op, " trial ", trial), *dag, *std::move(lowered)});
    }
  }
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t m = rng.Pick(8, 64), n = rng.Pick(8, 64), k = rng.Pick(4, 32);
    absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp("matmul", testing::Args({{m, k}, {k, n}}));
    ASSERT_THAT(dag, IsOk());
    Sched s(*dag);
    SharedMemoryMatmulSchedule(s, rng);
    ASSERT_THAT(s.status(), IsOk());
    absl::StatusOr<schedule::LoweredKernel> lowered =
        schedule::Lower(*dag, s.state(), Target::H200());
    ASSERT_THAT(lowered, IsOk()) << s.state().ToString();
    candidates.push_back(
        {absl::StrCat("shared matmul ", m, "x", n, "x", k), *dag, *std::move(lowered)});
  }

  std::vector<GpuCompileJob> jobs;
  for (const Candidate& c : candidates) {
    GpuCompileJob job{std::make_shared<const ir::LoopNest>(c.lowered.nest), {}};
    for (const LaunchConfig& l : c.lowered.launches) {
      job.launches.push_back(LaunchConfig{l.grid, l.block, l.shared_memory_bytes});
    }
    jobs.push_back(std::move(job));
  }
  std::vector<absl::StatusOr<GpuModule>> modules = CompileManyToPtx(jobs);
  ASSERT_EQ(modules.size(), candidates.size());
  const bool have_ptxas = std::filesystem::exists(kPtxas);
  std::vector<Candidate> serial;
  for (size_t i = 0; i < candidates.size(); ++i) {
    SCOPED_TRACE(candidates[i].label);
    ASSERT_THAT(modules[i], IsOk()) << candidates[i].lowered.nest;
    EXPECT_EQ(modules[i]->kernels.size(), candidates[i].lowered.launches.size());
    if (have_ptxas) {
      const std::string path =
          ::testing::TempDir() + "/scheduled_codegen_" + std::to_string(::getpid()) + ".ptx";
      std::ofstream(path) << modules[i]->ptx;
      const std::string cmd = std::string(kPtxas) + " -arch=sm_90 " + path + " -o " + path +
                              ".cubin > " + path + ".log 2>&1";
      EXPECT_EQ(std::system(cmd.c_str()), 0) << modules[i]->ptx;
    }
    if (!HasBarrier(candidates[i].lowered.nest.body)) serial.push_back(candidates[i]);
  }
  if (!have_ptxas) std::printf("ptxas not found at %s: PTX not assembled\n", kPtxas);
  EXPECT_GE(serial.size(), 10u);
  ExpectHostMatchesReference(serial, /*opt_level=*/3);
}

}  // namespace
}  // namespace tilesearch::codegen
