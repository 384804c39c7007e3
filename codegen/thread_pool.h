// Internal to codegen: the worker threads that run host `parallel` loops. One process-wide pool
// (hardware threads − 1 workers; the calling thread works too) serves every HostKernel, and
// several callers may run parallel loops on it at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tilesearch::codegen::internal {

class ThreadPool {
 public:
  /// `num_workers` threads besides the callers.
  explicit ThreadPool(int num_workers);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Runs fn(i) for every i in [0, n) on the workers and the calling thread; returns when all
  /// calls have returned.
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn);
  int num_workers() const { return static_cast<int>(workers_.size()); }

  /// The process-wide pool.
  static ThreadPool& Shared();

 private:
  struct Job {
    const std::function<void(int64_t)>* fn = nullptr;
    int64_t n = 0;
    int64_t next = 0;  // next index to hand out (guarded by mu_)
    int64_t done = 0;  // finished calls (guarded by mu_)
    std::condition_variable finished;
  };
  void WorkerLoop();
  // Takes the next index of the front job, dropping exhausted jobs; false when none is left.
  bool TakeLocked(Job** job, int64_t* index);

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job*> jobs_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace tilesearch::codegen::internal
