// What a converter sees of one ONNX node: its inputs as hjit tensors (traced or concrete) or as
// values (sequences, nones), its attributes with their defaults, the opset, and errors that name
// the node.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <hjit/error.h>
#include <hjit/onnx.h>
#include <hjit/ops.h>

#include "onnx/onnx_pb.h"

namespace hjit::onnx_import {

// What NodeContext::read_known's refusal says: a value the conversion reads (a shape, axes, a
// count) comes from the model's inputs. Model::module_for answers it by running the model in
// segments between graph breaks; the Loop converter by unrolling.
inline constexpr const char* kMustBeKnown = "must be known when the model is converted";

class Interpreter;
struct Limits;
using onnx::Value;

// What a DequantizeLinear node read: the quantized values, their scale, zero point and axis.
struct Dequantized {
  Tensor x, scale;
  std::optional<Tensor> zero_point;
  int64_t axis = 1;
};

// A value its node's converter computed as `value * scale + offset` or as `value / scale`, the scale
// small beside it (a scalar, or one per row or per column): an integer sum's dequantization, a
// softmax's row sums. A QuantizeLinear of it divides the scale alone by its own scale, once, where
// a literal one would divide every element: the one multiplier an integer kernel requantizes with
// (ONNX's QLinearMatMul and QLinearConv, ONNX Runtime's fused QDQ groups), rounding one step apart
// from the literal quotient at most, where the two land on either side of a half.
struct Factored {
  Tensor value, scale;
  std::optional<Tensor> offset;  // (value * scale only)
  bool divided = false;
  Tensor expanded() const;
};

class NodeContext {
 public:
  NodeContext(const ::onnx::NodeProto& node, std::vector<std::optional<Value>> inputs, const Interpreter& interpreter);

  const ::onnx::NodeProto& proto() const { return node_; }
  int64_t opset() const;
  // "node 'conv1' (Conv)": how every error about this node begins.
  std::string where() const;

  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return size_t(node_.output_size()); }
  bool has_input(size_t k) const { return k < inputs_.size() && inputs_[k].has_value(); }
  const Tensor& input(size_t k) const;                   // ValueError when absent or not a tensor
  std::optional<Tensor> optional_input(size_t k) const;  // nullopt when absent or ""
  const Value& value(size_t k) const;                    // any kind; ValueError when absent
  const std::vector<Tensor>& sequence(size_t k) const;   // ValueError unless a sequence
  // The values of an input that must be known when the model is converted (a shape, axes, pads):
  // an initializer, a Constant, or computed from those and from static shapes; or, inside
  // hjit::jit with fullgraph = false, computed in a graph break.
  std::vector<int64_t> input_ints(size_t k) const;
  std::vector<double> input_doubles(size_t k) const;

  bool has_attr(const std::string& name) const { return find(name) != nullptr; }
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  int64_t attr_int(const std::string& name) const;  // required
  double attr_float(const std::string& name, double fallback) const;
  std::string attr_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::vector<double> attr_floats(const std::string& name, std::vector<double> fallback = {}) const;
  Tensor attr_tensor(const std::string& name) const;
  const ::onnx::GraphProto& attr_graph(const std::string& name) const;

  // Refuses a tensor of this type that would take more than the model may (LoadOptions::max_bytes,
  // hjit's memory limit): a ResourceError naming the node, raised before anything that size is
  // made (an index list, a tensor).
  void require_fits(const Shape& shape, DType dtype) const;
  // Refuses a loop of more trips than LoadOptions::max_loop_trips.
  void require_trips(int64_t trips) const;
  const Limits& limits() const;

  // An axis attribute or value in [-rank, rank), made non-negative.
  int axis(int64_t axis, int64_t rank) const;

  // Runs a subgraph (If, Loop, Scan bodies) on these inputs; it sees this node's scope.
  std::vector<Tensor> run_subgraph(const ::onnx::GraphProto& graph, const std::vector<Tensor>& inputs) const;
  std::vector<Value> run_subgraph_values(const ::onnx::GraphProto& graph, const std::vector<Value>& inputs) const;

  // Where input k is the output of a DequantizeLinear node of this graph: what that node read (for
  // the QDQ patterns that compute on the quantized values, as ONNX Runtime's QDQ transformer).
  std::optional<Dequantized> dequantized_input(size_t k) const;
  // Notes that this node's output k is `f` expanded (see Factored), for the nodes after it.
  void note_factored(size_t k, Factored f) const;
  // Where input k is an output a converter noted so, the factors; nullopt otherwise.
  std::optional<Factored> factored_input(size_t k) const;

  // The value `name` of this node's graph computed again with `replaced` bound (Gradient).
  Value recompute(const std::string& name, const std::map<std::string, Value>& replaced) const;

  template <class E = ValueError>
  [[noreturn]] void fail(const std::string& message) const {
    throw E("hjit::onnx: " + where() + ": " + message);
  }

 private:
  const ::onnx::AttributeProto* find(const std::string& name) const;
  template <class T>
  std::vector<T> read_known(size_t k) const;
  const ::onnx::NodeProto& node_;
  std::vector<std::optional<Value>> inputs_;
  const Interpreter& interpreter_;
};

using Converter = std::vector<Tensor> (*)(const NodeContext&);
// A converter of ops that take or give sequences and nones (and of If, Loop and Identity, whose
// values may be either), tried before the tensor converters.
using ValueConverter = std::vector<Value> (*)(const NodeContext&);

// The converter of an op type of the default domain; null for an op hjit does not convert.
Converter find_converter(const std::string& op_type);
// The same for ONNX's preview training domain (the optimizers).
Converter find_training_converter(const std::string& op_type);
ValueConverter find_value_converter(const std::string& op_type);
std::vector<std::string> converted_ops();

}  // namespace hjit::onnx_import
