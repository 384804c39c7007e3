// Tuning logs: appending writer with fsync, tolerant reader, best-record selection and summaries.
#include "search/log_io.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <regex>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/compute_dag.h"
#include "nlohmann/json.hpp"
#include "schedule/schedule_file.h"

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
  if (!r.result.ok()) return measure::MeasureErrorName(r.result.error);
  return "no_time";
}

// "a directory", "a fifo", ... for a file mode that is not a regular file.
const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a fifo";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

absl::Status NotRegular(const std::string& path, mode_t mode) {
  return absl::InvalidArgumentError(absl::StrCat("log '", path, "' is not a regular file (it is ",
                                                 FileKind(mode), "); give a log file"));
}

// The start of a line for a message: at most 60 characters, control characters as '?'.
std::string Excerpt(const std::string& line) {
  std::string out;
  for (char c : line.substr(0, 60)) {
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  if (line.size() > 60) out += "...";
  return out;
}

// Owns a file descriptor.
struct ScopedFd {
  int fd = -1;
  ~ScopedFd() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens the regular file at `path` for reading (without blocking, so a fifo is refused rather
// than waited on) into `out`.
absl::Status OpenRegularFile(const std::string& path, ScopedFd* out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return absl::NotFoundError(absl::StrCat("log '", path, "' does not exist"));
    return ErrnoError(errno, absl::StrCat("cannot read log '", path, "'"));
  }
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  out->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (out->fd < 0) return ErrnoError(errno, absl::StrCat("cannot read log '", path, "'"));
  if (::fstat(out->fd, &st) != 0) {
    return ErrnoError(errno, absl::StrCat("cannot read log '", path, "'"));
  }
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);  // replaced since the stat
  return absl::OkStatus();
}

// Reads a file one line at a time, holding at most `max_line` bytes of a line: the bytes of a
// longer line are read past and only counted.
class LineReader {
 public:
  LineReader(int fd, int64_t max_line) : fd_(fd), max_line_(max_line), buffer_(1 << 16) {}

  // The next line without its '\n' in `line` and its full length in `length` (`line` is empty
  // when the length is over the limit); false at the end of the file. Errors: read's errno.
  absl::StatusOr<bool> Next(std::string* line, int64_t* length) {
    line->clear();
    *length = 0;
    bool any = false;
    while (true) {
      if (pos_ == end_) {
        if (eof_) return any;
        const ssize_t n = ::read(fd_, buffer_.data(), buffer_.size());
        if (n < 0) {
          if (errno == EINTR) continue;
          return absl::ErrnoToStatus(errno, "read");
        }
        if (n == 0) {
          eof_ = true;
          continue;
        }
        pos_ = 0;
        end_ = static_cast<size_t>(n);
      }
      any = true;
      const char* start = buffer_.data() + pos_;
      const char* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - pos_));
      const size_t chunk = newline != nullptr ? static_cast<size_t>(newline - start) : end_ - pos_;
      *length += static_cast<int64_t>(chunk);
      if (*length <= max_line_) {
        line->append(start, chunk);
      } else {
        line->clear();
        line->shrink_to_fit();
      }
      pos_ += chunk;
      if (newline != nullptr) {
        ++pos_;
        return true;
      }
    }
  }

 private:
  int fd_;
  int64_t max_line_;
  std::vector<char> buffer_;
  size_t pos_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
};

// The descriptors of the open LogWriters, plus one (0: a free slot), for CloseWritersInChild.
constexpr int kMaxWriters = 64;
std::atomic<int> g_writer_fds[kMaxWriters];

// pthread_atfork child handler: a forked child (a measurement or compile worker: fork without
// exec) closes its copies of the writers' descriptors, so that the log's flock, which belongs to
// the open file description, dies with the tuning job and not only with its last worker (a job
// killed with -9 and restarted at once found its log "in use" while a worker still lived).
void CloseWritersInChild() {
  for (std::atomic<int>& slot : g_writer_fds) {
    const int v = slot.load(std::memory_order_relaxed);
    if (v > 0) ::close(v - 1);
  }
}

