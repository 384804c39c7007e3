// ComputeDAG: an operator's definition as stages in topological order, with the analyses the
// sketch rules and the cost model need (Ansor, OSDI'20, §4.1): stage kinds, consumers, data reuse,
// FLOPs, bytes moved, and the workload key that names equal workloads in logs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/tensor.h"

namespace tilesearch::ir {

enum class StageKind : uint8_t {
  kPlaceholder,
  kElementwise,  // no reduction; every Load indexes its tensor by exactly the output axes, in order
                 // (and that tensor has the stage's shape)
  kInjective,    // no reduction; any other index expressions (broadcast, transpose, padding)
  kReduction,    // has reduce axes
};
const char* StageKindName(StageKind kind);

/// 64-bit FNV-1a hash of `text` (offset basis 0xcbf29ce484222325, prime 0x100000001b3), the hash
/// behind WorkloadKey; stable across processes and platforms.
uint64_t Fnv1a64(const std::string& text);

class ComputeDAG {
 public:
  /// Collects every stage reachable from `outputs` through Loads. Stage order is canonical: a
  /// post-order DFS from the outputs (in the given order) visiting producers in order of first use
  /// in the body; so it does not depend on the order the stages were built in.
  /// Errors: kInvalidArgument for no outputs, an undefined output, two different stages with one
  /// name, or a placeholder among the outputs.
  static absl::StatusOr<ComputeDAG> Create(const std::vector<Tensor>& outputs);

  int num_stages() const { return static_cast<int>(stages_.size()); }
  /// All stages, topological order (producers before consumers), placeholders included.
  const std::vector<Tensor>& stages() const { return stages_; }
  const Tensor& stage(int id) const { return stages_[id]; }
  /// Stage id by tensor name, or -1.
  int StageId(const std::string& name) const;
  /// Placeholder stage ids in canonical order (kernel argument order: inputs, then outputs).
  const std::vector<int>& input_ids() const { return input_ids_; }
  /// Output stage ids in the order given to Create.
  const std::vector<int>& output_ids() const { return output_ids_; }

  StageKind Kind(int id) const;
  /// Stages that read stage `id`, ascending.
  const std::vector<int>& Consumers(int id) const { return consumers_[id]; }
  /// Stages that stage `id` reads, ascending.
  const std::vector<int>& Producers(int id) const { return producers_[id]; }
  /// Ansor's NeedsMultiLevelTiling (TVM compute_dag.cc): counting read tensors whose accesses miss
  /// some output axis of extent > 1, true when ≥ 2 do, or ≥ 1 does and the stage has reduce axes.
  bool NeedsMultiLevelTiling(int id) const;
  /// True when `id` is a compute stage with no reduction that could be inlined into consumers.
  bool IsInlinable(int id) const;

  /// Floating-point (and integer arithmetic) operations of stage `id`: operations per body
  /// evaluation × points (output points × reduce points, with the combine counted), math calls
  /// count 1. Matmul M×N×K: 2·M·N·K. Counted: Add Sub Mul Div Mod Min Max of a value type (not
  /// int64 index arithmetic) and math calls; free: loads and their indices, casts, comparisons,
  /// logic; a select costs its condition plus its costlier branch. A reduction's init costs its
  /// operations once per output point.
  double StageFlops(int id) const;
  /// Sum over all stages.
  double Flops() const;
  /// Bytes of all placeholder tensors / of all output tensors.
  int64_t InputBytes() const;
  int64_t OutputBytes() const;

  /// Canonical text: stages renamed by position (T0, T1, ...; axes i0.., r0..), every shape,
  /// dtype, body and init spelled out; independent of tensor and axis names and of build order.
  std::string CanonicalText() const;
  /// 16 hex digits: a stable 64-bit FNV-1a hash of CanonicalText (same in every process).
  std::string WorkloadKey() const;

  /// Readable multi-line form with real names, shapes, kinds, FLOPs and the workload key.
  std::string ToString() const;

 private:
  std::vector<Tensor> stages_;
  std::vector<int> input_ids_;
  std::vector<int> output_ids_;
  std::vector<std::vector<int>> consumers_;
  std::vector<std::vector<int>> producers_;
};

}  // namespace tilesearch::ir
