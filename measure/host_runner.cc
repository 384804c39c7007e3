// The host (cpu target) runner: one worker per task, kept across Run calls (measure/kept_worker.h).
// Once per task, in the parent: the check inputs of every trial, the timing inputs, and for small
// tasks the reference and magnitudes through the interpreter. In each worker's setup (once per
// task unless a candidate ends the worker), for larger tasks: the naive program JIT-compiled for
// the host, run on those inputs and spot-checked against float64 point evaluation. Per candidate,
// its loop nest reaches the worker as bytes (measure/item_request.h); in the worker: JIT compile
// (phase "compile"), then each trial on packed inputs with NaN-poisoned outputs compared
// element-wise under the precision rule's cancellation allowance (M of every element from the
// magnitude program: interpreted in the parent for small tasks, JIT-compiled in the worker's setup
// otherwise), the remaining mismatches arbitrated in float64 (ArbitrateMismatches), then timing on
// separate random inputs with a 64 MiB buffer written before every timed run (phase "run"); the
// result returns as JSON.
//
// Forking: the parent may hold MLIR / LLVM state from earlier compiles; forking is safe as long as
// no other thread of the parent is inside MLIR / LLVM (or holds a lock the worker needs) at the
// time. A worker that inherits such a lock deadlocks and is reported as timed out.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "codegen/codegen.h"
#include "ir/compensated_sum.h"
#include "ir/lower_naive.h"
#include "ir/magnitude_dag.h"
#include "ir/reference.h"
#include "measure/checker.h"
#include "measure/item_request.h"
#include "measure/kept_worker.h"
#include "measure/measure.h"
#include "measure/reference.h"
#include "measure/result_reporter.h"
#include "measure/runner.h"

namespace tilesearch::measure {

using runtime::TimeRepeated;
using runtime::TimingStats;
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Bytes written before each timed run: larger than the last-level cache of the machines we run on.
constexpr size_t kFlushBytes = size_t{64} << 20;
// Staged timing's first look: a candidate whose fastest check run (unflushed, on buffers it has
// just written: first touches included, so never faster than its timed runs would be by much)
// took more than this factor times the screen, and more than the floor (where a few page faults
// are noise), is screened by its check runs alone, without the flushed short timing.
constexpr double kCheckRunScreenFactor = 2;
constexpr double kCheckRunScreenFloorMs = 1;

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// 64-byte aligned, uninitialized bytes (kernels need 16).
class AlignedBytes {
 public:
  explicit AlignedBytes(size_t size)
      : size_(size),
        data_(static_cast<std::byte*>(
            std::aligned_alloc(64, std::max<size_t>(64, (size + 63) / 64 * 64)))) {
    CHECK(data_ != nullptr) << "cannot allocate " << size << " bytes";
  }
  ~AlignedBytes() { std::free(data_); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  size_t size_;
  std::byte* data_;
};

// Interpreted operations of the naive program: 2 · FLOPs + every element of every stage.
double EstimateOps(const ir::ComputeDAG& dag) {
  double elements = 0;
  for (const ir::Tensor& t : dag.stages()) elements += static_cast<double>(t.NumElements());
  return 2 * dag.Flops() + elements;
}

// The params of `nest` as typed buffers: inputs packed from `inputs`, outputs poisoned.
// Errors: kInvalidArgument for a param that is not a tensor of the task or has another shape.
absl::StatusOr<std::vector<std::unique_ptr<AlignedBytes>>> PrepareBuffers(
    const ir::LoopNest& nest, const ir::BufferMap& inputs, const ir::ComputeDAG& dag) {
  std::vector<std::unique_ptr<AlignedBytes>> buffers;
  for (const ir::BufferDecl& p : nest.params) {
    const int id = dag.StageId(p.name);
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("candidate parameter '", p.name, "' is not a tensor of the task"));
    }
    const ir::Tensor& t = dag.stage(id);
    if (t.shape() != p.shape || t.dtype() != p.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("candidate parameter '", p.name, "' is ", ir::TypeName(p.dtype), "[",
                       absl::StrJoin(p.shape, ", "), "]; the task's tensor is ",
                       ir::TypeName(t.dtype()), "[", absl::StrJoin(t.shape(), ", "), "]"));
    }
    auto it = inputs.find(p.name);
    const int64_t n = t.NumElements();
    auto bytes = std::make_unique<AlignedBytes>(static_cast<size_t>(n * StorageBytes(p.dtype)));
    if (it != inputs.end()) {
      const std::vector<std::byte> packed = PackBuffer(it->second);
      std::memcpy(bytes->data(), packed.data(), packed.size());
    } else {
      PoisonBytes(bytes->data(), p.dtype, n);
    }
    buffers.push_back(std::move(bytes));
  }
  return buffers;
}

