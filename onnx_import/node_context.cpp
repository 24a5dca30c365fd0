#include "onnx_import/node_context.h"

#include "onnx_import/interpreter.h"
#include "onnx_import/model_file.h"
#include "onnx_import/tensor_proto.h"

namespace hjit::onnx_import {

using ::onnx::AttributeProto;

NodeContext::NodeContext(const ::onnx::NodeProto& node, std::vector<std::optional<Value>> inputs, const Interpreter& interpreter)
    : node_(node), inputs_(std::move(inputs)), interpreter_(interpreter) {}

int64_t NodeContext::opset() const { return interpreter_.opset(); }

std::string NodeContext::where() const {
  return "node '" + (node_.name().empty() ? (node_.output_size() ? node_.output(0) : std::string("?")) : node_.name()) + "' (" +
         node_.op_type() + ")";
}

void NodeContext::require_fits(const Shape& shape, DType dtype) const {
  const int64_t model_limit = interpreter_.limits().max_bytes, limit = byte_limit(model_limit);
  int64_t bytes = dtype_size(dtype);
  bool overflows = false;
  for (int64_t d : shape) {
    if (d < 0) fail<ShapeError>("would make a tensor of negative size " + shape_str(shape));
    overflows = overflows || __builtin_mul_overflow(bytes, d, &bytes);
  }
  if (overflows || bytes > limit)
    fail<ResourceError>("would make " + std::string(dtype_name(dtype)) + shape_str(shape) + " (" +
                        (overflows ? std::string("more bytes than an int64 counts") : std::to_string(bytes) + " bytes") +
                        "), more than the " + std::to_string(limit) + " bytes " +
                        (limit == model_limit ? "LoadOptions::max_bytes allows" : "of hjit's memory limit (hjit::set_memory_limit, HJIT_MEMORY_LIMIT_MB)"));
}

const Limits& NodeContext::limits() const { return interpreter_.limits(); }

void NodeContext::require_trips(int64_t trips) const {
  if (trips > interpreter_.limits().max_loop_trips)
    fail<ResourceError>("would run " + std::to_string(trips) + " trips while the model is converted, more than LoadOptions::max_loop_trips (" +
                        std::to_string(interpreter_.limits().max_loop_trips) + ")");
}

const Value& NodeContext::value(size_t k) const {
  if (!has_input(k)) fail("needs input " + std::to_string(k) + ", which the model does not give");
  return *inputs_[k];
}

const Tensor& NodeContext::input(size_t k) const {
  const Value& v = value(k);
  if (!v.is_tensor())
    fail("input " + std::to_string(k) + " ('" + node_.input(int(k)) + "') is " + v.str() + ", where a tensor is expected");
  return v.tensor();
}

const std::vector<Tensor>& NodeContext::sequence(size_t k) const {
  const Value& v = value(k);
  if (!v.is_sequence())
    fail("input " + std::to_string(k) + " ('" + node_.input(int(k)) + "') is " + v.str() + ", where a sequence is expected");
  return v.items();
}

std::optional<Tensor> NodeContext::optional_input(size_t k) const {
  return has_input(k) ? std::optional<Tensor>(input(k)) : std::nullopt;
}

template <class T>
std::vector<T> NodeContext::read_known(size_t k) const {
  const Tensor& t = input(k);
  try {
    return t.to_vector<T>();  // a traced value: a graph break under JitOptions::fullgraph = false
  } catch (const ConcretizationError&) {
    fail("input " + std::to_string(k) + " ('" + node_.input(int(k)) +
         "') " + std::string(kMustBeKnown) + " (an initializer, a Constant, or computed from shapes), "
         "but it is computed from the model's inputs (a module made with LoadOptions::graph_breaks, or a Model "
         "run in hjit::jit with fullgraph = false, computes it in a graph break; or fix the input it comes from: "
         "Model::module_for's `fixed`)");
  }
}

std::vector<int64_t> NodeContext::input_ints(size_t k) const { return read_known<int64_t>(k); }
std::vector<double> NodeContext::input_doubles(size_t k) const { return read_known<double>(k); }

const AttributeProto* NodeContext::find(const std::string& name) const {
  for (const AttributeProto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t NodeContext::attr_int(const std::string& name, int64_t fallback) const {
  const AttributeProto* a = find(name);
  return a ? a->i() : fallback;
}

int64_t NodeContext::attr_int(const std::string& name) const {
  const AttributeProto* a = find(name);
  if (!a) fail("needs the attribute '" + name + "'");
  return a->i();
}

double NodeContext::attr_float(const std::string& name, double fallback) const {
  const AttributeProto* a = find(name);
  return a ? double(a->f()) : fallback;
}

std::string NodeContext::attr_string(const std::string& name, const std::string& fallback) const {
  const AttributeProto* a = find(name);
  return a ? a->s() : fallback;
}

std::vector<int64_t> NodeContext::attr_ints(const std::string& name, std::vector<int64_t> fallback) const {
  const AttributeProto* a = find(name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}

std::vector<double> NodeContext::attr_floats(const std::string& name, std::vector<double> fallback) const {
  const AttributeProto* a = find(name);
  return a ? std::vector<double>(a->floats().begin(), a->floats().end()) : fallback;
}

Tensor NodeContext::attr_tensor(const std::string& name) const {
  const AttributeProto* a = find(name);
  if (!a || !a->has_t()) fail("needs the tensor attribute '" + name + "'");
  return to_tensor(a->t(), "hjit::onnx: " + where() + " attribute '" + name + "'");
}

const ::onnx::GraphProto& NodeContext::attr_graph(const std::string& name) const {
  const AttributeProto* a = find(name);
  if (!a || !a->has_g()) fail("needs the graph attribute '" + name + "'");
  return a->g();
}

int NodeContext::axis(int64_t axis, int64_t rank) const {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    fail("axis " + std::to_string(axis) + " is out of range for a tensor of rank " + std::to_string(rank));
  return int(axis < 0 ? axis + rank : axis);
}

std::vector<Value> NodeContext::run_subgraph_values(const ::onnx::GraphProto& graph, const std::vector<Value>& inputs) const {
  if (size_t(graph.input_size()) != inputs.size())
    fail("its subgraph '" + graph.name() + "' takes " + std::to_string(graph.input_size()) + " inputs, given " +
         std::to_string(inputs.size()));
  const Scope scope = interpreter_.visible();
  Interpreter sub(interpreter_.opset(), &scope, interpreter_.limits());
  Scope bound;
  for (size_t i = 0; i < inputs.size(); ++i) bound[graph.input(int(i)).name()] = inputs[i];
  return sub.run(graph, bound);
}

std::optional<Dequantized> NodeContext::dequantized_input(size_t k) const {
  if (k >= size_t(node_.input_size()) || node_.input(int(k)).empty()) return std::nullopt;
  return interpreter_.dequantized(node_.input(int(k)));
}

Tensor Factored::expanded() const {
  if (divided) return value / scale;
  return offset ? value * scale + *offset : value * scale;
}

void NodeContext::note_factored(size_t k, Factored f) const {
  if (k < size_t(node_.output_size()) && !node_.output(int(k)).empty()) interpreter_.note_factored(node_.output(int(k)), std::move(f));
}

std::optional<Factored> NodeContext::factored_input(size_t k) const {
  if (k >= size_t(node_.input_size()) || node_.input(int(k)).empty()) return std::nullopt;
  return interpreter_.factored(node_.input(int(k)));
}

Value NodeContext::recompute(const std::string& name, const std::map<std::string, Value>& replaced) const {
  return interpreter_.recompute(name, replaced);
}

std::vector<Tensor> NodeContext::run_subgraph(const ::onnx::GraphProto& graph, const std::vector<Tensor>& inputs) const {
  std::vector<Tensor> outs;
  for (const Value& v : run_subgraph_values(graph, std::vector<Value>(inputs.begin(), inputs.end()))) {
    if (!v.is_tensor())
      fail("its subgraph '" + graph.name() + "' gives " + v.str() + " where a tensor is expected (a sequence or a none " +
           "needs the loop's trip count or the branch's condition known when the model is converted)");
    outs.push_back(v.tensor());
  }
  return outs;
}

}  // namespace hjit::onnx_import