void RegisterWriterFd(int fd) {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(nullptr, nullptr, CloseWritersInChild); });
  for (std::atomic<int>& slot : g_writer_fds) {
    int expected = 0;
    if (slot.compare_exchange_strong(expected, fd + 1)) return;
  }
  // More than kMaxWriters writers at once: this one's workers keep the lock until they exit.
}

void UnregisterWriterFd(int fd) {
  for (std::atomic<int>& slot : g_writer_fds) {
    int expected = fd + 1;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

}  // namespace

LogWriter::LogWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
  RegisterWriterFd(fd_);
}

absl::StatusOr<LogWriter> LogWriter::Open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  const int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) {
    return ErrnoError(errno, absl::StrCat("cannot open log '", path, "' for appending"));
  }
  LogWriter writer(fd, path);
  if (::fstat(fd, &st) != 0) return ErrnoError(errno, absl::StrCat("cannot open log '", path, "'"));
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);  // replaced since the stat
  // O_NONBLOCK only kept the open from waiting on a fifo; a regular file's writes are blocking.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  // One writer per log: a second tuning job appending to the same log would interleave rounds and
  // measure states twice. The lock goes with the fd (released on close, also when killed).
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("log '", path,
                       "' is in use by another tuning job (it holds the log's lock); wait for "
                       "it to finish or give another --log"));
    }
    return ErrnoError(errno, absl::StrCat("cannot lock log '", path, "'"));
  }
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
    if (fd_ >= 0) {
      UnregisterWriterFd(fd_);
      ::close(fd_);
    }
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

LogWriter::~LogWriter() {
  if (fd_ >= 0) {
    UnregisterWriterFd(fd_);
    ::close(fd_);
  }
}

absl::Status LogWriter::Append(const std::vector<MeasureRecord>& records,
                               const std::optional<RoundRecord>& round) {
  CHECK(fd_ >= 0) << "LogWriter used after move";
  std::string text;
  for (const MeasureRecord& r : records) {
    absl::StrAppend(&text, MeasureRecordToLine(r), "\n");
  }
  if (round.has_value()) absl::StrAppend(&text, RoundRecordToLine(*round), "\n");
  if (text.empty()) return absl::OkStatus();
  if (int err = WriteAll(fd_, text.data(), text.size()); err != 0) {
    return ErrnoError(err, absl::StrCat("cannot write log '", path_, "'"));
  }
  if (::fsync(fd_) != 0) return ErrnoError(errno, absl::StrCat("cannot sync log '", path_, "'"));
  return absl::OkStatus();
}

namespace {
// "kind":"round" in the text of a line that is not JSON (spaces allowed around the colon).
const std::regex& RoundKindPattern() {
  static const std::regex* pattern = new std::regex(R"re("kind"\s*:\s*"round")re");
  return *pattern;
}
}  // namespace

int64_t NextRoundNumber(const LogContents& contents) {
  int64_t last = contents.max_corrupt_round;
  for (const RoundRecord& r : contents.rounds) last = std::max(last, r.round);
  if (contents.corrupt_round_lines > 0) {
    last =
        std::max(last, static_cast<int64_t>(contents.rounds.size()) + contents.corrupt_round_lines);
  }
  return last + 1;
}

namespace {

// ReadLog's state over the lines of one log.
class LogParser {
 public:
  LogParser(const std::string& path, const ReadOptions& options) : path_(path), options_(options) {}

