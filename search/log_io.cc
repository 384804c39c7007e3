// Tuning logs: appending writer with fsync, tolerant reader, best-record selection and summaries.
#include "search/log_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace tilesearch::search {
namespace {

absl::Status ErrnoError(int err, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat(what, ": ", std::strerror(err)));
}

// Writes all of `data` to `fd`, retrying short writes and EINTR. Returns 0 or the errno.
int WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

// Kinds of failure of a set of records, most frequent first (ties in name order):
// "60 compile_error, 4 wrong_answer".
std::string ErrorCounts(const std::map<std::string, int64_t>& counts) {
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> parts;
  for (const auto& [name, n] : sorted) parts.push_back(absl::StrCat(n, " ", name));
  return absl::StrJoin(parts, ", ");
}

// The error kind a non-valid record counts under.
std::string FailureKind(const MeasureRecord& r) {
  if (!r.result.ok()) return runtime::MeasureErrorName(r.result.error);
  return "no_time";
}

}  // namespace

absl::StatusOr<LogWriter> LogWriter::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return ErrnoError(errno, absl::StrCat("cannot open log '", path, "' for appending"));
  }
  LogWriter writer(fd, path);
  // A killed writer may have left a partial last line: end it so the next record starts fresh.
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < 0) return ErrnoError(errno, absl::StrCat("cannot seek in log '", path, "'"));
  if (size > 0) {
    char last = '\n';
    ssize_t n;
    do {
      n = ::pread(fd, &last, 1, size - 1);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return ErrnoError(errno, absl::StrCat("cannot read log '", path, "'"));
    if (last != '\n') {
      if (int err = WriteAll(fd, "\n", 1); err != 0) {
        return ErrnoError(err, absl::StrCat("cannot write log '", path, "'"));
      }
      if (::fsync(fd) != 0) return ErrnoError(errno, absl::StrCat("cannot sync log '", path, "'"));
    }
  }
  return writer;
}

LogWriter::LogWriter(LogWriter&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

LogWriter& LogWriter::operator=(LogWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

LogWriter::~LogWriter() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status LogWriter::Append(const std::vector<MeasureRecord>& records) {
  CHECK(fd_ >= 0) << "LogWriter used after move";
  std::string text;
  for (const MeasureRecord& r : records) {
    absl::StrAppend(&text, MeasureRecordToLine(r), "\n");
  }
  if (int err = WriteAll(fd_, text.data(), text.size()); err != 0) {
    return ErrnoError(err, absl::StrCat("cannot write log '", path_, "'"));
  }
  if (::fsync(fd_) != 0) return ErrnoError(errno, absl::StrCat("cannot sync log '", path_, "'"));
  return absl::OkStatus();
}

absl::StatusOr<LogContents> ReadLog(const std::string& path, const ReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("log '", path, "' does not exist"));
    }
    return ErrnoError(err != 0 ? err : EIO, absl::StrCat("cannot read log '", path, "'"));
  }
  LogContents out;
  std::map<std::string, int64_t> foreign;  // target text → records dropped
  std::string line;
  while (std::getline(in, line)) {
    ++out.lines;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    absl::StatusOr<MeasureRecord> record = MeasureRecordFromLine(line);
    if (!record.ok()) {
      if (record.status().code() == absl::StatusCode::kFailedPrecondition) {
        return absl::FailedPreconditionError(
            absl::StrCat(path, ":", out.lines, ": ", record.status().message()));
      }
      ++out.corrupt_lines;
      out.warnings.push_back(
          absl::StrCat(path, ":", out.lines, ": skipped: ", record.status().message()));
      continue;
    }
    if (options.target.has_value() && !SameTarget(record->target, *options.target)) {
      ++out.foreign_target_records;
      ++foreign[record->target.ToString()];
      continue;
    }
    if (!options.workload_key.empty() && record->workload_key != options.workload_key) {
      ++out.other_workload_records;
      continue;
    }
    out.records.push_back(*std::move(record));
  }
  if (in.bad())
    return ErrnoError(errno != 0 ? errno : EIO, absl::StrCat("cannot read log '", path, "'"));
  if (out.foreign_target_records > 0) {
    std::vector<std::string> parts;
    for (const auto& [target, n] : foreign) parts.push_back(absl::StrCat(target, ": ", n));
    out.warnings.push_back(absl::StrCat(path, ": skipped ", out.foreign_target_records,
                                        " records of other targets (", absl::StrJoin(parts, ", "),
                                        ")"));
  }
  return out;
}

