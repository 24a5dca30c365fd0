#include "graph/passes/sink_transposes.h"

#include "graph/op_def.h"
#include "graph/rewriter.h"

namespace hjit {
namespace {

bool movable_elementwise(OpKind op) {
  return has_trait(op, Elementwise) && op != OpKind::CheckIndex;
}

bool moves_innermost(const Node& n) {
  const std::vector<int64_t>& perm = n.attrs.ints("perm");
  return !perm.empty() && perm.back() != int64_t(perm.size()) - 1;
}

bool narrows_to_bytes(const Graph& g, const Node& n) {
  return n.op == OpKind::Cast && dtype_size(n.type.dtype) == 1 && !is_floating(n.type.dtype) && n.type.dtype != DType::Bool &&
         dtype_size(g.type(n.inputs[0]).dtype) > 1;
}

// Element-wise nodes from which element-wise work alone reaches a conversion to one byte.
std::vector<bool> quantized_ahead(const Graph& g) {
  std::vector<std::vector<int>> readers(g.nodes.size());
  for (size_t id = 0; id < g.nodes.size(); ++id)
    for (int in : g.nodes[id].inputs) readers[size_t(in)].push_back(int(id));
  std::vector<bool> ahead(g.nodes.size(), false);
  for (size_t id = g.nodes.size(); id-- > 0;) {
    const Node& n = g.nodes[id];
    if (!movable_elementwise(n.op)) continue;
    ahead[id] = narrows_to_bytes(g, n);
    for (int r : readers[id]) ahead[id] = ahead[id] || ahead[size_t(r)];
  }
  return ahead;
}

}  // namespace

Graph sink_transposes(const Graph& g) {
  Rewriter rw(g);
  Graph& out = rw.out();
  const std::vector<bool> ahead = quantized_ahead(g);
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    if (n.op == OpKind::Parameter) continue;
    if (!ahead[id]) {
      rw.copy(int(id));
      continue;
    }
    // Every operand a transpose by the same permutation to this node's shape, or one element.
    std::vector<int> in = rw.mapped_inputs(int(id));
    const std::vector<int64_t>* perm = nullptr;
    bool movable = true;
    int transposed_bytes = 0;  // an element of each operand transposed now
    for (int& x : in) {
      const Node& o = out.node(x);
      if (out.type(x).numel() == 1) continue;
      const bool same_transpose = o.op == OpKind::Transpose && moves_innermost(o) && out.type(x).shape == n.type.shape &&
                                  (!perm || *perm == o.attrs.ints("perm"));
      if (!same_transpose) {
        movable = false;
        break;
      }
      perm = &o.attrs.ints("perm");
      transposed_bytes += dtype_size(o.type.dtype);
      x = o.inputs[0];
    }
    if (!movable || !perm || transposed_bytes < dtype_size(n.type.dtype)) {
      rw.copy(int(id));
      continue;
    }
    const std::vector<int64_t> p = *perm;  // (out's nodes move as it grows)
    const int moved = out.add_op(n.op, in, n.attrs);
    rw.map(int(id), out.add_op(OpKind::Transpose, {moved}, Attrs{{"perm", p}}));
  }
  return rw.finish();
}

}  // namespace hjit
