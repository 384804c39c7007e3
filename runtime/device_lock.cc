// The FIFO (ticket) device lock: the queue lives in a small text file updated under short flock
// critical sections; dead owners are detected with kill(pid, 0) and /proc/<pid>/stat.
#include "runtime/device_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status.h"

namespace tilesearch::runtime {
namespace {

constexpr char kHeader[] = "tilesearch device lock v1";

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// This boot's id; "" where the kernel does not say (then boots are not told apart).
const std::string& BootId() {
  static const std::string* const id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string s;
    std::getline(in, s);
    return new std::string(Trimmed(s));
  }();
  return *id;
}

// State (field 3) and start time (field 22) of /proc/<pid>/stat; false where unreadable.
bool ReadProcStat(int64_t pid, char* state, uint64_t* start_time) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses; the fields follow the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  std::vector<std::string> after;
  while (after.size() < 20 && fields >> field) after.push_back(field);
  if (after.size() < 20 || after[0].size() != 1) return false;
  *state = after[0][0];
  return absl::SimpleAtoi(after[19], start_time);
}

// Inode of the pid namespace of this process ("pid:[4026531836]"); 0 where unknown.
uint64_t OwnPidNamespace() {
  char buf[64];
  const ssize_t n = ::readlink("/proc/self/ns/pid", buf, sizeof(buf) - 1);
  if (n <= 0) return 0;
  const std::string link(buf, static_cast<size_t>(n));
  const size_t open = link.find('['), close = link.rfind(']');
  uint64_t inode = 0;
  if (open == std::string::npos || close == std::string::npos || close <= open ||
      !absl::SimpleAtoi(link.substr(open + 1, close - open - 1), &inode)) {
    return 0;
  }
  return inode;
}

// This process as a ticket owner (computed per call: a forked child is another owner).
DeviceLockTicket Self() {
  DeviceLockTicket self;
  self.pid = ::getpid();
  char state = 0;
  if (!ReadProcStat(self.pid, &state, &self.start_time)) self.start_time = 0;
  self.pid_namespace = OwnPidNamespace();
  return self;
}

// Whether the owner of `t` may still be alive, as seen by `self`. Unknown counts as alive: a live
// owner judged dead would break mutual exclusion; a dead one judged alive only delays the queue.
bool OwnerAlive(const DeviceLockTicket& t, const DeviceLockTicket& self) {
  if (t.pid <= 0) return false;
  if (t.pid_namespace != 0 && self.pid_namespace != 0 && t.pid_namespace != self.pid_namespace) {
    return true;  // its pid means nothing in our namespace
  }
  if (::kill(static_cast<pid_t>(t.pid), 0) != 0 && errno == ESRCH) return false;
  char state = 0;
  uint64_t start_time = 0;
  if (!ReadProcStat(t.pid, &state, &start_time)) return true;
  if (state == 'Z' || state == 'X') return false;  // killed, not yet reaped by its parent
  if (t.start_time != 0 && start_time != t.start_time) return false;  // the pid was reused
  return true;
}

std::string Format(const DeviceLockState& s) {
  std::string out =
      absl::StrCat(kHeader, "\nboot ", s.boot_id, "\nnext ", s.next, "\nserving ", s.serving, "\n");
  for (const DeviceLockTicket& t : s.tickets) {
    absl::StrAppend(&out, "ticket ", t.ticket, " pid ", t.pid, " start ", t.start_time, " ns ",
                    t.pid_namespace, "\n");
  }
  absl::StrAppend(&out, "end\n");
  return out;
}

