// Operator graphs: a DAG of operator-library operators on named tensors, the unit a user tunes
// (a model layer), as opposed to the single ComputeDAG of one operator.
//
//   ir::Graph g;
//   ir::Value x = g.Input("x", {16, 64});
//   ir::Value w = g.Param("w", {32, 64});
//   ir::Value b = g.Param("b", {32});
//   ir::Value y = g.Relu(g.Add(g.Dense(x, w), b));   // [16, 32]
//   g.MarkOutput(y);
//   RETURN_IF_ERROR(g.Validate());                   // the first error, if any, with its node
//
// Values. Every value of a graph is a node: an input (fed at run time), a param (weights) or an
// operator applied to earlier values. Node ids are dense and increase in creation order, so id
// order is a topological order. A Value is a cheap handle (graph identity + node id).
//
// Errors. Operator methods return a Value, not a StatusOr, so model code chains calls. The first
// error (a shape mismatch, a bad attribute, an undefined or foreign input) is recorded in the
// graph; that call and every later one return an undefined Value and add nothing. status() /
// Validate() return that first error, prefixed with the node it would have been:
// "node 3 (dense): dense: inner dimensions differ: X is [16, 64], W is [32, 48]".
//
// Shape inference is the operator library itself: each operator node is built once on fresh
// placeholders of its input shapes (ir/ops/*), so the graph accepts exactly what the library
// accepts and reports the library's messages. The same builder (BuildGraphOp) later composes the
// stages of a fused task (search/partition.h) and evaluates nodes one by one (RunGraphReference).
//
// Operator nodes keep their attributes as text (name → value, the registry's syntax: "stride=2",
// "perm=0,2,1,3"), so a node, and any subgraph, can be rebuilt from its printed form.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/host_buffer.h"
#include "ir/ops/conv.h"
#include "ir/ops/elementwise.h"
#include "ir/ops/linear.h"
#include "ir/ops/pool.h"
#include "ir/ops/reduce.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace tilesearch::ir {

/// How an operator's output depends on its inputs, TVM relay's OpPatternKind (same order and
/// values): the partitioner's fusion rules (search/partition.h) compare these.
enum class OpPattern : uint8_t {
  kElemWise = 0,         // out[i] depends on in[i] only, same shapes (relu, scale)
  kBroadcast = 1,        // elementwise with numpy broadcasting (add, mul)
  kInjective = 2,        // each output element reads one input element (transpose, reshape)
  kCommReduce = 3,       // a reduction, possibly with an elementwise tail (reduce_*, softmax,
                         // layernorm, rmsnorm)
  kOutEWiseFusable = 4,  // data reuse; elementwise consumers fuse into it (dense, matmul, conv2d,
                         // pooling)
  kOpaque = 8,           // never fused
};
/// "elemwise", "broadcast", "injective", "comm_reduce", "out_ewise_fusable", "opaque".
const char* OpPatternName(OpPattern pattern);

/// An operator the graph knows: its name, fusion pattern, input count and attribute names.
struct GraphOpInfo {
  std::string name;
  OpPattern pattern = OpPattern::kOpaque;
  int min_inputs = 0;
  int max_inputs = 0;
  std::vector<std::string>
      inputs;                      // documentation, e.g. {"X[M,K]", "W[N,K]", "bias[N] (optional)"}
  std::vector<std::string> attrs;  // accepted attribute names
};

/// Every graph operator, sorted by name.
const std::vector<GraphOpInfo>& GraphOps();

/// The operator `op`. Errors: kNotFound "unknown graph operator 'x'".
absl::StatusOr<const GraphOpInfo*> FindGraphOp(const std::string& op);

/// Builds the stages of operator `op` on `inputs` with attributes `attrs` (text values) and
/// returns its output tensor, named `name`; auxiliary stages get `name` plus a suffix (_acc, _max,
/// _expsum, _mean, _var, _ms, _sum). The stages are those of the library operator (ir/ops/*), plus
/// "reshape" (an injective copy, tag "reshape").
/// Errors (kInvalidArgument): unknown operator (kNotFound), wrong input count
/// ("dense: expected 2 to 3 inputs, got 1"), unknown attribute ("relu: unknown attribute 'axis'"),
/// unparsable attribute, and every error of the library operator.
absl::StatusOr<Tensor> BuildGraphOp(const std::string& op, const std::vector<Tensor>& inputs,
                                    const std::map<std::string, std::string>& attrs,
                                    const std::string& name);

/// Reshape (torch.reshape on a contiguous tensor): same elements in row-major order, new extents;
/// at most one extent may be -1 (inferred). One compute stage `name`, tag "reshape".
/// Errors: kInvalidArgument "reshape: cannot reshape [2, 3] (6 elements) into [4]", more than one
/// -1, an extent < 1 other than -1.
absl::StatusOr<Tensor> Reshape(const Tensor& x, const std::vector<int64_t>& shape,
                               const std::string& name = "reshape");