std::vector<void*> Pointers(const std::vector<std::unique_ptr<AlignedBytes>>& buffers) {
  std::vector<void*> pointers;
  for (const auto& b : buffers) pointers.push_back(b->data());
  return pointers;
}

// Runs `kernel` (compiled from `nest`) on `inputs`; returns the outputs (the params not in
// `inputs`) by name.
absl::StatusOr<ir::BufferMap> RunOnInputs(codegen::HostKernel& kernel, const ir::LoopNest& nest,
                                          const ir::ComputeDAG& dag, const ir::BufferMap& inputs,
                                          double* run_ms = nullptr) {
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<AlignedBytes>> buffers,
                   PrepareBuffers(nest, inputs, dag));
  const Clock::time_point t0 = Clock::now();
  RETURN_IF_ERROR(kernel.Run(Pointers(buffers)));
  if (run_ms != nullptr) *run_ms = MsSince(t0);
  ir::BufferMap outputs;
  for (size_t i = 0; i < nest.params.size(); ++i) {
    const ir::BufferDecl& p = nest.params[i];
    if (inputs.count(p.name) != 0) continue;
    ir::HostBuffer out = ir::HostBuffer::Zeros(p.dtype, p.shape);
    RETURN_IF_ERROR(UnpackBuffer(buffers[i]->data(), buffers[i]->size(), &out));
    outputs.emplace(p.name, std::move(out));
  }
  return outputs;
}

MeasureResult Failure(MeasureError error, std::string message) {
  MeasureResult r;
  r.error = error;
  r.message = std::move(message);
  return r;
}

// kind from a build status: "compile_timeout" → kCompileTimeout, "invalid_schedule" →
// kInvalidSchedule, others kCompileError.
MeasureError BuildErrorKind(const absl::Status& status) {
  const std::string message(status.message());
  if (message.find("compile_timeout") != std::string::npos) return MeasureError::kCompileTimeout;
  if (message.find("invalid_schedule") != std::string::npos) return MeasureError::kInvalidSchedule;
  return MeasureError::kCompileError;
}

// The task a kept worker serves, built in this process once per task: the check inputs of every
// trial, the timing inputs and, for small tasks, the interpreter's references and magnitudes.
// The worker's setup and items read their fork-time copy; for larger tasks the setup fills its
// copy's references and magnitudes with the compiled naive program. Every value is a function of
// the task and MeasureOptions::seed, so keeping the task across Run calls changes no result.
struct HostTask {
  std::string key;  // the DAG's workload key
  ir::ComputeDAG dag;
  int trials = 0;
  bool interpret = false;  // references from the interpreter (small tasks), in this process
  std::vector<CheckDistribution> distributions;
  std::vector<uint64_t> trial_seeds;
  std::vector<ir::BufferMap> inputs;
  std::vector<ir::BufferMap> expected;
  // M of every float output element per trial (empty maps: none, e.g. integer-only outputs).
  std::vector<ir::BufferMap> magnitudes;
  // The float32 naive program's outputs of the first trial: the float32 reference error that the
  // sampled float64 error of a candidate is compared with (the interpreter's reference is
  // float64-accurate; the naive kernel's, computed in the worker, is float32 itself).
  ir::BufferMap native_first;
  ir::BufferMap timing_inputs;

  // Worker state, filled in the worker (the parent's copies stay empty).
  std::unique_ptr<AlignedBytes> flush;
  std::vector<SampledOutput> sampled;
  uint64_t batch = 0;        // the batch of the last request (batch_best_ms is per batch)
  double batch_best_ms = 0;  // the fastest candidate the worker fully timed in it (ScreenFor)

