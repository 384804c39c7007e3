#include "search/streaming_build.h"

#include <utility>

namespace tilesearch::search {

StreamingBuild::StreamingBuild(const measure::Builder& builder,
                               std::vector<measure::BuildInput> inputs)
    : size_(inputs.size()), started_(std::chrono::steady_clock::now()), results_(inputs.size()) {
  thread_ = std::thread([this, &builder, inputs = std::move(inputs)] {
    auto elapsed = [this] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    };
    std::vector<measure::BuildResult> all = builder.Build(
        inputs,
        [this, &elapsed](size_t i, const measure::BuildResult& r) {
          std::lock_guard<std::mutex> lock(mu_);
          if (i < results_.size() && !results_[i]) results_[i] = r;
          wall_s_ = elapsed();
          cv_.notify_all();
        },
        &cancel_);
    std::lock_guard<std::mutex> lock(mu_);
    // Build returns one result per input; whatever its callback did not deliver (it always
    // should) comes from there, so that no reader waits forever.
    for (size_t i = 0; i < results_.size(); ++i) {
      if (!results_[i]) results_[i] = std::move(all[i]);
    }
    wall_s_ = elapsed();
    done_ = true;
    cv_.notify_all();
  });
}

StreamingBuild::~StreamingBuild() {
  Cancel();
  if (thread_.joinable()) thread_.join();
}

size_t StreamingBuild::WaitReady(size_t first, size_t max_count) {
  std::unique_lock<std::mutex> lock(mu_);
  if (first >= results_.size()) return 0;
  cv_.wait(lock, [&] { return results_[first].has_value(); });
  size_t n = 0;
  while (first + n < results_.size() && results_[first + n] && (max_count == 0 || n < max_count)) {
    ++n;
  }
  return n;
}

measure::BuildResult StreamingBuild::Get(size_t i) const {
  std::lock_guard<std::mutex> lock(mu_);
  return i < results_.size() && results_[i] ? *results_[i] : measure::BuildResult{};
}

void StreamingBuild::WaitDone() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
}

double StreamingBuild::wall_s() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wall_s_;
}

}  // namespace tilesearch::search
