#include "graph/passes/verify.h"

#include "graph/op_def.h"

namespace hjit {

void verify(const Graph& g, const std::string& after) {
  auto fail = [&](const std::string& what) {
    std::string listing;
    try {
      listing = g.str();
    } catch (const std::exception&) {
      listing = "(the graph is too broken to print)";
    }
    throw InternalError("graph verification failed after " + after + ": " + what + "\n" + listing);
  };
  int n = int(g.nodes.size());
  auto valid = [&](int id) { return id >= 0 && id < n; };
  for (int id = 0; id < n; ++id) {
    const Node& node = g.nodes[size_t(id)];
    std::vector<const TensorType*> in;
    for (int o : node.inputs) {
      if (!valid(o) || o >= id) fail("node %" + std::to_string(id) + " uses %" + std::to_string(o) + " before it is defined");
      in.push_back(&g.nodes[size_t(o)].type);
    }
    TensorType t;
    try {
      t = infer_type(node.op, in, node.attrs, &node.type);
    } catch (const Error& e) {
      fail("node %" + std::to_string(id) + " (" + op_name(node.op) + "): " + e.what());
    }
    if (!(t == node.type))
      fail("node %" + std::to_string(id) + " (" + op_name(node.op) + ") has type " + node.type.str() + " but infers " + t.str());
    for (const auto& [key, value] : node.attrs.items())
      if (const auto* sub = std::get_if<std::shared_ptr<const Graph>>(&value)) {
        if (!*sub) fail("node %" + std::to_string(id) + " has an empty graph '" + key + "'");
        verify(**sub, after + " (in '" + key + "' of node %" + std::to_string(id) + ")");
      }
    if (node.op == OpKind::Constant) {
      if (node.constant < 0 || node.constant >= int(g.constants.size())) fail("constant %" + std::to_string(id) + " has no data");
      if (g.constants[size_t(node.constant)].nbytes != size_t(t.numel()) * size_t(dtype_size(t.dtype)))
        fail("constant %" + std::to_string(id) + " has the wrong size");
    }
  }
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    int id = g.inputs[i];
    if (!valid(id) || g.node(id).op != OpKind::Parameter || g.node(id).attrs.i("index") != int64_t(i))
      fail("input " + std::to_string(i) + " is not the parameter of that index");
  }
  int params = 0;
  for (const Node& node : g.nodes) params += node.op == OpKind::Parameter;
  if (params != int(g.inputs.size())) fail("a parameter is missing from the inputs");
  for (int o : g.outputs)
    if (!valid(o)) fail("output %" + std::to_string(o) + " does not exist");
  for (const Update& u : g.updates) {
    if (!valid(u.target) || !valid(u.value)) fail("an update names a value that does not exist");
    const Node& t = g.node(u.target);
    if (t.op != OpKind::Parameter) fail("an update targets %" + std::to_string(u.target) + ", which is not an input");
    if (!(t.type == g.type(u.value)))
      fail("update of " + t.type.str() + " with a value of type " + g.type(u.value).str());
  }
}

}  // namespace hjit