// Parses the text up to its "end" line (bytes after it are the tail of a longer earlier state);
// false when it is not a well-formed state.
bool Parse(const std::string& text, DeviceLockState* s) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  size_t i = 0;
  auto value = [&](const char* key, std::string* out) {
    if (i >= lines.size()) return false;
    const std::string prefix = absl::StrCat(key, " ");
    if (lines[i].rfind(prefix, 0) != 0 && lines[i] != key) return false;
    *out = lines[i].size() > prefix.size() ? lines[i].substr(prefix.size()) : "";
    ++i;
    return true;
  };
  std::string next, serving;
  if (lines.empty() || lines[i++] != kHeader || !value("boot", &s->boot_id) ||
      !value("next", &next) || !value("serving", &serving) || !absl::SimpleAtoi(next, &s->next) ||
      !absl::SimpleAtoi(serving, &s->serving) || s->serving < 0 || s->serving > s->next) {
    return false;
  }
  s->tickets.clear();
  for (; i < lines.size(); ++i) {
    if (lines[i] == "end") return true;
    std::vector<std::string> f = absl::StrSplit(lines[i], ' ');
    DeviceLockTicket t;
    if (f.size() != 8 || f[0] != "ticket" || f[2] != "pid" || f[4] != "start" || f[6] != "ns" ||
        !absl::SimpleAtoi(f[1], &t.ticket) || !absl::SimpleAtoi(f[3], &t.pid) ||
        !absl::SimpleAtoi(f[5], &t.start_time) || !absl::SimpleAtoi(f[7], &t.pid_namespace) ||
        t.ticket >= s->next || (!s->tickets.empty() && t.ticket <= s->tickets.back().ticket)) {
      return false;
    }
    s->tickets.push_back(t);
  }
  return false;  // no "end": cut short
}

// The state a file's text holds; the initial state (of this boot) for an empty, malformed or
// other-boot file.
DeviceLockState StateOf(const std::string& text) {
  DeviceLockState s;
  if (!Parse(text, &s) || s.boot_id != BootId()) s = DeviceLockState();
  s.boot_id = BootId();
  return s;
}

// Drops tickets of dead owners and tickets behind "now serving", then advances "now serving" past
// tickets that are gone. Returns whether the state changed.
bool Advance(DeviceLockState* s, const DeviceLockTicket& self) {
  const size_t before = s->tickets.size();
  const int64_t serving_before = s->serving;
  s->tickets.erase(std::remove_if(s->tickets.begin(), s->tickets.end(),
                                  [&](const DeviceLockTicket& t) {
                                    return t.ticket < s->serving || !OwnerAlive(t, self);
                                  }),
                   s->tickets.end());
  // Tickets are ascending: the first outstanding one is next in line; none: the queue is empty.
  s->serving = s->tickets.empty() ? s->next : s->tickets.front().ticket;
  return s->tickets.size() != before || s->serving != serving_before;
}

// The lock file opened and flock'ed for one critical section; closing unlocks. A failed open is
// `open_error` "cannot open device lock '<path>': <reason>".
class CriticalSection {
 public:
  static absl::StatusOr<CriticalSection> Enter(const std::string& path, bool write,
                                               absl::StatusCode open_error) {
    const int fd = ::open(path.c_str(), (write ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::Status(
          open_error, absl::StrCat("cannot open device lock '", path, "': ", std::strerror(errno)));
    }
    CriticalSection section(path, fd);
    // Signals interrupt a blocked flock with EINTR: the section is short, so just wait again.
    while (::flock(fd, write ? LOCK_EX : LOCK_SH) != 0) {
      if (errno != EINTR) return section.Error("flock");
    }
    return section;
  }
  CriticalSection(CriticalSection&& other) noexcept
      : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}
  CriticalSection& operator=(CriticalSection&&) = delete;
  ~CriticalSection() {
    if (fd_ >= 0) ::close(fd_);
  }

