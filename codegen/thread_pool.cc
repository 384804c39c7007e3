#include "codegen/thread_pool.h"

#include <algorithm>

namespace tilesearch::codegen::internal {

ThreadPool::ThreadPool(int num_workers) {
  for (int i = 0; i < num_workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

ThreadPool& ThreadPool::Shared() {
  // Never destroyed: JIT code may run parallel loops until the process exits.
  static ThreadPool* pool =
      new ThreadPool(std::max(1, static_cast<int>(std::thread::hardware_concurrency())) - 1);
  return *pool;
}

bool ThreadPool::TakeLocked(Job** job, int64_t* index) {
  while (!jobs_.empty()) {
    Job* front = jobs_.front();
    if (front->next < front->n) {
      *job = front;
      *index = front->next++;
      return true;
    }
    jobs_.pop_front();
  }
  return false;
}

void ThreadPool::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    Job* job = nullptr;
    int64_t index = 0;
    if (TakeLocked(&job, &index)) {
      lock.unlock();
      (*job->fn)(index);
      lock.lock();
      if (++job->done == job->n) job->finished.notify_all();
      continue;
    }
    if (stop_) return;
    wake_.wait(lock);
  }
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (n == 1 || workers_.empty()) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  Job job;
  job.fn = &fn;
  job.n = n;
  std::unique_lock<std::mutex> lock(mu_);
  jobs_.push_back(&job);
  wake_.notify_all();
  // The caller takes indices of its own job only, so it never waits on another caller's work.
  while (job.next < job.n) {
    const int64_t index = job.next++;
    lock.unlock();
    fn(index);
    lock.lock();
    ++job.done;
  }
  job.finished.wait(lock, [&] { return job.done == job.n; });
  // Exhausted: no worker can take from it any more; drop it if still queued.
  auto it = std::find(jobs_.begin(), jobs_.end(), &job);
  if (it != jobs_.end()) jobs_.erase(it);
}

}  // namespace tilesearch::codegen::internal