  // Reads one line (numbered out.lines, already counted). Errors: a newer format version.
  absl::Status Line(const std::string& line) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) return absl::OkStatus();
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      RETURN_IF_ERROR(
          Skip(line, absl::InvalidArgumentError(absl::StrCat("not valid JSON: ", e.what()))));
      if (std::regex_search(line, RoundKindPattern())) ++out_.corrupt_round_lines;
      return absl::OkStatus();
    }
    const std::string kind = LogLineKind(j);
    if (kind == "round") return RoundLine(line, j);
    if (j.is_object() && kind != "record") {
      // The version first: a newer format may add kinds of lines.
      absl::StatusOr<RoundRecord> version_check = RoundRecordFromJson(j);
      if (!version_check.ok() &&
          version_check.status().code() == absl::StatusCode::kFailedPrecondition) {
        RETURN_IF_ERROR(Skip(line, version_check.status()));
      }
      return Skip(line, absl::InvalidArgumentError(
                            absl::StrCat("unknown line kind ", schedule::ShortJson(j.at("kind")),
                                         " (expected \"record\" or \"round\")")));
    }
    return RecordLine(line, j);
  }

  // A line over the length limit, read past without holding it.
  void LongLine(int64_t length) {
    ++out_.corrupt_lines;
    ++out_.long_lines;
    Suspect();
    out_.warnings.push_back(absl::StrCat(path_, ":", out_.lines, ": skipped: line is ", length,
                                         " bytes long, over the limit of ", options_.max_line_bytes,
                                         " bytes"));
    if (first_bad_.empty()) {
      first_bad_ = absl::StrCat("line ", out_.lines, " is ", length, " bytes long");
    }
  }

  LogContents& out() { return out_; }

  // The end of the file: the summary warnings, or the error for a file that is no log.
  absl::StatusOr<LogContents> Finish() {
    if (readable_ == 0 && !first_bad_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path_, "' is not a tilesearch tuning log: ", first_bad_,
          "; give a log written by `tilesearch tune`, a new file name, or an empty file"));
    }
    for (const auto& [field, n] : out_.unknown_fields) {
      out_.warnings.push_back(absl::StrCat(
          path_, ":", first_unknown_line_[field], ": ignored unknown field '", field, "' (in ", n,
          n == 1 ? " line" : " lines", "; written by a newer tilesearch? this build reads ",
          n == 1 ? "it" : "them", " without the field)"));
    }
    if (out_.duplicate_records > 0) {
      out_.warnings.push_back(absl::StrCat(
          path_, ": counted ", out_.duplicate_records,
          " duplicate records once (the same workload, target and steps as an earlier record; "
          "first at line ",
          first_duplicate_line_, ")"));
    }
    if (out_.unused_remeasures > 0) {
      out_.warnings.push_back(absl::StrCat(
          path_, ": ", out_.unused_remeasures,
          " re-measurements failed for reasons outside their schedules (timeouts, no device) and "
          "were not used; the earlier records of those schedules stand"));
    }
    if (out_.foreign_target_records > 0 && options_.warn_other_targets) {
      std::vector<std::string> parts;
      for (const auto& [target, n] : foreign_) parts.push_back(absl::StrCat(target, ": ", n));
      out_.warnings.push_back(absl::StrCat(path_, ": skipped ", out_.foreign_target_records,
                                           " records of other targets (",
                                           absl::StrJoin(parts, ", "), ")"));
    }
    return std::move(out_);
  }

 private:
  // A skipped line: counted and warned about; a newer format version fails the read. A line that
  // may hold a record (of the wanted workload, when one is) is also suspect; a round line, read
  // as a JSON object of kind "round", cannot hold one (may_hold_record false).
  absl::Status Skip(const std::string& line, const absl::Status& status,
                    bool may_hold_record = true) {
    if (status.code() == absl::StatusCode::kFailedPrecondition) {
      return absl::FailedPreconditionError(
          absl::StrCat(path_, ":", out_.lines, ": ", status.message()));
    }
    ++out_.corrupt_lines;
    if (may_hold_record &&
        (options_.workload_key.empty() || line.find(options_.workload_key) != std::string::npos)) {
      Suspect();
    }
    out_.warnings.push_back(absl::StrCat(path_, ":", out_.lines, ": skipped: ", status.message()));
    if (first_bad_.empty()) {
      first_bad_ = absl::StrCat("line ", out_.lines, " is not a record or round line (",
                                status.message(), "): \"", Excerpt(line), "\"");
    }
    return absl::OkStatus();
  }

  void Suspect() {
    ++out_.suspect_lines;
    if (out_.suspect_line_numbers.size() < 5) out_.suspect_line_numbers.push_back(out_.lines);
  }

  void NoteUnknown(const std::vector<std::string>& fields) {
    for (const std::string& f : fields) {
      if (++out_.unknown_fields[f] == 1) first_unknown_line_[f] = out_.lines;
    }
  }

  absl::Status RoundLine(const std::string& line, const nlohmann::json& j) {
    std::vector<std::string> unknown;
    absl::StatusOr<RoundRecord> round = RoundRecordFromJson(j, &unknown);
    if (!round.ok()) {
      RETURN_IF_ERROR(Skip(line, round.status(), /*may_hold_record=*/false));
      ++out_.corrupt_round_lines;
      const auto number = j.find("round");
      if (number != j.end() && number->is_number_integer() && number->get<int64_t>() > 0) {
        out_.max_corrupt_round = std::max(out_.max_corrupt_round, number->get<int64_t>());
      }
      return absl::OkStatus();
    }
    ++readable_;
    NoteUnknown(unknown);
    if (options_.target.has_value() && !SameTarget(round->target, *options_.target)) {
      ++out_.foreign_target_rounds;
    } else if (!options_.workload_key.empty() && round->workload_key != options_.workload_key) {
      ++out_.other_workload_rounds;
    } else {
      out_.rounds.push_back(*std::move(round));
    }
    return absl::OkStatus();
  }

  absl::Status RecordLine(const std::string& line, const nlohmann::json& j) {
    std::vector<std::string> unknown;
    absl::StatusOr<MeasureRecord> record = MeasureRecordFromJson(j, &unknown);
    if (!record.ok()) return Skip(line, record.status());
    ++readable_;
    NoteUnknown(unknown);
    if (options_.target.has_value() && !SameTarget(record->target, *options_.target)) {
      ++out_.foreign_target_records;
      ++foreign_[record->target.ToString()];
      return absl::OkStatus();
    }
    if (!options_.workload_key.empty() && record->workload_key != options_.workload_key) {
      ++out_.other_workload_records;
      NoteOtherWorkload(*record);
      return absl::OkStatus();
    }
    if (options_.verify_workload_keys && !KeyMatches(*record)) return absl::OkStatus();
    if (!options_.keep_duplicates) {
      const std::string identity = absl::StrCat(
          record->workload_key, " ", record->target.ToString(), " ", RecordStateHash(*record));
      auto [it, inserted] = seen_.try_emplace(identity, out_.records.size());
      if (!inserted) {
        if (record->remeasured) {
          ++(SupersedesEarlierMeasurement(*record) ? out_.remeasured_records
                                                   : out_.unused_remeasures);
        } else if (out_.duplicate_records++ == 0) {
          first_duplicate_line_ = out_.lines;
        }
        // A log is only appended to, so a later record of a schedule is its newer measurement
        // (logs of successive builds joined, a space measured again from an empty log): it is
        // the one kept, in the first record's place and with its trial number, unless it failed
        // for a reason outside the schedule.
        if (SupersedesEarlierMeasurement(*record)) {
          MeasureRecord& kept = out_.records[it->second];
          const int64_t trial = kept.trial;
          kept = *std::move(record);
          kept.trial = trial;
        }
        return absl::OkStatus();
      }
    }
    out_.records.push_back(*std::move(record));
    return absl::OkStatus();
  }

  // verify_workload_keys: false (with a warning) when the record's key is not its workload's.
  bool KeyMatches(const MeasureRecord& record) {
    const std::string workload_json = schedule::WorkloadToJson(record.workload).dump();
    auto it = keys_.find(workload_json);
    if (it == keys_.end()) {
      absl::StatusOr<ir::ComputeDAG> dag = record.workload.Build();
      it = keys_.emplace(workload_json, dag.ok() ? dag->WorkloadKey() : std::string()).first;
    }
    if (it->second.empty() ||
        measure::PrecisionWorkloadKey(it->second, record.precision) == record.workload_key) {
      return true;
    }
    ++out_.inconsistent_records;
    out_.warnings.push_back(absl::StrCat(path_, ":", out_.lines, ": skipped: workload key ",
                                         record.workload_key, " does not match the record's ",
                                         "workload ", record.workload.ToString(), " (key ",
                                         it->second, ")"));
    return false;
  }

  void NoteOtherWorkload(const MeasureRecord& record) {
    const std::string group = absl::StrCat(record.workload_key, " ", record.target.ToString());
    auto it = other_index_.find(group);
    if (it == other_index_.end()) {
      it = other_index_.emplace(group, out_.other_workloads.size()).first;
      out_.other_workloads.push_back({record.workload_key, record.workload, record.target, 0});
    }
    ++out_.other_workloads[it->second].records;
  }

  const std::string& path_;
  const ReadOptions& options_;
  LogContents out_;
  std::map<std::string, int64_t> foreign_;  // target text → records dropped
  // verify_workload_keys: workload JSON → its key with this build ("" when it cannot be built).
  std::map<std::string, std::string> keys_;
  // "key target steps-hash" of the kept records → their index in out_.records.
  std::unordered_map<std::string, size_t> seen_;
  std::map<std::string, int64_t> first_unknown_line_;
  std::map<std::string, size_t> other_index_;  // "key target" → position in other_workloads
  int64_t first_duplicate_line_ = 0;
  int64_t readable_ = 0;   // record and round lines that parsed, before the filters
  std::string first_bad_;  // "line N is not a record or round line (...): \"...\""
};

}  // namespace

