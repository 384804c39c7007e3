// Benchmark suites: KernelBench-style problem lists as data files (bench/suites/*.json),
// read here so the tuner (`tilesearch bench`) and the tests share one definition with
// bench/harness/score.py (which reads the same files with Python's json module).
//
// Format, version 1 (every field but "description", "dtype", "attrs", "tags", "note" and "nodes"
// required; any other field is an error):
//
//   {
//     "version": 1,
//     "suite": "level1",
//     "description": "free text",
//     "problems": [
//       {"name": "matmul_square_4096", "op": "matmul", "shapes": [[4096, 4096], [4096, 4096]],
//        "dtype": "float32", "attrs": {"transpose_b": "false"}, "inputs": ["A", "B"],
//        "torch": "torch.matmul(A, B)", "tags": ["matmul"], "note": "KernelBench L1-1"},
//       {"name": "dense_bias_relu", "op": "fused", "shapes": [[64, 32], [16, 32], [16]],
//        "inputs": ["X", "W", "b"], "torch": "torch.relu(F.linear(X, W) + b)",
//        "nodes": [{"op": "dense", "inputs": ["p0", "p1"]}, {"op": "add", "inputs": ["n0", "p2"]},
//                  {"op": "relu", "inputs": ["n1"]}]}
//     ]
//   }
//
// A problem is a workload of the operator library (op, shapes, dtype, attrs: exactly
// schedule::Workload's fields and syntax), or a fused subgraph (op "fused" with "nodes" in the
// fused-workload form of schedule/fused_workload.h: node K applies a graph operator, ir/graph.h, to
// placeholders "p<I>" (shapes[I]) and earlier nodes "n<J>"; the last node is the output). "inputs"
// names the inputs (one per shape, Python identifiers) in "torch", the PyTorch expression the
// problem computes, evaluated by bench/harness/score.py with `torch` and `F`
// (torch.nn.functional) in scope. Tag "small" marks latency-bound problems, summarized separately.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "schedule/schedule_file.h"

namespace tilesearch::bench {

/// Version of the suite file format this build reads.
inline constexpr int kSuiteFileVersion = 1;

/// One problem of a suite.
struct Problem {
  std::string name;  // unique in the suite; [a-z0-9_], starts with a letter
  /// op, shapes, dtype, attributes: what the tuner tunes. For a fused problem: op "fused", the
  /// placeholder shapes and dtype, no attributes, and its nodes (schedule/fused_workload.h).
  schedule::Workload workload;
  std::vector<std::string> inputs;  // names of the inputs in `torch`, one per shape
  std::string torch;                // the PyTorch expression
  std::vector<std::string> tags;    // e.g. "small", "matmul"
  std::string note;

  bool is_fused() const { return workload.is_fused(); }
  /// True when tagged "small" (latency-bound; summarized separately).
  bool is_small() const;
};

/// A parsed suite file.
struct Suite {
  std::string source = "<suite>";  // the path, or the name given to Parse; prefixes every error
  std::string name;                // "suite"
  std::string description;
  std::vector<Problem> problems;

  /// Reads and parses the file at `path`. Errors: ReadFile's ("cannot read suite file 'x': ...":
  /// kNotFound for a missing file, kInvalidArgument for a directory) and every error of Parse.
  static absl::StatusOr<Suite> Load(const std::string& path);
  /// Parses a suite's text. Errors (kInvalidArgument, "<source>: ..." and, inside a problem,
  /// "<source>: problem 3 'name': ..."): not JSON / not an object; unknown field; missing,
  /// non-integer, non-positive or newer version ("version 2 is newer than this build reads
  /// (1)"); "suite" missing or not a string; "problems" missing, not a list or empty; a problem
  /// that is not an object, misses a required field ("field 'torch' is missing"), has an unknown
  /// field, a bad name ("name 'Mat-mul' must be lower-case letters, digits and '_' ..."), a name
  /// used twice ("name 'x' is used by problem 1 too"), workload fields rejected by
  /// schedule::WorkloadFromJson ("field 'shapes' must be a list of shapes"), a number of
  /// inputs that differs from the number of shapes ("field 'inputs' names 2 inputs but
  /// 'shapes' lists 3"), a non-identifier or repeated input name, an empty "torch", "nodes" on a
  /// non-fused problem, a fused problem without nodes or with attributes, a malformed node
  /// ("field 'problems[0].nodes[1].inputs[0]': n2 is not an earlier node ...": the messages of
  /// schedule::WorkloadFromJson, which reads the workload fields).
  static absl::StatusOr<Suite> Parse(const std::string& text,
                                     const std::string& source = "<suite>");

  /// The problem named `name`, or nullptr.
  const Problem* Find(const std::string& name) const;
};

/// Builds the problem's DAG (schedule::Workload::Build: the operator library, or the fused
/// workload's BuildFusedDAG). Errors (kInvalidArgument): Build's, prefixed "problem 'x': ", e.g.
/// "problem 'x': fused workload: nodes[0] (matmul): ...", "... placeholder p1 is not read by any
/// node", "... placeholders must be numbered in the order the DAG reads them: ...".
absl::StatusOr<ir::ComputeDAG> BuildProblem(const Problem& problem);

/// Minimum DRAM traffic of one run in bytes: every input and output read or written once.
double MinimumBytes(const ir::ComputeDAG& dag);

}  // namespace tilesearch::bench
