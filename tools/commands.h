// Subcommands of the tilesearch CLI. Each Add*Command registers its options on a CLI11 app and
// returns the action to run after parsing; actions print to stdout and report user errors as a
// Status (main prints "tilesearch: error: <message>" and exits 2). Actions that decide their own
// exit code (check: 1 on a mismatch) return it.
#pragma once

#include <functional>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tilesearch::tools {

using CommandAction = std::function<absl::Status()>;
/// An action that returns the process exit code when it ran (0 success, 1 a failed check).
using ExitCodeAction = std::function<absl::StatusOr<int>()>;

/// `tilesearch ops [NAME]`: the operator library as a table (name, summary, inputs, attributes
/// with defaults), or one operator in detail with attribute docs.
CommandAction AddOpsCommand(CLI::App& app);

/// `tilesearch show --op NAME --shape 1x64x56x56 [--shape ...] [--attr k=v ...] [--dtype T]`:
/// the ComputeDAG (stages, FLOPs, workload key) and its naive loop nest, simplified.
/// `tilesearch show --schedule FILE [--op ... --shape ... --attr ... --dtype ...] [--target T]`
/// (or --target without a file: the unscheduled workload for that target): the workload, the
/// ComputeDAG, the steps one per line, the lowered loop nest and the GPU launch configurations.
/// With `--emit mlir|llvm|ptx` (and --schedule, --op or --target as above): only the code codegen
/// generates for the lowered nest on stdout: the MLIR as emitted (before lowering), the LLVM IR
/// after optimization, or the PTX (cuda targets: codegen::CompileToPtx; cpu:
/// codegen::CompileForHost; `ptx` on the cpu target is an error). Compile errors are user errors
/// naming the file.
CommandAction AddShowCommand(CLI::App& app);

/// `tilesearch check --schedule FILE [overrides as show] [--seed N] [--rtol X] [--force]`: replays
/// and lowers the schedule, runs the lowered nest in the interpreter and the naive program
/// (ir::RunReference) on the same seeded random inputs (outputs of the scheduled run start as
/// NaN), and prints per output the max abs error and the max error relative to
/// max(1, |reference|), then OK or MISMATCH. Passes when every element is within
/// rtol · max(1, |reference|) (--rtol; by default float32 1e-5, float16 1e-2, bfloat16 4e-2,
/// integers and bool exact; NaN matches only NaN). Returns 0 on a match, 1 on a mismatch or when
/// the scheduled nest fails in the interpreter. Refuses workloads estimated above 2^28
/// interpreted operations (2 · (FLOPs + body evaluations) over both programs) unless --force.
ExitCodeAction AddCheckCommand(CLI::App& app);

/// `tilesearch measure --schedule FILE [overrides as show] [--target T] [--seed N] [--min-runs N]
/// [--min-time-ms X] [--warmup N] [--no-check] [--host-threads N] [--json FILE]`: lowers the
/// schedule, compiles it (cuda: codegen::CompileToPtx in this process), and measures it with
/// measure::CreateRunner: correctness check against the unscheduled program, then timing. Prints
/// the workload (FLOPs, bytes), target, compile ms (MLIR → code) and driver JIT ms, each GPU
/// kernel's launch configuration with registers/thread, static/dynamic shared and local bytes, the
/// check's trials and max abs/rel errors, the median time with p10/p90 and runs, and GFLOP/s (DAG
/// FLOPs / median) and GB/s (input + output bytes / median). --json writes
/// measure::MeasureResultToJson with the workload, target, launches and throughput. Returns 0 when
/// measured, 1 when the candidate failed (compile_error, wrong_answer, runtime_error, run_timeout,
/// ...: "FAILED: <kind>: <message>"); user errors (bad options, unlowerable schedule, "no CUDA
/// driver found: ...") are a Status.
ExitCodeAction AddMeasureCommand(CLI::App& app);

/// `tilesearch bench-compile [--size N] [--candidates N] [--workers W] [--seed S] [--arch sm_XX]
/// [--jit] [--json FILE]`: lowers up to N distinct tilings of an n³ float32 GPU matmul (threads per
/// block, register tile, k tile), compiles them with codegen::CompileManyToPtx on W workers and
/// prints the distribution of per-candidate MLIR → PTX ms (by phase) and the throughput
/// (candidates / s of wall time); --jit also loads each PTX with the CUDA driver through the cuda
/// measurer (one unchecked run each) and prints the driver JIT ms distribution.
CommandAction AddBenchCompileCommand(CLI::App& app);

