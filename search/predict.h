// Schedules for shapes that were never tuned, chosen without measuring: the candidates are the
// fastest records of the nearest tuned shapes of the same operator, transferred to the new extents
// (search/schedule_transfer.h), and fresh samples of the task's sketches; a cost model ranks them
// (the pretrained one, costmodel/, in practice) and the best is returned. TenSet/TLP-style
// pretrained models and Triton/TVM users' warm starts from nearby configurations are the
// motivation; the search can start from the result, or a serving system can use it as is.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "costmodel/cost_model.h"
#include "ir/compute_dag.h"
#include "measure/precision_rule.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "schedule/state.h"
#include "search/measure_record.h"
#include "search/search_options.h"

namespace tilesearch::search {

/// How PredictSchedule gathers its candidates.
struct PredictOptions {
  /// Tuned workloads transferred from, nearest first (at least 1).
  int nearest_workloads = 4;
  /// Of each, its fastest valid records, distinct schedules (at least 1).
  int records_per_workload = 8;
  /// States sampled from the task's sketches when nothing transfers (0: none): the model ranks
  /// them. Without a model they cannot be ranked and are not drawn.
  int fresh_samples = 128;
  /// Seed of the fresh samples.
  uint64_t seed = 0;
  /// Only records of this precision are transferred (a tf32 record never answers an ieee task,
  /// nor the reverse; measure::PrecisionWorkloadKey).
  measure::Fp32Precision precision = measure::Fp32Precision::kIeee;
  /// Annotation and sketch options of the fresh samples.
  SearchOptions search;
  SketchOptions sketch;
};

/// The chosen schedule and where it came from.
struct PredictedSchedule {
  schedule::State state;  // its steps() are the schedule
  std::shared_ptr<const schedule::LoweredKernel> lowered;
  /// "transferred from trial 17 of matmul 512x512 512x512 float32 (0.312 ms)" or "sampled".
  std::string origin;
  /// The model's score of the choice; NaN without a model.
  double score = 0;
  /// Candidates ranked: transferred from records, their variants (TransferVariants), sampled.
  int transferred = 0;
  int variants = 0;
  int sampled = 0;
  /// Whether the transfers came from relatives (other matmul-like workloads of the dtype) because
  /// no workload of the same operator, dtype and attributes transferred.
  bool related = false;
  /// Records that did not transfer, one line each ("trial 3 of matmul 64x64 64x64 float32: step
  /// 5: ..."), at most 16.
  std::vector<std::string> notes;
};

/// Distance between two workloads of one operator, dtype and attributes: the sum over every input
/// dimension of |log2(a / b)| (so 512 and 1024 are as far apart as 4096 and 8192); +infinity for
/// workloads that are not such twins (another operator, dtype, attributes, fused nodes, or input
/// ranks).
double WorkloadDistance(const schedule::Workload& a, const schedule::Workload& b);

/// Predicts a schedule for `workload` (whose DAG is `dag`) on `target` from `records` (any mix of
/// workloads and targets: only valid records of the same target kind and arch and of
/// options.precision whose workload has a finite WorkloadDistance are used, their workload's own
/// record included when there is one); each transferred record also brings its TransferVariants
/// (the k loop and block tile refitted to the new extents). When no such twin transfers, the
/// records of relatives are tried instead: workloads of the same dtype with a matmul-like stage,
/// nearest by their GEMM extents (batch, m, n, k; the same log2 measure), which transfer where
/// their steps replay on `dag` (a dense with bias from a dense with bias and GELU; the tensor_core
/// step's epilogue is then extended over the new consumers by the variants). Each candidate is
/// lowered and checked against the target's
/// limits (LowerCandidate) before it is ranked. With `model`, every candidate is scored (higher is
/// faster) and the best returned; without (nullptr), the first transferred candidate in order of
/// (distance, source time) is. Errors: kNotFound "no tuned workload of <op> <dtype> to transfer
/// from and no cost model to rank fresh samples" (no model, nothing transferred), kNotFound "no
/// valid candidate: ..." when nothing transferred or sampled lowers; kInvalidArgument for options
/// out of range; the model's errors.
[[nodiscard]] absl::StatusOr<PredictedSchedule> PredictSchedule(
    const ir::ComputeDAG& dag, const schedule::Workload& workload, const Target& target,
    const std::vector<MeasureRecord>& records, costmodel::CostModel* model,
    const PredictOptions& options = {});

}  // namespace tilesearch::search
