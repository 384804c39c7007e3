// Tuning logs: JSON Lines files of MeasureRecords and, after each round's records, one RoundRecord
// metadata line (search/measure_record.h has both line formats and the rule for unknown fields and
// versions). A tuning job appends each batch of records as soon as the runner returns it and
// fsyncs, so a killed job loses at most the batch in flight; the reader skips corrupt, truncated
// and over-long lines with a warning naming the line, refuses lines of a newer format version,
// reads lines with unknown fields without them (one warning per field), counts a record measured
// twice (same workload key, target and steps) once, and filters out lines of other targets. Replay
// picks the best valid record per (workload key, target); `inspect` summarizes a log per workload
// (SummarizeLog, FormatSummary). After Ansor's RecordToFile / RecordReader (TVM
// src/auto_scheduler/measure_record.cc), which also skips unparsable lines.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/target.h"
#include "search/measure_record.h"

namespace tilesearch::search {

/// Appends records to a log file, one line each. Move-only; closes the file on destruction.
class LogWriter {
 public:
  /// Opens (creating it if absent, mode 0644) `path` for appending; an existing path that is not
  /// a regular file (directory, fifo, device, socket) is refused with kInvalidArgument "log 'x' is
  /// not a regular file (it is a fifo)". When the file is not empty and
  /// does not end in a newline (a writer killed mid-line), a newline is appended first so the
  /// partial line stays a line of its own (the reader skips it with a warning) and the next record
  /// starts a fresh line. Errors: the errno of open / read / write as a Status whose message
  /// names the path, e.g. kNotFound "cannot open log 'x/y.jsonl' for appending: No such file or
  /// directory", kPermissionDenied for EACCES; kFailedPrecondition "log 'x' is in use by another
  /// tuning job ..." while another LogWriter (any process) holds the log's exclusive flock, which
  /// every writer takes for its lifetime.
  static absl::StatusOr<LogWriter> Open(const std::string& path);

  LogWriter(LogWriter&& other) noexcept;
  LogWriter& operator=(LogWriter&& other) noexcept;
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;
  ~LogWriter();

  /// Writes one line per record (MeasureRecordToLine + '\n') and, when `round` is given, its
  /// round line (RoundRecordToLine) after them, with a single write, then fsyncs the file: when
  /// this returns OK the lines are on disk. Errors (write or fsync failure): a
  /// Status from errno naming the path, e.g. kResourceExhausted "cannot write log 'x.jsonl': No
  /// space left on device".
  absl::Status Append(const std::vector<MeasureRecord>& records,
                      const std::optional<RoundRecord>& round = std::nullopt);

  const std::string& path() const { return path_; }