/// `tilesearch tune --op NAME --shape ... [--dtype T] [--attr k=v] [--target auto|cpu|cuda
/// [-arch=sm_XX]] --trials N [--per-round 64] --log FILE [--seed S] [--model xgboost|random]
/// [--population N] [--generations N] [--early-stopping N] [--min-runs N] [--min-time-ms X]
/// [--warmup N] [--host-threads N] [--run-timeout-ms X] [--quiet]`: search::Tune (evolutionary
/// search + cost model + measurement, resuming from the log; the target via ScheduleFromOptions /
/// ResolveTargetOption: default cpu, auto = cuda when a device answers, else cpu), a progress line
/// per round on stderr (GFLOP/s, or GB/s for memory-bound workloads, and the model's held-out
/// pairwise accuracy), then the trials, errors by kind, the model's pairwise accuracy per round and
/// the best record (median ms, GFLOP/s, GB/s, steps). --early-stopping N stops after N trials in a
/// row without a better median (0 = off). --host-threads N runs the cpu target's parallel loops on
/// N threads (and sizes the search's parallel loops for N cores). Returns 0 with a valid best
/// record, 1 when none is valid, 130 after Ctrl-C (the first SIGINT finishes and logs the round in
/// flight, then the summary is printed; a second one ends the process at once, killed by SIGINT,
/// see search::Tune). A --log that exists but is not a regular file or not a tuning log (no line of
/// it is a record or round line) is a user error naming the file and its first bad line.
ExitCodeAction AddTuneCommand(CLI::App& app);

/// `tilesearch replay --log FILE (--op NAME --shape ... [--attr k=v] [--dtype T] | --workload-key
/// KEY) [--target auto|cpu|cuda[ -arch=sm_XX]] --out DIR [--name NAME] [--no-check]`: picks the
/// best valid record of the workload on the target (default: the one target the log holds the
/// workload's records for) with search::ApplyHistoryBest, rebuilds it (search::BuildKernel:
/// re-lowered; cuda PTX + cubin when ptxas is found; cpu object file), re-checks it against the
/// unscheduled program on fresh random inputs (search::CheckKernel; cuda without a driver: "not
/// re-checked"), and writes <name>.ptx/.cubin or <name>.o, <name>.h and <name>.json into DIR.
/// Prints the workload, target, the record (trial, median ms, GFLOP/s, steps), the kernels or the
/// entry, notes, the re-check result and each file written. --name must pass
/// search::ValidateArtifactName (no C/C++ keyword, no leading '_' or "__") and --out
/// search::ValidateArtifactDir, both checked before the log is read; the files are written under
/// temporary names and renamed into place, so all of them appear or none. Records whose workload
/// key does not match their workload are warned about with their line and skipped. Returns 0
/// when written, 1 when the re-check failed (nothing written); user errors (missing log, a log
/// that is not a regular file or not a tuning log, no valid record: "all 64 trials failed: ...",
/// unknown target, bad workload, bad --name / --out) are a Status.
ExitCodeAction AddReplayCommand(CLI::App& app);

/// `tilesearch inspect --log FILE [--log FILE ...] [--op NAME --shape ... [--attr] [--dtype] |
/// --schedule FILE | --workload-key K] [--target T] [--curve-points N] [--plot curve.svg]
/// [--json FILE]`: per log and per (workload, target) of it (search::SummarizeLog, FormatSummary):
/// trials, valid, best median with GFLOP/s (GB/s when memory bound) and its trial, errors by kind,
/// the trial at which 90% of the final best throughput was first reached, the tuning curve at up
/// to N trial counts, and the cost model's held-out quality per round (pairwise accuracy, top-k
/// recall, training samples and boosting rounds) from the log's round lines. --plot writes an SVG
/// (search::CurveSvg) of best-so-far throughput vs trials, one curve per workload, or per log and
/// workload when several logs are given (legend: file name). --json writes the summaries. Curve
/// lines and the best trial name trials by the records' 0-based "trial" field. Skipped corrupt
/// lines and records whose workload key does not match their workload are warnings on stderr
/// naming the line; with --target, records of other targets are only counted on the "log:" line.
/// Returns 0; user errors (a missing log, one that is not a regular file or not a tuning log, a
/// filter matching nothing, an unwritable output) are a Status (exit 2).
ExitCodeAction AddInspectCommand(CLI::App& app);