  absl::StatusOr<std::string> Read() const {
    std::string text;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::pread(fd_, buf, sizeof(buf), static_cast<off_t>(text.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Error("read");
      if (n == 0) return text;
      text.append(buf, static_cast<size_t>(n));
    }
  }

  // Writes `text` at offset 0, then cuts the file to its length (a crash in between leaves a
  // longer file whose tail follows the "end" line, which Parse ignores).
  absl::Status Write(const std::string& text) const {
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n =
          ::pwrite(fd_, text.data() + done, text.size() - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Error("write");
      done += static_cast<size_t>(n);
    }
    while (::ftruncate(fd_, static_cast<off_t>(text.size())) != 0) {
      if (errno != EINTR) return Error("truncate");
    }
    return absl::OkStatus();
  }

 private:
  CriticalSection(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status Error(const char* what) const {
    return absl::InternalError(
        absl::StrCat("device lock '", path_, "': ", what, ": ", std::strerror(errno)));
  }

  std::string path_;
  int fd_;
};

// Sleeps `ms` milliseconds; a signal cuts the sleep short (the caller polls again).
void SleepMs(double ms) {
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(ms / 1000);
  ts.tv_nsec = static_cast<long>((ms - 1000.0 * static_cast<double>(ts.tv_sec)) * 1e6);
  ::nanosleep(&ts, nullptr);
}

}  // namespace

absl::StatusOr<DeviceLockState> ReadDeviceLockState(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return StateOf("");
  ASSIGN_OR_RETURN(
      CriticalSection section,
      CriticalSection::Enter(path, /*write=*/false, absl::StatusCode::kInvalidArgument));
  ASSIGN_OR_RETURN(std::string text, section.Read());
  return StateOf(text);
}

absl::StatusOr<std::unique_ptr<DeviceLock>> DeviceLock::Open(const std::string& path,
                                                             Options options) {
  if (!(options.min_poll_ms > 0) || !(options.max_poll_ms >= options.min_poll_ms)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device lock poll times must satisfy 0 < min_poll_ms <= max_poll_ms, got ",
                     options.min_poll_ms, " and ", options.max_poll_ms));
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open device lock '", path, "': ", std::strerror(errno)));
  }
  // Never take over a file that holds something else (a tuning log given by mistake would be
  // overwritten by the first Poll): it must be a regular file, empty or starting with our header.
  struct stat st;
  std::string head(sizeof(kHeader) - 1, '\0');
  ssize_t got = 0;
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (regular) got = ::pread(fd, head.data(), head.size(), 0);
  ::close(fd);
  if (!regular) {
    return absl::InvalidArgumentError(
        absl::StrCat("device lock '", path, "' is not a regular file"));
  }
  // Compared as a prefix: another job may be rewriting the file right now (outside our flock).
  if (got > 0 && head.compare(0, got, kHeader, got) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device lock '", path,
        "' holds other data (not a tilesearch device lock file); give the lock a file of its own"));
  }
  return std::unique_ptr<DeviceLock>(new DeviceLock(path, options));
}

DeviceLock::~DeviceLock() {
  if (has_ticket_) Release().IgnoreError();
}

absl::StatusOr<bool> DeviceLock::Poll() {
  ASSIGN_OR_RETURN(CriticalSection section,
                   CriticalSection::Enter(path_, /*write=*/true, absl::StatusCode::kInternal));
  ASSIGN_OR_RETURN(std::string text, section.Read());
  const DeviceLockTicket self = Self();
  DeviceLockState state = StateOf(text);
  bool changed = Advance(&state, self);
  const bool queued = has_ticket_ && std::any_of(state.tickets.begin(), state.tickets.end(),
                                                 [&](const DeviceLockTicket& t) {
                                                   return t.ticket == ticket_ && t.pid == self.pid;
                                                 });
  if (!queued) {
    // The first poll, or our ticket vanished (the file was deleted or rewritten): queue up.
    DeviceLockTicket t = self;
    t.ticket = state.next++;
    state.tickets.push_back(t);
    Advance(&state, self);  // an empty queue serves the new ticket at once
    ticket_ = t.ticket;
    has_ticket_ = true;
    changed = true;
  }
  if (changed) RETURN_IF_ERROR(section.Write(Format(state)));
  return state.serving == ticket_;
}

absl::Status DeviceLock::Acquire() {
  CHECK(!has_ticket_) << "device lock '" << path_ << "' already has ticket " << ticket_;
  double sleep_ms = options_.min_poll_ms;
  for (;;) {
    absl::StatusOr<bool> served = Poll();
    if (!served.ok()) {
      Release().IgnoreError();
      return served.status();
    }
    if (*served) {
      held_ = true;
      return absl::OkStatus();
    }
    SleepMs(sleep_ms);
    sleep_ms = std::min(sleep_ms * 1.5, options_.max_poll_ms);
  }
}

absl::Status DeviceLock::Release() {
  if (!has_ticket_) return absl::OkStatus();
  has_ticket_ = false;
  held_ = false;
  ASSIGN_OR_RETURN(CriticalSection section,
                   CriticalSection::Enter(path_, /*write=*/true, absl::StatusCode::kInternal));
  ASSIGN_OR_RETURN(std::string text, section.Read());
  const DeviceLockTicket self = Self();
  DeviceLockState state = StateOf(text);
  state.tickets.erase(std::remove_if(state.tickets.begin(), state.tickets.end(),
                                     [&](const DeviceLockTicket& t) {
                                       return t.ticket == ticket_ && t.pid == self.pid;
                                     }),
                      state.tickets.end());
  Advance(&state, self);
  return section.Write(Format(state));
}

}  // namespace tilesearch::runtime
