// The final selection's timing in parts (TuneOptions::final_passes): each schedule of a batch is
// timed in several parts, the batch's order reversed from one pass to the next (A B C, C B A,
// A B C, ...), and a schedule's parts are joined into one result. A GPU's clock drifts over the
// seconds a final selection takes (its power and thermal limits), so schedules timed one after
// another are ranked partly by when they ran; with the passes interleaved, every schedule's runs
// span the batch, and over an even number of passes a drift linear in time adds the same to
// each one's mean.
#pragma once

#include <cstddef>
#include <vector>

#include "measure/measure.h"

namespace tilesearch::search {

/// The order in which pass `pass` (0-based) times a batch of `n` schedules: 0 … n−1 for even
/// passes, n−1 … 0 for odd ones (boustrophedon), so that over an even number of passes every
/// schedule's mean position is (n − 1) / 2.
std::vector<size_t> PassOrder(size_t n, int pass);

/// One schedule's result from its parts, in the order they ran (at least one): the first part
/// that failed when one did (a schedule that fails any part of its final timing is not timed
/// so); otherwise the first part's check report, kernels and compile time, every part's runs
/// (costs_s and timing samples, in order) with their statistics recomputed
/// (runtime::Summarize), the sums of the parts' load, check and wall times, screened when any
/// part was, and `soak_ms` (the soaks the parts followed, summed) as the timing's soak.
measure::MeasureResult JoinParts(std::vector<measure::MeasureResult> parts, double soak_ms);

}  // namespace tilesearch::search
