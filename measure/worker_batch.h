// Runs one batch of work items in a fresh forked worker (measure/kept_worker.h) that ends with the
// batch: items are indices into the caller's memory, which the worker sees as of its fork (so they
// may refer to in-memory data: nests, compiled modules). A worker that crashes or hangs on an item
// is replaced for the next item, as KeptWorker does. Runners keep their worker across batches
// instead (KeptWorker itself), sending each item as bytes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "measure/kept_worker.h"

namespace tilesearch::measure {

/// Runs items 0..num_items-1: in a worker, `setup()` once, then `item(i)` for each i in order; a
/// worker that dies or times out on item i is replaced by a new one (which runs setup again)
/// starting at i+1. `item` returns the payload (any bytes; an item's own errors are encoded in
/// it). One outcome per item, in order. The child never returns into the caller's code: it
/// _exit()s. `on_outcome`, when given, is called in the parent with each item's index as soon as
/// its outcome is final, in increasing index order, before RunBatchInWorkers returns (so a caller
/// can keep each result, e.g. append it to a log, while later items still run). The last worker
/// is killed and reaped before it returns.
std::vector<WorkerItemOutcome> RunBatchInWorkers(
    int num_items, const std::function<absl::Status()>& setup,
    const std::function<std::string(int)>& item, const WorkerOptions& options = {},
    const std::function<void(int, const WorkerItemOutcome&)>& on_outcome = nullptr);

}  // namespace tilesearch::measure
