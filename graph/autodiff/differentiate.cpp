#include "graph/autodiff/differentiate.h"

#include "graph/autodiff/grad_rules.h"
#include "graph/op_def.h"
#include "graph/rewriter.h"

namespace hjit {
namespace {

// The backward sweep over fwd (already copied into rw), from node `top` down: `grad` holds
// d(out)/d(value) per forward node as values of the new graph (-1: none), seeded by the caller,
// and gets the gradients of every node the seeds depend on.
void backward(Rewriter& rw, const Graph& fwd, int top, std::vector<int>& grad) {
  Graph& out = rw.out();
  Builder b(out);
  // A control flow op's results are sibling nodes: its rule runs once, at the first sibling (every
  // user of every sibling comes later, so all their gradients are in by then), with all of them.
  std::vector<int> group_first(fwd.nodes.size(), -1);
  for (int id = 0; id <= top; ++id) {
    const Node& n = fwd.nodes[size_t(id)];
    if (!has_trait(n.op, ControlFlow) || group_first[size_t(id)] >= 0) continue;
    for (int s = id; s <= top; ++s)
      if (group_first[size_t(s)] < 0 && same_control_flow(n, fwd.nodes[size_t(s)])) group_first[size_t(s)] = id;
  }
  for (int id = top; id >= 0; --id) {
    const Node& n = fwd.nodes[size_t(id)];
    if (has_trait(n.op, Source) || has_trait(n.op, NonDifferentiable)) continue;
    std::vector<int> result_grads;
    if (has_trait(n.op, ControlFlow)) {
      if (group_first[size_t(id)] != id) continue;
      result_grads.assign(size_t(control_flow_results(n)), -1);
      bool any = false;
      for (int s = id; s <= top; ++s)
        if (group_first[size_t(s)] == id && grad[size_t(s)] >= 0) {
          result_grads[size_t(fwd.nodes[size_t(s)].attrs.i("result"))] = grad[size_t(s)];
          any = true;
        }
      if (!any) continue;
    } else if (grad[size_t(id)] < 0) {
      continue;
    }
    std::vector<int> in = rw.mapped_inputs(id), dx(n.inputs.size(), -1);
    GradCtx ctx{b, n, in, rw.mapped(id), grad[size_t(id)], dx, result_grads};
    grad_rule_for(n.op)(ctx);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (dx[i] < 0) continue;
      const int target = n.inputs[i];
      if (!(out.type(dx[i]) == fwd.type(target)))
        throw InternalError(std::string("grad rule of ") + op_name(n.op) + " gave " + out.type(dx[i]).str() + " for an operand " +
                            fwd.type(target).str());
      grad[size_t(target)] = grad[size_t(target)] < 0 ? dx[i] : b.add(grad[size_t(target)], dx[i]);
    }
  }
}

Rewriter copy_all(const Graph& fwd) {
  Rewriter rw(fwd);
  for (size_t id = 0; id < fwd.nodes.size(); ++id) rw.copy(int(id));
  return rw;
}

}  // namespace

Graph differentiate(const Graph& fwd, int output, const std::vector<int>& wrt) {
  if (output < 0 || output >= int(fwd.outputs.size())) throw ValueError("grad: the function has no output " + std::to_string(output));
  const int loss = fwd.outputs[size_t(output)];
  const TensorType& lt = fwd.type(loss);
  if (lt.rank() != 0 || !is_floating(lt.dtype))
    throw ValueError("grad: the differentiated function must return a 0-d floating point tensor (a scalar loss), got " +
                     lt.str() + "; reduce it first, e.g. hjit::mean(...) or hjit::sum(...)");
  for (int w : wrt) {
    if (w < 0 || w >= int(fwd.inputs.size())) throw InternalError("grad: no input " + std::to_string(w));
    if (!is_floating(fwd.type(fwd.inputs[size_t(w)]).dtype))
      throw ValueError("grad: cannot differentiate with respect to a " + fwd.type(fwd.inputs[size_t(w)]).str() +
                       " input: only floating point tensors have gradients");
  }
  // The forward graph as it is, then the backward sweep from the loss down.
  Rewriter rw = copy_all(fwd);
  Graph& out = rw.out();
  std::vector<int> grad(fwd.nodes.size(), -1);
  grad[size_t(loss)] = Builder(out).like(rw.mapped(loss), 1.0);
  backward(rw, fwd, loss, grad);
  for (int o : fwd.outputs) out.outputs.push_back(rw.mapped(o));
  for (int w : wrt) {
    const int param = fwd.inputs[size_t(w)];
    out.outputs.push_back(grad[size_t(param)] >= 0 ? grad[size_t(param)] : out.add_full(fwd.type(param), 0.0));
  }
  for (const Update& u : fwd.updates) out.updates.push_back(Update{rw.mapped(u.target), rw.mapped(u.value)});
  return std::move(out);
}

std::vector<int> float_inputs(const Graph& g) {
  std::vector<int> out;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (is_floating(g.type(g.inputs[i]).dtype)) out.push_back(int(i));
  return out;
}

Graph vjp(const Graph& fwd) {
  if (!fwd.updates.empty()) throw InternalError("vjp of a graph with updates");
  Rewriter rw(fwd);
  std::vector<int> cotangent;
  for (int o : fwd.outputs) cotangent.push_back(rw.out().add_parameter(fwd.type(o)));
  for (size_t id = 0; id < fwd.nodes.size(); ++id) rw.copy(int(id));
  Graph& out = rw.out();
  Builder b(out);
  std::vector<int> grad(fwd.nodes.size(), -1);
  for (size_t k = 0; k < fwd.outputs.size(); ++k) {
    const int o = fwd.outputs[k];
    if (!is_floating(fwd.type(o).dtype)) continue;
    grad[size_t(o)] = grad[size_t(o)] < 0 ? cotangent[k] : b.add(grad[size_t(o)], cotangent[k]);
  }
  if (!fwd.nodes.empty()) backward(rw, fwd, int(fwd.nodes.size()) - 1, grad);
  for (int i : float_inputs(fwd)) {
    const int param = fwd.inputs[size_t(i)];
    out.outputs.push_back(grad[size_t(param)] >= 0 ? grad[size_t(param)] : out.add_full(fwd.type(param), 0.0));
  }
  out.name = fwd.name + "_vjp";
  return std::move(out);
}

}  // namespace hjit
