#include "graph/autodiff/differentiate.h"

#include "graph/autodiff/grad_rules.h"
#include "graph/op_def.h"
#include "graph/rewriter.h"

namespace hjit {

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
  Rewriter rw(fwd);
  for (size_t id = 0; id < fwd.nodes.size(); ++id) rw.copy(int(id));
  Graph& out = rw.out();
  Builder b(out);
  std::vector<int> grad(fwd.nodes.size(), -1);
  grad[size_t(loss)] = b.like(rw.mapped(loss), 1.0);
  for (int id = loss; id >= 0; --id) {
    const Node& n = fwd.nodes[size_t(id)];
    if (grad[size_t(id)] < 0 || has_trait(n.op, Source) || has_trait(n.op, NonDifferentiable)) continue;
    std::vector<int> in = rw.mapped_inputs(id), dx(n.inputs.size(), -1);
    GradCtx ctx{b, n, in, rw.mapped(id), grad[size_t(id)], dx};
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
  for (int o : fwd.outputs) out.outputs.push_back(rw.mapped(o));
  for (int w : wrt) {
    const int param = fwd.inputs[size_t(w)];
    out.outputs.push_back(grad[size_t(param)] >= 0 ? grad[size_t(param)] : out.add_full(fwd.type(param), 0.0));
  }
  for (const Update& u : fwd.updates) out.updates.push_back(Update{rw.mapped(u.target), rw.mapped(u.value)});
  return std::move(out);
}

}  // namespace hjit