  // Declared last, so destroyed first: its worker reads the fields above.
  std::unique_ptr<KeptWorker> worker;
};

class HostRunner : public Runner {
 public:
  HostRunner(const Target& target, const MeasureOptions& options)
      : target_(target), options_(options) {}

  const Target& target() const override { return target_; }
  void SetScreenAboveMs(double ms) override { options_.screen_above_ms = ms > 0 ? ms : 0; }
  void SetTiming(int min_runs, double min_total_ms, double soak_ms) override {
    timing_override_ = {std::max(min_runs, 0), std::max(min_total_ms, 0.0), std::max(soak_ms, 0.0)};
  }
  RunUsage last_run_usage() const override { return last_usage_; }

  std::vector<MeasureResult> Run(const ir::ComputeDAG& dag,
                                 const std::vector<BuildResult>& candidates) override {
    return RunStreaming(dag, candidates, nullptr);
  }

  std::vector<MeasureResult> RunStreaming(const ir::ComputeDAG& dag,
                                          const std::vector<BuildResult>& candidates,
                                          const ResultCallback& on_result) override {
    last_usage_ = RunUsage{};
    std::vector<MeasureResult> results(candidates.size());
    ResultReporter reporter(&results, on_result);
    std::vector<int> runnable;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const BuildResult& c = candidates[i];
      if (!c.build_status.ok()) {
        results[i] = Failure(BuildErrorKind(c.build_status), c.build_status.ToString());
        results[i].compile_ms = c.compile_ms;
      } else if (c.nest == nullptr) {
        results[i] = Failure(MeasureError::kCompileError, "candidate has no loop nest");
      } else {
        runnable.push_back(static_cast<int>(i));
        continue;
      }
      reporter.Final(i);
    }
    if (runnable.empty()) return results;

    // A new task (or the first) gets its data and a new worker; the same task keeps both.
    const std::string key = dag.WorkloadKey();
    if (task_ == nullptr || task_->key != key) {
      task_.reset();
      const Clock::time_point prepare_start = Clock::now();
      absl::StatusOr<std::unique_ptr<HostTask>> task = PrepareTask(dag, key);
      last_usage_.prepare_ms = MsSince(prepare_start);
      if (!task.ok()) {
        for (int i : runnable) {
          results[i] = Failure(MeasureError::kUnknown, std::string(task.status().message()));
          reporter.Final(i);
        }
        return results;
      }
      task_ = *std::move(task);
      HostTask* t = task_.get();
      WorkerOptions worker;
      worker.item_timeout_ms = options_.run_timeout_ms;
      worker.setup_timeout_ms = options_.setup_timeout_ms;
      task_->worker = std::make_unique<KeptWorker>(
          [this, t]() { return SetupWorker(*t); },
          [this, t](const std::string& request) { return MeasureRequest(*t, request); }, worker);
    }

