// A first-come-first-served (ticket) lock shared by processes through a small file: tuning jobs
// that share one GPU take turns measuring (MeasureOptions::device_lock_path), in the order they
// asked, and a job that dies never blocks the others.
//
// Why not a plain flock held for the whole turn: flock is not fair. Two jobs that release and
// re-lock in turn can keep a third waiting for minutes (seen on an H200: a softmax job made 64
// trials in 390 s while two conv2d jobs on the same GPU made 320 each).
//
// Semantics (the ticket lock of Mellor-Crummey & Scott, "Algorithms for scalable synchronization
// on shared-memory multiprocessors", 1991, with the counters in a file instead of memory):
// - Acquire takes the next ticket, then polls (sleeping min_poll_ms, growing ×1.5 per poll up to
//   max_poll_ms) until "now serving" equals its ticket; it then holds the lock until Release,
//   which advances "now serving". The file is read and rewritten only inside a short
//   flock(LOCK_EX) critical section on a descriptor opened for that section alone (so forked
//   measurement workers never inherit a held flock).
// - Mutual exclusion: at most one live ticket is served at a time.
// - Fairness: tickets are served in the order they were taken; a waiter is passed over only when
//   its owner is dead, so no job starves.
// - Crashes: a ticket whose owner process no longer exists (kill(pid, 0) fails with ESRCH, the
//   process is a zombie, or its pid now belongs to a process with another start time) is dropped
//   by whichever process observes it: a holder SIGKILLed while holding, or a waiter killed while
//   queued, costs the others at most one poll interval. Owners in another pid namespace are never
//   judged dead (their pids mean nothing here). A file written before the last boot (another
//   boot id) starts afresh; so does one whose state after our header line does not parse. A
//   non-empty file that does not start with the header (a tuning log named by mistake) is
//   refused by Open and never written.
// - Signals: a signal (the tuner's first SIGINT) neither loses the ticket nor ends the wait; the
//   process keeps its place and measures when served. A process that then dies of the signal is
//   dropped like any crash.
// - A waiter that finds its ticket gone from the file (the file was deleted or rewritten by hand)
//   takes a new one. Deleting the file while jobs run can let two of them hold at once: don't.
//
// File format (text, readable with cat; written whole at offset 0, then truncated):
//   tilesearch device lock v1
//   boot <boot id, /proc/sys/kernel/random/boot_id>
//   next <the ticket the next Acquire takes>
//   serving <the ticket now served>
//   ticket <t> pid <pid> start <start time, clock ticks after boot> ns <pid namespace inode>
//   ...   (one line per outstanding ticket, held or waiting, in ticket order; serving ≤ t < next)
//   end
// An empty file is the initial state (next 0, serving 0, no tickets).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tilesearch::runtime {

/// One outstanding ticket of a device lock file: its number and the process that owns it.
struct DeviceLockTicket {
  int64_t ticket = 0;
  int64_t pid = 0;
  /// The owner's start time (/proc/<pid>/stat field 22, clock ticks after boot); 0 = unknown.
  /// Tells a reused pid from the original owner.
  uint64_t start_time = 0;
  /// The owner's pid namespace (inode of /proc/<pid>/ns/pid); 0 = unknown.
  uint64_t pid_namespace = 0;
};

/// The queue a device lock file holds.
struct DeviceLockState {
  std::string boot_id;                    // of the boot the file was written in
  int64_t next = 0;                       // the ticket the next Acquire takes
  int64_t serving = 0;                    // the ticket allowed to hold the lock
  std::vector<DeviceLockTicket> tickets;  // outstanding (held or waiting), ascending ticket order
};

/// The state written in the lock file at `path`, as it is now (read under the file's flock).
/// A missing or empty file gives the initial state; so does a file from another boot or one that
/// does not parse. Errors: kInvalidArgument "cannot open device lock '<path>': <reason>".
/// (DeviceLock::Open also refuses a non-regular file and a non-empty file without our header.)
[[nodiscard]] absl::StatusOr<DeviceLockState> ReadDeviceLockState(const std::string& path);

/// A process's place in the FIFO lock of one file. One ticket at a time per object; an object is
/// used by one thread at a time (several objects, in several threads or processes, share a file).
class DeviceLock {
 public:
  struct Options {
    /// First sleep between polls while waiting (milliseconds); each poll multiplies it by 1.5.
    double min_poll_ms = 5;
    /// Longest sleep between polls (milliseconds): the most a served waiter may lag.
    double max_poll_ms = 50;
  };

  /// A lock on the file at `path`, created (mode 0644) where missing; takes no ticket yet.
  /// Errors: kInvalidArgument "cannot open device lock '<path>': <reason>"; kInvalidArgument for
  /// non-positive poll times or min_poll_ms > max_poll_ms.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DeviceLock>> Open(const std::string& path,
                                                                        Options options);
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DeviceLock>> Open(const std::string& path) {
    return Open(path, Options());
  }

  /// Gives up the ticket this object holds or waits with, if any.
  ~DeviceLock();
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;

  /// Takes a ticket and blocks until it is served (FIFO among all processes using the file).
  /// Signals do not interrupt the wait. CHECK-fails when this object already has a ticket.
  /// Errors: kInternal "cannot open device lock '<path>': <reason>" or "device lock '<path>':
  /// <read|write|flock>: <reason>" on an I/O error (the ticket, if taken, is given up as far as
  /// possible).
  [[nodiscard]] absl::Status Acquire();

  /// Ends the turn: removes the ticket and lets the next live ticket be served. No-op without a
  /// ticket. Errors: kInternal as for Acquire; the object has no ticket afterwards either way (a
  /// ticket a failed Release leaves in the file blocks the others until this process exits).
  absl::Status Release();

  /// Whether this object holds the lock (Acquire returned OK and Release was not called).
  bool held() const { return held_; }
  /// The ticket taken by the last Acquire; -1 before any.
  int64_t ticket() const { return ticket_; }
  const std::string& path() const { return path_; }

 private:
  DeviceLock(std::string path, Options options) : path_(std::move(path)), options_(options) {}
  /// One critical section: drops dead tickets, takes a ticket where this object has none in the
  /// file, and says whether ours is served.
  absl::StatusOr<bool> Poll();

  std::string path_;
  Options options_;
  int64_t ticket_ = -1;
  bool has_ticket_ = false;
  bool held_ = false;
};

}  // namespace tilesearch::runtime