/// What a graph node is.
enum class NodeKind : uint8_t {
  kInput,  // fed at run time
  kParam,  // weights: fed once (an executor may fill them randomly)
  kOp,     // an operator applied to earlier nodes
};

/// One node of a Graph.
struct GraphNode {
  int id = -1;
  NodeKind kind = NodeKind::kOp;
  /// Inputs and params: the user's name. Operators: "<op>_<id>" (made unique in the graph).
  std::string name;
  /// Operators: the graph operator ("dense"); inputs "input", params "param".
  std::string op;
  /// Operators: the node ids of the operands, in the operator's input order.
  std::vector<int> inputs;
  /// Operators: attributes as text, as BuildGraphOp reads them.
  std::map<std::string, std::string> attrs;
  /// The output's extents (row-major) and element type.
  std::vector<int64_t> shape;
  ScalarType dtype = ScalarType::kFloat32;
  /// The operator's fusion pattern (kOpaque for inputs and params).
  OpPattern pattern = OpPattern::kOpaque;
};

class Graph;

/// Handle of one node of a Graph. Default-constructed: undefined.
class Value {
 public:
  Value() = default;
  bool defined() const { return id_ >= 0; }
  /// The node id (-1 when undefined).
  int id() const { return id_; }

 private:
  friend class Graph;
  Value(uint64_t graph_uid, int id) : graph_uid_(graph_uid), id_(id) {}
  uint64_t graph_uid_ = 0;
  int id_ = -1;
};

/// A DAG of operator nodes. Copyable: a copy keeps the identity, so Values of the original stay
/// valid in the copy. Not thread-safe.
class Graph {
 public:
  Graph();

  // ---- Leaves ----------------------------------------------------------------------------------

  /// A tensor fed at run time. Errors (recorded): a name that is not an identifier
  /// ([A-Za-z_][A-Za-z0-9_.]*) or is already a node's name, extents < 1, a rank above kMaxRank.
  Value Input(const std::string& name, const std::vector<int64_t>& shape,
              ScalarType dtype = ScalarType::kFloat32);
  /// Weights (constant during a run). Errors as Input.
  Value Param(const std::string& name, const std::vector<int64_t>& shape,
              ScalarType dtype = ScalarType::kFloat32);

  // ---- Operators (each: ir/ops semantics; errors recorded, see the file comment) ---------------

  /// Any operator of GraphOps() by name with text attributes: the generic form every method below
  /// calls. Errors: those of BuildGraphOp, and an undefined operand or one of another graph.
  Value Op(const std::string& op, const std::vector<Value>& inputs,
           const std::map<std::string, std::string>& attrs = {});

  /// activation(x·wᵀ + bias): x[M, K], w[N, K], bias[N] (optional) → [M, N] (ir::Dense).
  Value Dense(Value x, Value w, Value bias = Value(), Activation activation = Activation::kNone);
  /// a[M, K]·b[K, N] → [M, N] (ir::Matmul; transposes per `options`).
  Value MatMul(Value a, Value b, const MatmulOptions& options = {});
  /// a[B, M, K]·b[B, K, N] → [B, M, N] (ir::BatchMatmul).
  Value BatchMatMul(Value a, Value b, const MatmulOptions& options = {});
  /// x[N, C, H, W] ⋆ w[K, C/groups, R, S] → [N, K, OH, OW] (ir::Conv2dNchw).
  Value Conv2d(Value x, Value w, const Conv2dParams& params = {});
  /// Depthwise: x[N, C, H, W], w[C·m, 1, R, S] → [N, C·m, OH, OW] (ir::DepthwiseConv2dNchw).
  Value DepthwiseConv2d(Value x, Value w, const Conv2dParams& params = {});
  /// x[N, C, H, W] → [N, C, OH, OW] (ir::MaxPool2d / ir::AvgPool2d).
  Value MaxPool2d(Value x, const Pool2dParams& params);
  Value AvgPool2d(Value x, const Pool2dParams& params);

  /// Elementwise binary operators with numpy broadcasting (ir::Binary).
  Value Add(Value a, Value b);
  Value Sub(Value a, Value b);
  Value Mul(Value a, Value b);
  Value Div(Value a, Value b);
  Value Maximum(Value a, Value b);
  Value Minimum(Value a, Value b);
  /// Unary activations (ir::Unary with default parameters; Unary() takes any).
  Value Relu(Value x);
  Value Gelu(Value x);
  Value Sigmoid(Value x);
  Value Tanh(Value x);
  /// x·sigmoid(x) (SiLU, "swish").
  Value Silu(Value x);
  Value Unary(UnaryOp op, Value x, const UnaryParams& params = {});
  /// x·scale (ir::Scale).
  Value Scale(Value x, double scale);

