// The IR: a Graph is a list of Nodes in SSA form, topologically ordered. A node is one generic
// record (op, operands, attributes, output type); its id is its index and names its single output
// value. Printed, a graph reads like a jaxpr and states every value's type:
//
//   { lambda a:f32[784,256] ; b:f32[64,784]. let
//       c:f32[64,256] = matmul b a
//       d:f32[64,256] = max c 0.0:f32
//     in (d) }
//
// Inputs before ';' are captured tensors (read at every call), after it the traced arguments.
// Graph::parse reads the same text back (with constant data when written by to_text()).
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <hjit/dtype.h>
#include <hjit/error.h>
#include <hjit/op_list.h>

namespace hjit {

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  int rank() const { return int(shape.size()); }
  int64_t numel() const { return shape_numel(shape); }
  std::string str() const;  // "f32[2,3]"
  bool operator==(const TensorType&) const = default;
};

class Graph;

// Attribute values: integers (and booleans), floating point numbers, integer lists, dtypes, text
// (what an error raised by the op at run time says it was checking), and graphs: the branches and
// loop bodies of control flow ops, as jaxpr's closed sub-jaxprs (shared, never changed once made).
using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, DType, std::string, std::shared_ptr<const Graph>>;

class Attrs {
 public:
  using Item = std::pair<std::string, AttrValue>;
  Attrs() = default;
  Attrs(std::initializer_list<Item> items);

  Attrs& set(const std::string& name, AttrValue value);
  bool has(std::string_view name) const;
  const AttrValue& get(std::string_view name) const;  // InternalError if absent
  int64_t i(std::string_view name) const;
  double f(std::string_view name) const;
  const std::vector<int64_t>& ints(std::string_view name) const;
  DType dtype(std::string_view name) const;
  const std::string& s(std::string_view name) const;
  const Graph& graph(std::string_view name) const;

  const std::vector<Item>& items() const { return items_; }
  bool operator==(const Attrs&) const = default;

 private:
  std::vector<Item> items_;
};

// Bytes of a constant, kept alive by owner. The graph neither knows nor cares who owns them.
struct ConstData {
  std::shared_ptr<const void> owner;
  const void* data = nullptr;
  size_t nbytes = 0;
};

struct Node {
  OpKind op = OpKind::Parameter;
  std::vector<int> inputs;
  Attrs attrs;
  TensorType type;
  int constant = -1;  // Constant nodes: index into Graph::constants
};

// After a call, the input `target` (a Parameter node id) takes the value of node `value`: this is
// how Tensor::assign inside a traced function reaches model parameters (captured inputs) and the
// caller's tensors (arguments).
struct Update {
  int target = -1;
  int value = -1;
  bool operator==(const Update&) const = default;
};

class Graph {
 public:
  std::string name;
  std::vector<Node> nodes;
  std::vector<int> inputs;  // Parameter node ids in call order
  std::vector<int> outputs;
  std::vector<Update> updates;
  std::vector<ConstData> constants;

  // Checks operands, attributes and types with the op table and appends the node. For source ops
  // node.type is the declared type; for every other op it is inferred (and a mismatch with a
  // non-empty declared type is a ShapeError). Returns the new node's id.
  int add(Node node);

  // Convenience builders used by the tracer, the passes and the tests.
  int add_op(OpKind op, std::vector<int> inputs, Attrs attrs = {});
  int add_parameter(TensorType type, bool captured = false);
  int add_full(TensorType type, double value);
  int add_constant(TensorType type, ConstData data);

  const Node& node(int id) const { return nodes.at(size_t(id)); }
  const TensorType& type(int id) const { return nodes.at(size_t(id)).type; }
  bool is_captured(int id) const;  // an input that is a captured tensor, not a traced argument
  int num_captured() const;

  std::string str() const;      // for people: large constants are elided
  std::string to_text() const;  // complete: parse(to_text()) rebuilds the same graph
  std::string to_dot() const;   // Graphviz
  static Graph parse(const std::string& text);
  void save(const std::string& path) const;
  static Graph load(const std::string& path);
};

}  // namespace hjit