absl::StatusOr<LogContents> ReadLog(const std::string& path, const ReadOptions& options) {
  ScopedFd file;
  RETURN_IF_ERROR(OpenRegularFile(path, &file));
  LineReader reader(file.fd, options.max_line_bytes);
  LogParser parser(path, options);
  std::string line;
  int64_t length = 0;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(&line, &length);
    if (!more.ok()) {
      return absl::Status(more.status().code(),
                          absl::StrCat("cannot read log '", path, "': ", more.status().message()));
    }
    if (!*more) break;
    ++parser.out().lines;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (length > options.max_line_bytes) {
      parser.LongLine(length);
      continue;
    }
    RETURN_IF_ERROR(parser.Line(line));
  }
  return parser.Finish();
}

std::string OtherWorkloadsText(const LogContents& contents, const std::string& op, size_t max) {
  if (contents.other_workloads.empty()) return "";
  std::vector<const LoggedWorkload*> sorted;
  for (const LoggedWorkload& w : contents.other_workloads) sorted.push_back(&w);
  // Nearest first: the same operator, then more records.
  std::stable_sort(sorted.begin(), sorted.end(), [&](const auto* a, const auto* b) {
    const bool a_op = a->workload.op == op;
    const bool b_op = b->workload.op == op;
    if (a_op != b_op) return a_op;
    return a->records > b->records;
  });
  std::vector<std::string> parts;
  for (size_t i = 0; i < sorted.size() && i < max; ++i) {
    const LoggedWorkload& w = *sorted[i];
    parts.push_back(absl::StrCat(w.workload.ToString(), " (key ", w.workload_key, ", ",
                                 w.target.ToString(), ", ", w.records,
                                 w.records == 1 ? " record)" : " records)"));
  }
  std::string text = absl::StrCat(
      "the log holds records of ", sorted.size(),
      sorted.size() == 1 ? " other workload: " : " other workloads: ", absl::StrJoin(parts, "; "));
  if (sorted.size() > max) absl::StrAppend(&text, "; and ", sorted.size() - max, " more");
  return text;
}