  /// Softmax along `axis` (ir::Softmax).
  Value Softmax(Value x, int64_t axis = -1);
  /// Layer normalization over the trailing `normalized_ndim` axes (ir::LayerNorm).
  Value LayerNorm(Value x, Value gamma, Value beta, int normalized_ndim = 1, double eps = 1e-5);
  /// RMS normalization over the trailing `normalized_ndim` axes (ir::RmsNorm).
  Value RmsNorm(Value x, Value gamma, int normalized_ndim = 1, double eps = 1e-6);
  /// Reduction over `axes` (empty: all) (ir::ReduceAxes).
  Value Reduce(ReduceOp op, Value x, const std::vector<int64_t>& axes, bool keepdim = false);

  /// x.permute(perm) (ir::Transpose).
  Value Transpose(Value x, const std::vector<int64_t>& perm);
  /// x.reshape(shape), one extent may be -1 (ir::Reshape above).
  Value Reshape(Value x, const std::vector<int64_t>& shape);

  // ---- Outputs and checks ----------------------------------------------------------------------

  /// Marks `v` as a graph output (kept in this order; marking twice is a no-op). Errors
  /// (recorded): undefined or foreign value, an input or param ("output 'x' is an input; outputs
  /// must be operator nodes").
  void MarkOutput(Value v);

  /// The first recorded error, or OK.
  const absl::Status& status() const { return status_; }
  /// status(), then: kInvalidArgument "graph has no outputs (call MarkOutput)" when none.
  absl::Status Validate() const;

  // ---- Inspection ------------------------------------------------------------------------------

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  /// All nodes, by id (a topological order).
  const std::vector<GraphNode>& nodes() const { return nodes_; }
  /// Node `id` (CHECKs the range).
  const GraphNode& node(int id) const;
  /// The node of `v` (CHECKs that `v` is defined and belongs to this graph).
  const GraphNode& node(Value v) const;
  /// The output shape of `v`; empty for an undefined value.
  std::vector<int64_t> shape(Value v) const;
  /// Input and param node ids, in creation order.
  const std::vector<int>& leaves() const { return leaves_; }
  /// Output node ids, in MarkOutput order.
  const std::vector<int>& outputs() const { return outputs_; }
  /// Node ids that read node `id`, ascending, once each.
  std::vector<int> Consumers(int id) const;
  /// The Value of node `id` (CHECKs the range).
  Value value(int id) const;
  /// Node id by name, or -1.
  int FindNode(const std::string& name) const;

  /// One line per node: "%3 = dense(%0, %1) activation=relu : [16, 32] float32  # dense_3",
  /// inputs as "%0 = input x : [16, 64] float32", then "outputs: %5".
  std::string ToString() const;

 private:
  Value AddLeaf(NodeKind kind, const std::string& name, const std::vector<int64_t>& shape,
                ScalarType dtype);
  /// Records `status` (the first error only) and returns an undefined Value.
  Value Fail(absl::Status status);
  /// Checks that `v` is defined and belongs to this graph; `what` names it in messages.
  absl::Status CheckValue(Value v, const std::string& what) const;

  uint64_t uid_ = 0;
  std::vector<GraphNode> nodes_;
  std::vector<int> leaves_;
  std::vector<int> outputs_;
  std::set<std::string> names_;
  absl::Status status_;
};

/// The buffer `inputs` holds for leaf node `leaf` (an input or param, by its name), checked
/// against the node's shape and dtype. Errors (kInvalidArgument): "missing buffer for input 'x'",
/// "buffer for 'x' is [4] float32 but the graph says [4, 8] float32".
absl::StatusOr<HostBuffer> GraphLeafBuffer(const GraphNode& leaf, const BufferMap& inputs);

/// Random values in [-1, 1) for every input and param of `graph` (seeded; each leaf gets seed +
/// its position in leaves()), keyed by node name.
BufferMap MakeRandomGraphInputs(const Graph& graph, uint64_t seed);

/// Evaluates `graph` node by node with the reference interpreter (each operator node lowered
/// naively on its own and interpreted on its operands' buffers; ir/reference.h), in id order.
/// `inputs` holds every input and param by name. Returns the output nodes' buffers by node name
/// (every node's when `all_nodes`).
/// Errors: graph.Validate()'s, a missing or mis-shaped input ("missing buffer for input 'x'",
/// "buffer for 'x' has shape [4] but the graph says [4, 8]"), interpreter errors.
absl::StatusOr<BufferMap> RunGraphReference(const Graph& graph, const BufferMap& inputs,
                                            bool all_nodes = false);

}  // namespace tilesearch::ir
