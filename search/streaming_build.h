// A round's candidates built on a thread of their own while the tuner goes on: the measurement
// takes each candidate as soon as it is built (instead of after the whole round), and the next
// round's search runs beside the builds. The tuner starts a round's StreamingBuild only after the
// previous one is done (TuningJob::PrepareRound), so the compile workers serve the earliest round
// first.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "measure/builder.h"

namespace tilesearch::search {

/// measure::Builder::Build of one round's inputs on a background thread, read in candidate order
/// as the results arrive.
class StreamingBuild {
 public:
  /// Starts building `inputs` with `builder` (which must outlive this object) on a new thread.
  StreamingBuild(const measure::Builder& builder, std::vector<measure::BuildInput> inputs);
  /// Cancels what is not built yet (measure::Builder::Build's cancel) and waits for the thread.
  ~StreamingBuild();
  StreamingBuild(const StreamingBuild&) = delete;
  StreamingBuild& operator=(const StreamingBuild&) = delete;

  /// The number of candidates.
  size_t size() const { return size_; }
  /// Blocks until candidate `first` (< size()) is built, then returns how many candidates from
  /// `first` on are built in a row (at least 1), capped at `max_count` (0: no cap).
  size_t WaitReady(size_t first, size_t max_count = 0);
  /// Candidate i's result (a copy; the module is shared). Call only after WaitReady covered it.
  measure::BuildResult Get(size_t i) const;
  /// Blocks until every candidate is built (or cancelled).
  void WaitDone();
  /// Wall seconds from the start to the last result (so far, while still building).
  double wall_s() const;
  /// Stops the compilations not yet finished (they end as kCancelled); returns at once.
  void Cancel() { cancel_.store(true); }

 private:
  size_t size_ = 0;
  std::chrono::steady_clock::time_point started_;
  std::atomic<bool> cancel_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::optional<measure::BuildResult>> results_;
  double wall_s_ = 0;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace tilesearch::search
