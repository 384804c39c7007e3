// A batch as KeptWorker requests: each request is the item's index (4 bytes), which the worker
// hands to the caller's item function on its fork-time copy of the caller's memory.
#include "measure/worker_batch.h"

#include <cstdint>
#include <cstring>

namespace tilesearch::measure {

std::vector<WorkerItemOutcome> RunBatchInWorkers(
    int num_items, const std::function<absl::Status()>& setup,
    const std::function<std::string(int)>& item, const WorkerOptions& options,
    const std::function<void(int, const WorkerItemOutcome&)>& on_outcome) {
  std::vector<std::string> requests;
  for (int32_t i = 0; i < num_items; ++i) {
    requests.emplace_back(sizeof(i), '\0');
    std::memcpy(requests.back().data(), &i, sizeof(i));
  }
  KeptWorker worker(
      setup,
      [&item](const std::string& request) {
        int32_t i = 0;
        std::memcpy(&i, request.data(), sizeof(i));
        return item(i);
      },
      options);
  return worker.Run(requests, on_outcome);
}

}  // namespace tilesearch::measure