    ++batches_;
    std::vector<std::string> requests;
    for (int i : runnable) {
      const BuildResult& c = candidates[i];
      const TimingOverride& t = timing_override_;
      requests.push_back(EncodeHostRequest({{batches_, options_.screen_above_ms, c.compile_ms,
                                             t.min_runs, t.min_total_ms, t.soak_ms},
                                            *c.nest}));
    }
    task_->worker->Run(requests, [&](int k, const WorkerItemOutcome& o) {
      const int i = runnable[static_cast<size_t>(k)];
      results[i] = ResultOfOutcome(o, i, candidates[i]);
      reporter.Final(i);
    });
    const WorkerUsage& usage = task_->worker->last_run_usage();
    last_usage_.worker_setups = usage.setups;
    last_usage_.setup_ms = usage.setup_ms;
    last_usage_.item_ms = usage.item_ms;
    return results;
  }

 private:
  // The task's data built in this process (see HostTask). Errors: kUnknown-worthy reference
  // failures, "reference failed: ...".
  absl::StatusOr<std::unique_ptr<HostTask>> PrepareTask(const ir::ComputeDAG& dag,
                                                        const std::string& key) const {
    auto task = std::make_unique<HostTask>();
    task->key = key;
    task->dag = dag;
    // The seeds of the first batch of a runner that drew fresh inputs per batch: the same values.
    const uint64_t task_seed = Mix(options_.seed ^ Mix(1));
    const int trials = options_.check ? options_.check_trials : 0;
    task->trials = trials;
    task->expected.resize(trials);
    task->magnitudes.resize(trials);
    for (int t = 0; t < trials; ++t) {
      task->distributions.push_back(options_.distributions[t % options_.distributions.size()]);
      task->trial_seeds.push_back(Mix(task_seed + static_cast<uint64_t>(t)));
      task->inputs.push_back(MakeCheckInputs(dag, task->distributions[t], task->trial_seeds[t]));
    }
    task->interpret = EstimateOps(dag) <= options_.interpreter_reference_max_ops;
    if (task->interpret) {
      for (int t = 0; t < trials; ++t) {
        absl::StatusOr<ir::BufferMap> ref = InterpreterReference(dag, task->inputs[t]);
        if (!ref.ok()) {
          return absl::InternalError(absl::StrCat("reference failed: ", ref.status().ToString()));
        }
        task->expected[t] = *std::move(ref);
        absl::StatusOr<ir::BufferMap> m = InterpreterMagnitudes(dag, task->inputs[t]);
        if (m.ok()) task->magnitudes[t] = *std::move(m);
      }
      if (trials > 0) {
        absl::StatusOr<ir::BufferMap> native = ir::RunReference(dag, task->inputs[0]);
        if (native.ok()) task->native_first = *std::move(native);
      }
    }
    task->timing_inputs =
        MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, Mix(task_seed ^ 0x7469u));
    return task;
  }

  // Runs in the worker once per fork: the flush buffer and, for tasks too large for the
  // interpreter, the compiled naive references and magnitudes; then the float64 sampled points.
  absl::Status SetupWorker(HostTask& task) const {
    if (options_.timing.flush_cache) task.flush = std::make_unique<AlignedBytes>(kFlushBytes);
    if (task.trials == 0) return absl::OkStatus();
    if (!task.interpret) {
      RETURN_IF_ERROR(RunNaiveReference(task.dag, task.inputs, task.trial_seeds, &task.expected));
      RunNaiveMagnitudes(task.dag, task.inputs, &task.magnitudes);
    }
    absl::StatusOr<std::vector<SampledOutput>> s = SampleFloat64Reference(
        task.dag, task.inputs[0], task.interpret ? task.native_first : ir::BufferMap(), options_,
        task.trial_seeds[0]);
    if (!s.ok()) {
      return absl::InternalError(
          absl::StrCat("reference: float64 sampled points: ", s.status().message()));
    }
    task.sampled = *std::move(s);
    return absl::OkStatus();
  }

  // Runs in the worker per candidate: decodes the request, then MeasureOne; MeasureResultToJson's
  // text.
  std::string MeasureRequest(HostTask& task, const std::string& bytes) const {
    absl::StatusOr<HostRequest> request = DecodeHostRequest(bytes);
    if (!request.ok()) {
      return MeasureResultToJson(
                 Failure(MeasureError::kUnknown, std::string(request.status().message())))
          .dump();
    }
    if (request->context.batch != task.batch) {
      task.batch = request->context.batch;
      task.batch_best_ms = 0;
    }
    MeasureOptions options = options_;
    ApplyRequestContext(request->context, &options);
    return MeasureResultToJson(
               MeasureOne(options, task, request->nest, request->context.compile_ms))
        .dump();
  }

  // The result of candidate i from its worker outcome.
  static MeasureResult ResultOfOutcome(const WorkerItemOutcome& o, int i, const BuildResult& c) {
    MeasureResult r;
    switch (o.kind) {
      case WorkerItemOutcome::Kind::kDone: {
        nlohmann::json j = nlohmann::json::parse(o.payload, nullptr, /*allow_exceptions=*/false);
        absl::StatusOr<MeasureResult> parsed =
            j.is_discarded() ? absl::InvalidArgumentError("not json") : MeasureResultFromJson(j);
        if (parsed.ok()) {
          r = *std::move(parsed);
        } else {
          r = Failure(MeasureError::kUnknown,
                      absl::StrCat("cannot read the worker's result for candidate ", i, ": ",
                                   parsed.status().message()));
        }
        break;
      }
      case WorkerItemOutcome::Kind::kCrashed:
        r = Failure(
            o.phase == "compile" ? MeasureError::kCompileError : MeasureError::kRuntimeError,
            absl::StrCat("worker ", o.message, " while ",
                         o.phase == "compile" ? "compiling" : "running", " candidate ", i));
        r.run_wall_ms = o.wall_ms;
        break;
      case WorkerItemOutcome::Kind::kTimedOut:
        r = Failure(
            o.phase == "compile" ? MeasureError::kCompileTimeout : MeasureError::kRunTimeout,
            absl::StrCat("candidate ", i, " ", o.message));
        r.run_wall_ms = o.wall_ms;
        break;
      case WorkerItemOutcome::Kind::kSetupFailed:
        r = Failure(MeasureError::kUnknown, o.message);
        break;
    }
    if (r.compile_ms == 0) r.compile_ms = c.compile_ms;
    return r;
  }

 private:
  // The naive program of `dag` with compensated float32 sums (within about 2u·Σ|terms| of the
  // exact value whatever the length), JIT-compiled for the host and run on every trial's inputs:
  // its outputs by name, one map per trial. Errors: kInternal "naive program does not compile:
  // ..." / "naive program failed: ...".
  absl::StatusOr<std::vector<ir::BufferMap>> RunCompensatedNaive(
      const ir::ComputeDAG& dag, const std::vector<ir::BufferMap>& inputs) const {
    ASSIGN_OR_RETURN(ir::LoopNest naive, ir::LowerNaive(dag));
    naive = ir::CompensateFloatSums(naive);
    codegen::HostCompileOptions compile;
    compile.num_threads = options_.host_threads;
    absl::StatusOr<std::unique_ptr<codegen::HostKernel>> kernel =
        codegen::CompileForHost(naive, compile);
    if (!kernel.ok()) {
      return absl::InternalError(
          absl::StrCat("naive program does not compile: ", kernel.status().ToString()));
    }
    std::vector<ir::BufferMap> outputs;
    for (const ir::BufferMap& in : inputs) {
      absl::StatusOr<ir::BufferMap> out = RunOnInputs(**kernel, naive, dag, in);
      if (!out.ok()) {
        return absl::InternalError(absl::StrCat("naive program failed: ", out.status().ToString()));
      }
      outputs.push_back(*std::move(out));
    }
    return outputs;
  }

  // Runs in the worker's setup for tasks too large for the interpreter: the compensated naive
  // program on every trial's inputs, each spot-checked in float64.
  absl::Status RunNaiveReference(const ir::ComputeDAG& dag,
                                 const std::vector<ir::BufferMap>& inputs,
                                 const std::vector<uint64_t>& trial_seeds,
                                 std::vector<ir::BufferMap>* expected) const {
    absl::StatusOr<std::vector<ir::BufferMap>> outs = RunCompensatedNaive(dag, inputs);
    if (!outs.ok())
      return absl::InternalError(absl::StrCat("reference: ", outs.status().message()));
    for (size_t t = 0; t < outs->size(); ++t) {
      absl::Status verified = VerifyReferenceSamples(
          dag, inputs[t], (*outs)[t], options_.reference_point_samples, trial_seeds[t]);
      if (!verified.ok()) {
        return absl::InternalError(absl::StrCat("reference: ", verified.message()));
      }
      (*expected)[t] = std::move((*outs)[t]);
    }
    return absl::OkStatus();
  }

  // Runs in the worker's setup for tasks too large for the interpreter: the magnitude program
  // (ir::BuildMagnitudeProgram) run as RunCompensatedNaive, M of each float output by its name.
  // Best effort: without it (no float output, or a compile failure, said on stderr) the check has
  // no cancellation allowance, stricter but still arbitrated in float64.
  void RunNaiveMagnitudes(const ir::ComputeDAG& dag, const std::vector<ir::BufferMap>& inputs,
                          std::vector<ir::BufferMap>* magnitudes) const {
    absl::StatusOr<ir::MagnitudeProgram> program = ir::BuildMagnitudeProgram(dag);
    if (!program.ok()) return;  // no float output
    absl::StatusOr<std::vector<ir::BufferMap>> outs = RunCompensatedNaive(program->dag, inputs);
    if (!outs.ok()) {
      std::fprintf(stderr,
                   "warning: no magnitude program (%s); the check runs without the cancellation "
                   "allowance\n",
                   std::string(outs.status().message()).c_str());
      return;
    }
    for (size_t t = 0; t < outs->size(); ++t) {
      (*magnitudes)[t] = ir::KeyedBySource(*program, dag, std::move((*outs)[t]));
    }
  }

  // Runs in the worker: compile, check, time one candidate (`nest`, built in `compile_ms`) under
  // `options` (the runner's, with the batch's screen).
  MeasureResult MeasureOne(const MeasureOptions& options, HostTask& task, const ir::LoopNest& nest,
                           double compile_ms) const {
    const ir::ComputeDAG& dag = task.dag;
    const std::vector<CheckDistribution>& distributions = task.distributions;
    const std::vector<ir::BufferMap>& inputs = task.inputs;
    const std::vector<ir::BufferMap>& expected = task.expected;
    const std::vector<ir::BufferMap>& magnitudes = task.magnitudes;
    const std::vector<SampledOutput>& sampled = task.sampled;
    const ir::BufferMap& timing_inputs = task.timing_inputs;
    AlignedBytes* flush = task.flush.get();
    double* batch_best_ms = &task.batch_best_ms;
    const Clock::time_point start = Clock::now();
    // Compiling gets its own clock (run_timeout_ms as well), so that a slow JIT is not a run
    // timeout of the run that follows.
    BeginWorkerItemPhase("compile");
    MeasureResult r;
    codegen::HostCompileOptions compile;
    compile.num_threads = options.host_threads;
    absl::StatusOr<std::unique_ptr<codegen::HostKernel>> kernel =
        codegen::CompileForHost(nest, compile);
    if (!kernel.ok()) {
      r = Failure(MeasureError::kCompileError, kernel.status().ToString());
      r.compile_ms = compile_ms;
      return r;
    }
    r.compile_ms = compile_ms + (*kernel)->compile_ms();
    // The request's run timeout (longer for a held final timing: ApplyRequestContext).
    BeginWorkerItemPhase("run", options.run_timeout_ms);
    const Clock::time_point run_start = Clock::now();

    std::vector<double> check_run_ms;
    for (size_t t = 0; t < inputs.size(); ++t) {
      double run_ms = 0;
      absl::StatusOr<ir::BufferMap> got = RunOnInputs(**kernel, nest, dag, inputs[t], &run_ms);
      check_run_ms.push_back(run_ms);
      if (!got.ok()) {
        const bool bad_params = got.status().code() == absl::StatusCode::kInvalidArgument;
        r.error = bad_params ? MeasureError::kInvalidSchedule : MeasureError::kRuntimeError;
        r.message = got.status().ToString();
        return r;
      }
      for (const auto& [name, ref] : expected[t]) {
        auto it = got->find(name);
        if (it == got->end()) {
          r.error = MeasureError::kInvalidSchedule;
          r.message = absl::StrCat("candidate has no output parameter '", name, "'");
          return r;
        }
        // The screen with the cancellation allowance where M exists; its mismatches are re-judged
        // in float64 (up to the cap).
        Tolerance tolerance = ToleranceFor(ref.dtype, options.atol, options.rtol);
        auto m = magnitudes[t].find(name);
        const ir::HostBuffer* magnitude = m != magnitudes[t].end() ? &m->second : nullptr;
        if (magnitude != nullptr) {
          tolerance.allowance =
              kCancellationFactor *
              RuleFor(dag, dag.StageId(name), tolerance, options.precision).unit_roundoff;
        }
        CompareOutputWithArbitration(
            dag, dag.StageId(name), inputs[t], it->second, ref, tolerance,
            {options.arbitration_max_elements, options.arbitration_max_steps, options.precision},
            static_cast<int>(t), distributions[t], &r.check, magnitude);
      }
      if (t == 0) {
        for (const SampledOutput& so : sampled) {
          const ir::HostBuffer& g = got->at(so.name);
          RecordSampledError(
              so, [&](int64_t flat) { return g.data[flat]; }, &r.check);
        }
      }
      ++r.check.trials;
    }
    r.check_ms = MsSince(run_start);
    if (r.check.mismatches > 0) {
      r.error = MeasureError::kWrongAnswer;
      r.message =
          absl::StrCat(r.check.mismatches, " of ", r.check.checked_elements,
                       " output elements outside tolerance; first: ", r.check.first_mismatch);
      if (!r.check.arbitration.empty()) absl::StrAppend(&r.message, "; ", r.check.arbitration);
      r.run_wall_ms = MsSince(start);
      return r;
    }
    if (!inputs.empty() && options.precision == Fp32Precision::kIeee &&
        UsesMmaKind(nest, ir::MmaKind::kTF32x3)) {
      std::string verdict = Tf32x3Verdict(r.check);
      if (!verdict.empty()) {
        r.error = MeasureError::kWrongAnswer;
        r.message = std::move(verdict);
        r.run_wall_ms = MsSince(start);
        return r;
      }
    }

    // Staged timing: a clear loser by its check runs keeps them as its timing.
    const double screen = ScreenFor(options, *batch_best_ms);
    if (screen > 0 && !check_run_ms.empty()) {
      const double fastest = *std::min_element(check_run_ms.begin(), check_run_ms.end());
      if (fastest > kCheckRunScreenFactor * screen && fastest > kCheckRunScreenFloorMs) {
        r.screened = true;
        r.timing = runtime::Summarize(check_run_ms);
        for (double ms : r.timing.samples_ms) r.costs_s.push_back(ms / 1000);
        r.run_wall_ms = MsSince(start);
        return r;
      }
    }
    absl::StatusOr<std::vector<std::unique_ptr<AlignedBytes>>> buffers =
        PrepareBuffers(nest, timing_inputs, dag);
    if (!buffers.ok()) {
      r.error = MeasureError::kInvalidSchedule;
      r.message = buffers.status().ToString();
      return r;
    }
    const std::vector<void*> pointers = Pointers(*buffers);
    unsigned char fill = 0;
    auto run_once = [&]() -> absl::StatusOr<double> {
      if (flush != nullptr) std::memset(flush->data(), ++fill, flush->size());
      const Clock::time_point t0 = Clock::now();
      RETURN_IF_ERROR((*kernel)->Run(pointers));
      return MsSince(t0);
    };
    // Staged timing: a short timing first; a candidate slower than the screen keeps it.
    absl::StatusOr<TimingStats> stats =
        TimeRepeated(run_once, screen > 0 ? ScreenTiming() : options.timing);
    if (stats.ok() && screen > 0) {
      r.screened = stats->median_ms > screen;
      if (!r.screened) stats = TimeRepeated(run_once, options.timing);
    }
    if (stats.ok() && !r.screened && (*batch_best_ms == 0 || stats->median_ms < *batch_best_ms)) {
      *batch_best_ms = stats->median_ms;
    }
    if (!stats.ok()) {
      r.error = MeasureError::kRuntimeError;
      r.message = stats.status().ToString();
      return r;
    }
    r.timing = *std::move(stats);
    for (double ms : r.timing.samples_ms) r.costs_s.push_back(ms / 1000);
    r.run_wall_ms = MsSince(start);
    return r;
  }

  // The first rung of staged timing: one warm-up and three flushed runs.
  static runtime::TimingOptions ScreenTiming() {
    runtime::TimingOptions t;
    t.warmup_runs = 1;
    t.min_runs = 3;
    t.max_runs = 3;
    t.min_total_ms = 0;
    return t;
  }

  Target target_;
  MeasureOptions options_;
  TimingOverride timing_override_;  // SetTiming's
  uint64_t batches_ = 0;  // Run calls with candidates to run (the requests' batch numbers)
  RunUsage last_usage_;
  // Declared last, so its worker ends before the rest of the runner.
  std::unique_ptr<HostTask> task_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Runner>> CreateHostRunner(const Target& target,
                                                         const MeasureOptions& options) {
  if (target.kind != TargetKind::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrCat("the host measurer needs the cpu target, got '", target.ToString(), "'"));
  }
  RETURN_IF_ERROR(ValidateMeasureOptions(options));
  return std::unique_ptr<Runner>(new HostRunner(target, options));
}

}  // namespace tilesearch::measure