 private:
  LogWriter(int fd, std::string path);
  int fd_ = -1;
  std::string path_;
};

/// The longest log line ReadLog reads, in bytes without the newline (16 MiB). Records are a few KB
/// (a round line of a 64-candidate round about 2 KB); a longer line is skipped with a warning
/// naming its line and length, without being held in memory.
inline constexpr int64_t kMaxLogLineBytes = int64_t{16} << 20;

/// Filters of ReadLog; they apply to records and round lines alike.
struct ReadOptions {
  /// Keep only lines of this target (same kind and arch, SameTarget); nullopt keeps all.
  std::optional<Target> target;
  /// Keep only lines of this workload key; empty keeps all.
  std::string workload_key;
  /// Check each kept record's workload key against its workload (op, shapes, dtype, attributes;
  /// a fused workload's nodes) rebuilt by this build (schedule::Workload::Build, once per distinct
  /// workload); a record whose key differs is skipped with a warning "<path>:<line>: skipped:
  /// workload key X does not match the record's workload <workload> (key Y)" and counted in
  /// inconsistent_records. Records whose workload this build cannot build are kept (nothing to
  /// compare with).
  bool verify_workload_keys = false;
  /// Add the summary warning about records dropped by the target filter (see LogContents); a
  /// caller that asked for one target sets this to false (the count stays in
  /// foreign_target_records).
  bool warn_other_targets = true;
  /// Keep every record measured more than once (same workload key, target kind and arch, and
  /// steps: a concatenation of logs, a job resumed twice at once). By default a schedule counts
  /// once (a trial counts once, and a cost model learns it once), in its first record's place and
  /// with its trial number, holding its newest measurement: a later record replaces the kept one
  /// when it SupersedesEarlierMeasurement (logs are appended to, so later is newer: after joining
  /// the logs of successive builds, the ranking follows what schedules run at now), and is
  /// dropped otherwise (a timeout, no device). Later records count in duplicate_records, or, when
  /// marked remeasured (MeasureRecord::remeasured, `tune --remeasure`), in remeasured_records or
  /// unused_remeasures (with one warning).
  bool keep_duplicates = false;
  /// Lines longer than this (bytes, without the newline) are skipped: kMaxLogLineBytes, or a
  /// smaller limit in tests.
  int64_t max_line_bytes = kMaxLogLineBytes;
};

/// A workload of a log and how many of its records a workload-key filter dropped.
struct LoggedWorkload {
  std::string workload_key;
  schedule::Workload workload;
  Target target;
  int64_t records = 0;
};

/// Whether a remeasured record may replace the earlier record of its schedule: it is valid, or
/// it failed for a reason in the schedule itself (invalid_schedule, compile_error, wrong_answer,
/// runtime_error: with this build the schedule no longer works). A compile or run timeout, no
/// device or an unknown error says nothing about the schedule (a busy or missing GPU) and must not
/// hide a valid record.
bool SupersedesEarlierMeasurement(const MeasureRecord& remeasured);

/// What ReadLog found.
struct LogContents {
  std::vector<MeasureRecord> records;  // in file order, after the filters
  std::vector<RoundRecord> rounds;     // round lines in file order, after the filters
  /// One per skipped line, "<path>:<line>: skipped: <reason>" (lines counted from 1); one per
  /// unknown field "<path>:<line>: ignored unknown field 'x' (in N lines; this build reads them
  /// without it)"; "<path>: counted N duplicate records once (...)" when any was dropped; and one
  /// summary "<path>: skipped N records of other targets (cuda -arch=sm_80: N, ...)" when the
  /// target filter dropped any.
  std::vector<std::string> warnings;
  int64_t lines = 0;               // lines in the file, blank ones included
  int64_t corrupt_lines = 0;       // lines skipped as unreadable (too long ones included)
  int64_t long_lines = 0;          // of which longer than ReadOptions::max_line_bytes
  int64_t duplicate_records = 0;   // kept-filter records dropped as measured before
  int64_t remeasured_records = 0;  // records that replaced an earlier one of their schedule
  int64_t unused_remeasures = 0;   // remeasured records dropped: they failed outside the schedule
  /// Unknown field name ("foo", "target.foo") → lines that had it (read without it).
  std::map<std::string, int64_t> unknown_fields;
  int64_t foreign_target_records = 0;  // readable records dropped by the target filter
  int64_t other_workload_records = 0;  // readable records dropped by the workload-key filter
  int64_t inconsistent_records = 0;    // records skipped by verify_workload_keys
  int64_t foreign_target_rounds = 0;   // readable round lines dropped by the target filter
  int64_t other_workload_rounds = 0;   // readable round lines dropped by the workload-key filter
  /// Skipped lines (counted in corrupt_lines) that look like round lines: JSON objects of kind
  /// "round", or non-JSON text containing "kind":"round" (a truncated round line). Whatever their
  /// target and workload key say (those may be the corrupt fields), so a resuming tuner numbers
  /// its next round past them (NextRoundNumber).
  int64_t corrupt_round_lines = 0;
  /// The largest positive integer "round" field among those skipped round lines (0 when none has
  /// one, e.g. all truncated).
  int64_t max_corrupt_round = 0;
  /// Skipped lines (counted in corrupt_lines) that may hold a record of the filters' workload and
  /// target: the line's text contains the workload key (or no key filter is set), or it was too
  /// long to look at. A replay that picks the best record should not trust its pick when any is
  /// (ApplyHistoryBest refuses).
  int64_t suspect_lines = 0;
  /// The line numbers of the first few suspect lines (at most 5).
  std::vector<int64_t> suspect_line_numbers;
  /// The (workload key, target) groups of the records the workload-key filter dropped, in order
  /// of first appearance (for "no record for workload KEY" messages: OtherWorkloadsText).
  std::vector<LoggedWorkload> other_workloads;
};

/// "the log holds records of 3 other workloads: softmax [64x128] float32 (key 1a2b..., cpu, 64
/// records); ...": at most `max` of contents.other_workloads, those of operator `op` first, then
/// by record count; "and N more" for the rest. Empty when there are none.
std::string OtherWorkloadsText(const LogContents& contents, const std::string& op = "",
                               size_t max = 5);

/// The round number a tuner resuming from `contents` (read with its task's target and workload
/// filters) gives its first new round: one past the largest of (a) the "round" of every kept round
/// line, (b) max_corrupt_round, and (c) when any round line was skipped as corrupt, the number of
/// round-like lines, kept + skipped (rounds.size() + corrupt_round_lines): a skipped line whose
/// number could not be read still had one of 1..that count. So a round number already in the log
/// is never reused (numbers may skip; the skipped lines may belong to other workloads); 1 for a
/// log without round lines.
int64_t NextRoundNumber(const LogContents& contents);

/// Reads the log at `path`, one line at a time (memory bounded by the kept records and
/// options.max_line_bytes). Blank lines are ignored; a line that is not JSON (a truncated last
/// line), not an object, of an unknown "kind" ("unknown line kind 'x'"), a record or round line
/// with a malformed field (wrong type, unknown error kind, bad step), or one longer than
/// options.max_line_bytes ("<path>:<line>: skipped: line is 209715200 bytes long, over the limit
/// of 16777216 bytes") is skipped with a warning. Unknown fields are ignored (unknown_fields, one
/// warning per field). Records measured twice count once (ReadOptions::keep_duplicates).
/// Errors: kNotFound "log 'x' does not exist"; kInvalidArgument "log 'x' is not a regular file (it
/// is a fifo)" for directories, fifos, devices and sockets (refused before reading: a fifo or
/// /dev/urandom would block or never end); other open / read failures from errno naming the
/// path; kFailedPrecondition "<path>:<line>: log format version 2 is newer than this build reads
/// (1)" for any line of a newer format (the whole read fails: an old build must not silently drop
/// a newer job's records); kInvalidArgument "'x' is not a tilesearch tuning log: line 1 is not a
/// record or round line (<reason>): \"<start of the line>\"" when the file has non-blank lines
/// but not one of them is a readable record or round line (before the filters) — a text file
/// given as --log by mistake; an empty file (or only blank lines) is an empty log.
absl::StatusOr<LogContents> ReadLog(const std::string& path, const ReadOptions& options = {});

/// The valid record (MeasureRecord::valid) of `workload_key` on `target` (SameTarget) with the
/// smallest median time; on a tie, the first in `records`. Where valid records were timed by a
/// final selection (MeasureRecord::final_timing), the records not so timed and no newer
/// (timestamp) than the newest of those do not compete: that selection ranked them already, and
/// a round's short burst is not comparable with a held timing. Errors (kNotFound):
/// "no record for workload <key> on <target>" (adding "; the log has its records on other
/// targets: 12 on cpu" when other targets have some), or when none is valid
/// "no valid record for workload <key> on cuda -arch=sm_90: all 64 trials failed:
/// 60 compile_error, 4 wrong_answer" (error kinds by count, most frequent first; a record with no
/// error but no usable time counts as "no_time").
absl::StatusOr<MeasureRecord> BestRecord(const std::vector<MeasureRecord>& records,
                                         const std::string& workload_key, const Target& target);

/// Below this arithmetic intensity (FLOPs per input + output byte) a workload counts as memory
/// bound: its throughput is reported in GB/s rather than GFLOP/s (softmax ≈ 1.25, a 512³ matmul
/// ≈ 85).
inline constexpr double kMemoryBoundFlopsPerByte = 4.0;

/// True when `flops` / `bytes` < kMemoryBoundFlopsPerByte (and bytes > 0).
bool IsMemoryBound(double flops, double bytes);

/// One point of a tuning curve.
struct CurvePoint {
  int64_t trials = 0;           // trials of this workload so far (a count, log order)
  int64_t trial = -1;           // MeasureRecord::trial of the point's record (0-based, as logged)
  double best_median_ms = 0;    // best valid median so far, ms; +inf before the first valid one
  double best_flops = 0;        // the same as FLOP/s (0 before the first valid one or when the
                                // workload cannot be built)
  double best_bytes_per_s = 0;  // the same as bytes/s: (input + output bytes) / median
};

/// Per (workload key, target) statistics of a log, for `tilesearch inspect`.
struct WorkloadSummary {
  std::string workload_key;
  schedule::Workload workload;  // from the first record of the key
  Target target;
  int64_t trials = 0;         // records
  int64_t valid = 0;          // records with a usable time
  int64_t screened = 0;       // valid records timed by their check runs only (staged timing)
  double best_median_ms = 0;  // +inf when none is valid
  double best_flops = 0;      // FLOP/s of the best (0 when none is valid or no DAG)
  int64_t best_trial = -1;    // MeasureRecord::trial of the best; -1 when none is valid
  /// The first record marked MeasureRecord::untuned: its trial (-1 when none) and median (+inf
  /// when it failed).
  int64_t untuned_trial = -1;
  double untuned_median_ms = 0;
  double flops = 0;             // FLOPs of one run of the workload (0 when it cannot be built)
  double bytes = 0;             // input + output bytes of the workload (0 when it cannot be built)
  double best_bytes_per_s = 0;  // bytes / best median (0 when none is valid or no DAG)
  /// IsMemoryBound(flops, bytes): throughput is shown in GB/s.
  bool memory_bound = false;
  /// The curve's trial count at which the best-so-far throughput first reached 90% of the final
  /// best (best median ≤ final best median / 0.9); -1 when none is valid.
  int64_t trials_to_90_percent = -1;
  std::map<std::string, int64_t> errors;  // error kind name ("compile_error", ...) → count
  std::vector<CurvePoint> curve;          // one point per trial, in log order
  std::vector<RoundRecord> rounds;        // the group's round lines, in log order
};

/// Groups records by (workload key, target) in order of first appearance and summarizes each;
/// round lines join the group of their key and target (rounds of a group without records are
/// dropped). FLOPs and bytes come from building each workload's DAG once
/// (schedule::Workload::Build); a workload that cannot be built gets flops and bytes 0 (medians
/// are still reported).
std::vector<WorkloadSummary> SummarizeLog(const std::vector<MeasureRecord>& records,
                                          const std::vector<RoundRecord>& rounds = {});

/// The summary's throughput of a median in its unit: GB/s when memory bound, else GFLOP/s (0 when
/// the median is not finite or the unit's amount is 0), and the unit's name.
double SummaryThroughput(const WorkloadSummary& summary, double median_ms);
const char* SummaryUnit(const WorkloadSummary& summary);

/// Text for `inspect`: per workload a header line (workload, key, target), trials, valid, best ms
/// and GFLOP/s (GB/s when memory bound) at its trial, the untuned program's median beside it when
/// the log has its record ("untuned 0.91 ms at trial 0" or "untuned failed at trial 0"), the trial
/// reaching 90% of the best, errors by kind, the tuning curve sampled at up to `curve_points` trial
/// counts (evenly spaced, the last trial included) as "  trial 63: best 0.412 ms (651.2 GFLOP/s)" —
/// trials named by the records' 0-based "trial" field, like the best trial and the round lines (the
/// header says so) — and one line per round line: "  round 2 (trials 64-127, xgboost trained on 64
/// samples, 37 boosting rounds): pairwise accuracy 0.712, top-8 recall 0.375".
std::string FormatSummary(const std::vector<WorkloadSummary>& summaries, int curve_points = 10);

}  // namespace tilesearch::search