absl::StatusOr<MeasureRecord> BestRecord(const std::vector<MeasureRecord>& records,
                                         const std::string& workload_key,
                                         const schedule::Target& target) {
  const MeasureRecord* best = nullptr;
  int64_t matching = 0;
  std::map<std::string, int64_t> failures;
  std::map<std::string, int64_t> elsewhere;  // same key on other targets
  for (const MeasureRecord& r : records) {
    if (r.workload_key != workload_key) continue;
    if (!SameTarget(r.target, target)) {
      ++elsewhere[r.target.ToString()];
      continue;
    }
    ++matching;
    if (!r.valid()) {
      ++failures[FailureKind(r)];
      continue;
    }
    if (best == nullptr || r.median_ms() < best->median_ms()) best = &r;
  }
  if (best != nullptr) return *best;
  const std::string what = absl::StrCat("for workload ", workload_key, " on ", target.ToString());
  if (matching == 0) {
    std::string msg = absl::StrCat("no record ", what);
    if (!elsewhere.empty()) {
      std::vector<std::string> parts;
      for (const auto& [t, n] : elsewhere) parts.push_back(absl::StrCat(n, " on ", t));
      absl::StrAppend(&msg,
                      "; the log has its records on other targets: ", absl::StrJoin(parts, ", "));
    }
    return absl::NotFoundError(msg);
  }
  return absl::NotFoundError(absl::StrCat("no valid record ", what, ": all ", matching,
                                          " trials failed: ", ErrorCounts(failures)));
}

std::vector<WorkloadSummary> SummarizeLog(const std::vector<MeasureRecord>& records) {
  std::vector<WorkloadSummary> out;
  std::map<std::pair<std::string, std::string>, size_t> index;  // (key, target) → position
  for (const MeasureRecord& r : records) {
    const auto group = std::make_pair(r.workload_key, r.target.ToString());
    auto it = index.find(group);
    if (it == index.end()) {
      WorkloadSummary s;
      s.workload_key = r.workload_key;
      s.workload = r.workload;
      s.target = r.target;
      s.best_median_ms = std::numeric_limits<double>::infinity();
      absl::StatusOr<ir::ComputeDAG> dag = r.workload.Build();
      if (dag.ok()) s.flops = dag->Flops();
      it = index.emplace(group, out.size()).first;
      out.push_back(std::move(s));
    }
    WorkloadSummary& s = out[it->second];
    ++s.trials;
    if (r.valid()) {
      ++s.valid;
      if (r.median_ms() < s.best_median_ms) {
        s.best_median_ms = r.median_ms();
        s.best_trial = r.trial;
        s.best_flops = s.flops > 0 ? s.flops / (s.best_median_ms * 1e-3) : 0;
      }
    } else {
      ++s.errors[FailureKind(r)];
    }
    s.curve.push_back({s.trials, s.best_median_ms, s.best_flops});
  }
  return out;
}

std::string FormatSummary(const std::vector<WorkloadSummary>& summaries, int curve_points) {
  std::string out;
  for (const WorkloadSummary& s : summaries) {
    absl::StrAppend(&out, s.workload.ToString(), "  [key ", s.workload_key, ", ",
                    s.target.ToString(), "]\n");
    absl::StrAppend(&out, "  trials ", s.trials, ", valid ", s.valid);
    if (s.valid > 0) {
      absl::StrAppend(&out, absl::StrFormat(", best %.4g ms", s.best_median_ms));
      if (s.best_flops > 0)
        absl::StrAppend(&out, absl::StrFormat(" (%.4g GFLOP/s)", s.best_flops * 1e-9));
      absl::StrAppend(&out, " at trial ", s.best_trial);
    }
    absl::StrAppend(&out, "\n");
    if (!s.errors.empty()) absl::StrAppend(&out, "  errors: ", ErrorCounts(s.errors), "\n");
    const int64_t n = static_cast<int64_t>(s.curve.size());
    const int64_t points = std::min<int64_t>(n, std::max(curve_points, 1));
    int64_t last_shown = 0;
    for (int64_t p = 1; p <= points; ++p) {
      const int64_t t = (n * p + points - 1) / points;  // ceil(n·p / points): ends at n
      if (t == last_shown) continue;
      last_shown = t;
      const CurvePoint& c = s.curve[t - 1];
      absl::StrAppend(&out, "  trial ", c.trials, ": ");
      if (std::isinf(c.best_median_ms)) {
        absl::StrAppend(&out, "no valid result yet\n");
      } else if (c.best_flops > 0) {
        absl::StrAppend(&out, absl::StrFormat("best %.4g ms (%.4g GFLOP/s)\n", c.best_median_ms,
                                              c.best_flops * 1e-9));
      } else {
        absl::StrAppend(&out, absl::StrFormat("best %.4g ms\n", c.best_median_ms));
      }
    }
  }
  return out;
}

}  // namespace tilesearch::search
