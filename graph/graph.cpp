#include <hjit/graph.h>

#include "graph/op_def.h"

namespace hjit {

std::string TensorType::str() const { return std::string(dtype_name(dtype)) + shape_str(shape); }

Attrs::Attrs(std::initializer_list<Item> items) {
  for (const Item& it : items) set(it.first, it.second);
}

Attrs& Attrs::set(const std::string& name, AttrValue value) {
  for (Item& it : items_)
    if (it.first == name) {
      it.second = std::move(value);
      return *this;
    }
  items_.emplace_back(name, std::move(value));
  return *this;
}

bool Attrs::has(std::string_view name) const {
  for (const Item& it : items_)
    if (it.first == name) return true;
  return false;
}

const AttrValue& Attrs::get(std::string_view name) const {
  for (const Item& it : items_)
    if (it.first == name) return it.second;
  throw InternalError("missing attribute '" + std::string(name) + "'");
}

namespace {
template <class T>
const T& typed(const Attrs& a, std::string_view name, const char* what) {
  const AttrValue& v = a.get(name);
  if (const T* p = std::get_if<T>(&v)) return *p;
  throw ValueError("attribute '" + std::string(name) + "' must be " + what);
}
}  // namespace

int64_t Attrs::i(std::string_view name) const { return typed<int64_t>(*this, name, "an integer"); }
double Attrs::f(std::string_view name) const {
  const AttrValue& v = get(name);
  if (const int64_t* p = std::get_if<int64_t>(&v)) return double(*p);
  return typed<double>(*this, name, "a number");
}
const std::vector<int64_t>& Attrs::ints(std::string_view name) const {
  return typed<std::vector<int64_t>>(*this, name, "a list of integers");
}
DType Attrs::dtype(std::string_view name) const { return typed<DType>(*this, name, "a dtype"); }
const std::string& Attrs::s(std::string_view name) const { return typed<std::string>(*this, name, "text"); }
const Graph& Attrs::graph(std::string_view name) const {
  const auto& g = typed<std::shared_ptr<const Graph>>(*this, name, "a graph");
  if (!g) throw ValueError("attribute '" + std::string(name) + "' is an empty graph");
  return *g;
}

int Graph::add(Node node) {
  std::vector<const TensorType*> in;
  in.reserve(node.inputs.size());
  for (int id : node.inputs) {
    if (id < 0 || id >= int(nodes.size()))
      throw InternalError(std::string(op_name(node.op)) + ": operand %" + std::to_string(id) +
                          " is not defined before its use");
    in.push_back(&nodes[size_t(id)].type);
  }
  bool source = has_trait(node.op, Source);
  TensorType t = infer_type(node.op, in, node.attrs, source ? &node.type : nullptr);
  node.type = std::move(t);
  nodes.push_back(std::move(node));
  return int(nodes.size()) - 1;
}

int Graph::add_op(OpKind op, std::vector<int> operands, Attrs attrs) {
  Node n;
  n.op = op;
  n.inputs = std::move(operands);
  n.attrs = std::move(attrs);
  return add(std::move(n));
}

int Graph::add_parameter(TensorType type, bool captured) {
  Node n;
  n.op = OpKind::Parameter;
  n.type = std::move(type);
  n.attrs.set("index", int64_t(inputs.size()));
  if (captured) n.attrs.set("captured", int64_t(1));
  int id = add(std::move(n));
  inputs.push_back(id);
  return id;
}

int Graph::add_full(TensorType type, double value) {
  Node n;
  n.op = OpKind::Full;
  n.type = std::move(type);
  n.attrs.set("value", value);
  return add(std::move(n));
}

int Graph::add_constant(TensorType type, ConstData data) {
  if (data.nbytes != size_t(type.numel()) * size_t(dtype_size(type.dtype)))
    throw InternalError("constant " + type.str() + " given " + std::to_string(data.nbytes) + " bytes");
  Node n;
  n.op = OpKind::Constant;
  n.type = std::move(type);
  n.constant = int(constants.size());
  constants.push_back(std::move(data));
  return add(std::move(n));
}

bool Graph::is_captured(int id) const {
  const Attrs& a = node(id).attrs;
  return a.has("captured") && a.i("captured") != 0;
}

int Graph::num_captured() const {
  int n = 0;
  for (int id : inputs) n += is_captured(id);
  return n;
}

}  // namespace hjit