bool SupersedesEarlierMeasurement(const MeasureRecord& remeasured) {
  switch (remeasured.result.error) {
    case measure::MeasureError::kNone:
      return remeasured.valid();
    case measure::MeasureError::kInvalidSchedule:
    case measure::MeasureError::kCompileError:
    case measure::MeasureError::kWrongAnswer:
    case measure::MeasureError::kRuntimeError:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<MeasureRecord> BestRecord(const std::vector<MeasureRecord>& records,
                                         const std::string& workload_key, const Target& target) {
  const MeasureRecord* best = nullptr;
  int64_t matching = 0;
  std::map<std::string, int64_t> failures;
  std::map<std::string, int64_t> elsewhere;  // same key on other targets
  // A final selection timed its candidates again, held longer than a round's burst at boost
  // clocks, which reads faster than any held timing of a long kernel at the power limit. The
  // round records it had before it were ranked by it already (it timed the fastest of them,
  // then those faster than the fastest so timed, within its limits), so records not so timed and
  // no newer than its newest do not compete; a later job's rounds (a resumed log) do.
  std::string judged;
  for (const MeasureRecord& r : records) {
    if (r.workload_key == workload_key && r.final_timing && r.valid() &&
        SameTarget(r.target, target) && r.timestamp > judged) {
      judged = r.timestamp;
    }
  }
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
    if (!judged.empty() && !r.final_timing && r.timestamp <= judged) continue;
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

bool IsMemoryBound(double flops, double bytes) {
  return bytes > 0 && flops / bytes < kMemoryBoundFlopsPerByte;
}

double SummaryThroughput(const WorkloadSummary& summary, double median_ms) {
  if (!std::isfinite(median_ms) || median_ms <= 0) return 0;
  const double amount = summary.memory_bound ? summary.bytes : summary.flops;
  return amount / (median_ms * 1e6);  // per ms · 1e-9 (giga) · 1e3 (per s)
}

const char* SummaryUnit(const WorkloadSummary& summary) {
  return summary.memory_bound ? "GB/s" : "GFLOP/s";
}

std::vector<WorkloadSummary> SummarizeLog(const std::vector<MeasureRecord>& records,
                                          const std::vector<RoundRecord>& rounds) {
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
      if (dag.ok()) {
        s.flops = dag->Flops();
        s.bytes = static_cast<double>(dag->InputBytes() + dag->OutputBytes());
      }
      s.memory_bound = IsMemoryBound(s.flops, s.bytes);
      it = index.emplace(group, out.size()).first;
      out.push_back(std::move(s));
    }
    WorkloadSummary& s = out[it->second];
    ++s.trials;
    if (r.untuned && s.untuned_trial < 0) {
      s.untuned_trial = r.trial;
      s.untuned_median_ms = r.median_ms();
    }
    if (r.valid()) {
      ++s.valid;
      if (r.result.screened) ++s.screened;
      if (r.median_ms() < s.best_median_ms) {
        s.best_median_ms = r.median_ms();
        s.best_trial = r.trial;
        s.best_flops = s.flops > 0 ? s.flops / (s.best_median_ms * 1e-3) : 0;
        s.best_bytes_per_s = s.bytes > 0 ? s.bytes / (s.best_median_ms * 1e-3) : 0;
      }
    } else {
      ++s.errors[FailureKind(r)];
    }
    s.curve.push_back({s.trials, r.trial, s.best_median_ms, s.best_flops, s.best_bytes_per_s});
  }
  for (WorkloadSummary& s : out) {
    if (!std::isfinite(s.best_median_ms)) continue;
    // Throughput ∝ 1 / median: 90% of the best throughput is a median ≤ best / 0.9.
    const double threshold = s.best_median_ms / 0.9;
    for (const CurvePoint& c : s.curve) {
      if (c.best_median_ms <= threshold) {
        s.trials_to_90_percent = c.trials;
        break;
      }
    }
  }
  for (const RoundRecord& round : rounds) {
    auto it = index.find(std::make_pair(round.workload_key, round.target.ToString()));
    if (it != index.end()) out[it->second].rounds.push_back(round);
  }
  return out;
}

namespace {

// A throughput for people: "25530", "14.3", "3.92".
std::string RateText(double v) {
  if (v >= 1000) return absl::StrFormat("%.0f", v);
  if (v >= 10) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.3g", v);
}

// "0.712", or "-" for NaN.
std::string Metric(double v) {
  return std::isnan(v) ? std::string("-") : absl::StrFormat("%.3f", v);
}

std::string FormatRound(const RoundRecord& r) {
  std::string model = r.model;
  if (r.model == "random") {
    absl::StrAppend(&model, ", ", r.train_samples, " earlier samples");
  } else if (r.model_trained) {
    absl::StrAppend(&model, " trained on ", r.train_programs, " of ", r.train_samples, " samples, ",
                    r.boost_rounds, " boosting rounds");
  } else {
    absl::StrAppend(&model, " untrained (", r.train_samples, " samples)");
  }
  const int64_t last = r.first_trial + std::max<int64_t>(r.trials, 1) - 1;
  // Rounds tuned with local search on say how many of their (first) trials it gave.
  const std::string local = r.local_search_fraction > 0 || r.local_search_trials > 0
                                ? absl::StrCat(", ", r.local_search_trials, " from local search")
                                : std::string();
  std::string text = absl::StrCat("  round ", r.round, " (trials ", r.first_trial, "-", last, ", ",
                                  r.valid, " valid", local, "; ", model, "): pairwise accuracy ",
                                  Metric(r.pairwise_accuracy));
  if (r.k > 0) absl::StrAppend(&text, ", top-", r.k, " recall ", Metric(r.top_k_recall));
  if (r.judge.has_value()) {
    absl::StrAppend(&text, "; top picks: pretrained ", Metric(r.judge->pretrained), ", online ",
                    Metric(r.judge->online), r.judge->cross_validated ? " (cross-validated)" : "");
  }
  absl::StrAppend(
      &text, absl::StrFormat("; train %.1fs, search %.1fs, build %.1fs, measure %.1fs\n", r.train_s,
                             r.search_s, r.build_s, r.measure_s));
  return text;
}

}  // namespace

std::string FormatSummary(const std::vector<WorkloadSummary>& summaries, int curve_points) {
  std::string out;
  for (const WorkloadSummary& s : summaries) {
    const char* unit = SummaryUnit(s);
    const bool has_rate = (s.memory_bound ? s.bytes : s.flops) > 0;
    auto rate = [&](double ms) {
      return absl::StrCat(RateText(SummaryThroughput(s, ms)), " ", unit);
    };
    absl::StrAppend(&out, s.workload.ToString(), "  [key ", s.workload_key, ", ",
                    s.target.ToString(), "]\n");
    absl::StrAppend(&out, "  trials ", s.trials, ", valid ", s.valid);
    if (s.valid > 0) {
      absl::StrAppend(&out, absl::StrFormat(", best %.4g ms", s.best_median_ms));
      if (has_rate) absl::StrAppend(&out, " (", rate(s.best_median_ms), ")");
      absl::StrAppend(&out, " at trial ", s.best_trial);
    }
    if (s.untuned_trial >= 0) {
      absl::StrAppend(&out,
                      std::isfinite(s.untuned_median_ms)
                          ? absl::StrFormat(", untuned %.4g ms", s.untuned_median_ms)
                          : std::string(", untuned failed"),
                      " at trial ", s.untuned_trial);
    }
    absl::StrAppend(&out, "\n");
    if (s.screened > 0) {
      absl::StrAppend(&out, "  screened: ", s.screened, " of ", s.valid,
                      " valid trials kept their short timing (staged timing)\n");
    }
    if (s.trials_to_90_percent > 0) {
      absl::StrAppend(&out, "  90% of the best reached at trial ",
                      s.curve[s.trials_to_90_percent - 1].trial, " (after ", s.trials_to_90_percent,
                      " trials)\n");
    }
    if (!s.errors.empty()) absl::StrAppend(&out, "  errors: ", ErrorCounts(s.errors), "\n");
    const int64_t n = static_cast<int64_t>(s.curve.size());
    const int64_t points = std::min<int64_t>(n, std::max(curve_points, 1));
    if (points > 0) {
      absl::StrAppend(&out,
                      "  tuning curve (best so far; trials numbered from 0, as in the records):\n");
    }
    int64_t last_shown = 0;
    for (int64_t p = 1; p <= points; ++p) {
      const int64_t t = (n * p + points - 1) / points;  // ceil(n·p / points): ends at n
      if (t == last_shown) continue;
      last_shown = t;
      const CurvePoint& c = s.curve[t - 1];
      absl::StrAppend(&out, "  trial ", c.trial, ": ");
      if (std::isinf(c.best_median_ms)) {
        absl::StrAppend(&out, "no valid result yet\n");
      } else if (has_rate) {
        absl::StrAppend(
            &out, absl::StrFormat("best %.4g ms (%s)\n", c.best_median_ms, rate(c.best_median_ms)));
      } else {
        absl::StrAppend(&out, absl::StrFormat("best %.4g ms\n", c.best_median_ms));
      }
    }
    if (!s.rounds.empty()) {
      absl::StrAppend(&out, "  cost model per round (scored before measuring):\n");
      for (const RoundRecord& r : s.rounds) absl::StrAppend(&out, FormatRound(r));
    }
  }
  return out;
}

}  // namespace tilesearch::search
