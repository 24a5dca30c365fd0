#include "frontend/tracing/replay.h"

#include <hjit/jit.h>

#include "frontend/transforms/control_flow_eval.h"
#include "frontend/tensor/dispatch.h"
#include "graph/op_def.h"

namespace hjit::detail {

std::vector<Tensor> replay(const Graph& g, const std::vector<Tensor>& inputs, const NodeObserver& after_node) {
  if (inputs.size() != g.inputs.size()) throw InternalError("replay: wrong number of inputs");
  std::vector<Tensor> v(g.nodes.size());
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    if (has_trait(n.op, ControlFlow)) {  // every result of the op at once, at its first node
      if (v[id].impl()) continue;
      std::vector<Tensor> in;
      for (int i : n.inputs) in.push_back(v[size_t(i)]);
      const std::vector<Tensor> results = apply_control_flow(n.op, in, n.attrs);
      for (size_t s = id; s < g.nodes.size(); ++s)
        if (same_control_flow(n, g.nodes[s])) v[s] = results[size_t(g.nodes[s].attrs.i("result"))];
      if (after_node) after_node(id, v);
      continue;
    }
    switch (n.op) {
      case OpKind::Parameter: v[id] = inputs[size_t(n.attrs.i("index"))]; break;
      case OpKind::Constant: {
        const ConstData& c = g.constants[size_t(n.constant)];
        v[id] = Tensor::from_bytes(c.data, c.nbytes, n.type.shape, n.type.dtype);
        break;
      }
      // Inside a trace, recorded as nodes: a full of an activation's shape (the gradient of a mean)
      // is not filled in memory only to be traced as a full.
      case OpKind::Full:
      case OpKind::Iota: v[id] = apply_source(n.op, n.type, n.attrs); break;
      default: {
        std::vector<Tensor> in;
        for (int i : n.inputs) in.push_back(v[size_t(i)]);
        v[id] = apply(n.op, in, n.attrs);
      }
    }
    if (after_node) after_node(id, v);
  }
  for (const Update& u : g.updates) {
    Tensor target = inputs[size_t(g.node(u.target).attrs.i("index"))];
    target.assign(v[size_t(u.value)]);
  }
  std::vector<Tensor> out;
  for (int o : g.outputs) out.push_back(v[size_t(o)]);
  return out;
}

}  // namespace hjit::detail

namespace hjit {

std::vector<Tensor> eval_graph(const Graph& g, const std::vector<Tensor>& inputs) {
  if (inputs.size() != g.inputs.size())
    throw ValueError("hjit::eval_graph: the graph '" + g.name + "' takes " + std::to_string(g.inputs.size()) + " inputs, got " +
                     std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = g.type(g.inputs[i]);
    if (!inputs[i].impl()) throw ValueError("hjit::eval_graph: input " + std::to_string(i) + " is an empty Tensor handle");
    if (inputs[i].dtype() != want.dtype)
      throw DTypeError("hjit::eval_graph: input " + std::to_string(i) + " is " + dtype_name(inputs[i].dtype()) +
                       ", the graph takes " + want.str());
    if (inputs[i].shape() != want.shape)
      throw ShapeError("hjit::eval_graph: input " + std::to_string(i) + " has shape " + shape_str(inputs[i].shape()) +
                       ", the graph takes " + want.str());
  }
  return detail::replay(g, inputs);
}

}  // namespace hjit