/// `tilesearch tune-graph --model bert_layer|resnet_block|swiglu_mlp [--batch N] [--small]
/// [--no-fuse] [--target auto|cpu|cuda] --trials N [--per-round 64] --log FILE [--seed S]
/// [--round-robin] [--cost-model xgboost|random] [--population N] [--generations N]
/// [--per-task-early-stopping N] [--skip-untunable] [--min-runs N] [--min-time-ms X] [--warmup N]
/// [--host-threads N] [--json FILE] [--quiet]`: builds the model
/// (examples/models.h), partitions it (search::PartitionGraph; --no-fuse: one task per operator),
/// prints the tasks with their weights, FLOPs and workload keys, and runs the task scheduler
/// (gradient, or --round-robin) with the tuner on one log for --trials trials of this run
/// (resumed: the log's records are restored, not counted). Then prints the scheduler's per-task
/// allocation (trials, rounds, best latency, weighted latency, state) and the task of each round.
/// Tasks the tuner cannot tune (search::TaskWorkload) are an error listing them, or with
/// --skip-untunable are listed and left out. Returns 0 when every task has a valid schedule, 1
/// when a task is dead or has none, 130 after Ctrl-C. --json writes the allocation (per task:
/// partition index, name, weight, FLOPs, workload key, trials, restored trials, rounds, best ms,
/// state; per round: task, trials, total trials, objective ms, warm-up, random) and the untunable
/// tasks; it must not be the log.
ExitCodeAction AddTuneGraphCommand(CLI::App& app);

/// `tilesearch run-graph --model ... [--batch N] [--small] [--no-fuse] --log FILE [--target T]
/// [--allow-untuned] [--check auto|interpreter|unscheduled|none] [--seed S] [--min-runs N]
/// [--min-time-ms X] [--warmup N] [--no-flush] [--host-threads N] [--json FILE]`: builds and
/// partitions the model as tune-graph does, loads the best valid record of every task from the
/// log (search::GraphExecutor; --allow-untuned runs tasks without one unscheduled), checks the
/// graph outputs on random inputs against the reference (auto: the interpreter up to 2e8 FLOPs,
/// else the unscheduled kernels on the target), and prints the end-to-end latency (median of whole
/// executions, p10 / p90) and per task: weight, kernel (trial), logged median, measured ms per
/// call, ms per execution and share. Returns 0, or 1 when the check failed; a missing log or
/// record is a user error naming the task and its workload key. --json writes the check (reference,
/// passed, errors), end_to_end (median / p10 / p90 ms, runs), sum_of_tasks_ms and per task the
/// name, key, weight, FLOPs, tuned, trial, logged_ms, ms_per_call, ms_per_execution, share.
ExitCodeAction AddRunGraphCommand(CLI::App& app);

/// `tilesearch bench --suite FILE [--suite FILE ...] [--problems a,b] [--skip-small] [--target
/// auto|cpu|cuda] --trials N [--per-round 64] [--model xgboost|random] [--seed S] --log-dir DIR
/// --out DIR [--time-limit-s X] [--population N] [--generations N] [--min-runs N] [--min-time-ms
/// X] [--warmup N] [--host-threads N] [--no-check] [--json FILE] [--quiet]`: for every selected
/// problem of the suites (tools/suite.h; --problems picks a subset, --skip-small leaves
/// out those tagged "small"): builds its workload, tunes it with search::Tune into
/// DIR/<problem>.jsonl until the log holds N trials of it (resumed; with --time-limit-s, one round
/// per Tune call and no new round once the problem has run that long), replays the best valid
/// record (search::ApplyHistoryBest, BuildKernel, CheckKernel unless --no-check) and writes the
/// artifacts named after the problem into --out (search::WriteArtifacts). A problem's failure
/// (unbuildable workload, tuning error, no valid record: "all 64 trials failed: ...", failed
/// re-check) is reported for it and the others still run. Prints one line per problem and a final
/// table;
/// --json writes a summary (per problem: status, trials, new trials, best ms, GFLOP/s, GB/s, log,
/// artifact or the reason there is none), rewritten after each problem. Ctrl-C: the round in
/// flight is finished and logged, then the run stops (a second one ends it at once). Returns 0
/// when every problem got its artifacts, 1 when any failed, 130 after Ctrl-C; user errors (a
/// missing or invalid suite file, an unknown name in --problems, a problem name in two suites,
/// a --log-dir or --out that cannot be a writable directory, an unwritable --json) are a Status
/// reported before anything is tuned.
ExitCodeAction AddBenchCommand(CLI::App& app);

/// `tilesearch predict --op NAME --shape ... [--attr ...] [--dtype T] [--target T] [--log FILE ...]
/// [--model FILE] [--nearest N] [--records N] [--fresh-samples N] [--seed S] [--schedule-out FILE]
/// [--out DIR] [--name NAME] [--no-check]`: a schedule for a workload without measuring
/// (search::PredictSchedule over the logs' records and fresh samples, ranked by the model), printed
/// step by step, rebuilt (search::BuildKernel) and checked against the unscheduled program
/// (search::CheckKernel; "not re-checked" without a CUDA driver), written as a schedule file and /
/// or artifacts. Returns 1 when the check fails; user errors (no --log and no --model, a bad
/// workload, an unreadable log or model, nothing to transfer without a model) are a Status.
ExitCodeAction AddPredictCommand(CLI::App& app);

/// `tilesearch export-dispatch --op NAME --shape ... --log FILE --values 1,8,64 --out DIR --name N
/// [--input I] [--dim D] [--model FILE] [--target T]`: one kernel per bucket of a family of shapes
/// whose input I dimension D takes each of --values (its best record in the log, or a schedule
/// predicted without measuring: search ApplyHistoryBestOrPredict), each rebuilt and checked, then
/// written as artifacts <name>_<extent> with a dispatch header <name>.h (the bucket extents and
/// `int <name>_bucket(int64_t extent)`: the smallest bucket extent at least `extent`) and a JSON
/// manifest (each bucket's source and check). Nothing is written when a check fails (returns 1).
/// Refused: a dimension some stage reduces over (padding would change every result). Records of
/// the ieee precision only.
ExitCodeAction AddExportDispatchCommand(CLI::App& app);

/// `tilesearch train-model --logs DIR|FILE... --out MODEL [--target T] [--objective
/// regression|rank] [--max-records-per-task N] [--max-rounds N] [--max-depth N] [--threads N]
/// [--seed S]
/// [--commit C] [--quiet]`: reads the records of every workload of one target from the logs
/// (search::LoadTrainingData: directories give their *.jsonl files; each schedule replayed,
/// lowered and featurized; the first N distinct records per workload), trains an XGBoostModel on
/// all of them (labels normalized per workload) and saves it with its target and provenance (logs,
/// counts, date, objective, --commit). Prints the counts and the model line. User errors: no or
/// several targets in the logs without --target, unreadable logs, bad options, nothing to learn.
CommandAction AddTrainModelCommand(CLI::App& app);

/// `tilesearch eval-model --logs DIR|FILE... [--target T] [--objective regression|rank]
/// [--online-records N ...] [--min-eval-records N] [--holdout TEXT ...]
/// [--summary-holdout TEXT ...] [--max-records-per-task N] [--max-rounds N] [--max-depth N]
/// [--threads N] [--seed S] [--pretrained-cache DIR] [--warm-depth N] [--warm-eta X]
/// [--warm-rounds N] [--warm-folds N] [--warm-prior-records X] [--warm-clip 0|1]
/// [--warm-band 0|1] [--warm-min-gain X] [--warm-objective initial|rank|regression]
/// [--out FILE.md]`:
/// leave-one-workload-out evaluation. For each
/// workload with at least N + min-eval-records records, its first N records (log order) are the
/// "online" records and the rest, valid ones only, the evaluation set; four models score the
/// evaluation set: pretrained (trained on every other workload, none of this one), online-only
/// (trained on the first N records of this workload only: what `tune` has after its first round),
/// pretrained + online (warm start: the pretrained model boosted on the first N records, with the
/// options of `tune --model-init`'s model, costmodel::OnlineModelOptions, and --warm-* for its
/// added trees) and random. Per workload and model: Spearman correlation with the
/// measured throughput, top-1 and top-5 recall, and the measured time of the model's top pick over
/// the best time of the evaluation set; then the medians over workloads. --holdout limits the
/// held-out workloads to those whose name contains one of the texts (each fold trains a model
/// on all other workloads, so every fold costs one full training; --pretrained-cache keeps those
/// models for later runs). One table per --online-records count; --summary-holdout adds medians
/// over the evaluated workloads whose name contains one of its texts. --out writes the tables
/// as Markdown with the command line and date. User errors as train-model's.
CommandAction AddEvalModelCommand(CLI::App& app);

}  // namespace tilesearch::tools
