// One gradient rule per op, keyed by the op list like every other per-op table: given the
// gradient of a node's output, the rule adds nodes for the gradients of its operands.
// Non-differentiable ops (comparisons, argmax, integer casts, ...) have rules that say so.
#pragma once
#include <vector>

#include "graph/autodiff/builder.h"

namespace hjit {

struct GradCtx {
  Builder& b;
  const Node& node;            // the forward node
  const std::vector<int>& in;  // its operands, as values of the gradient graph
  int out;                     // its value in the gradient graph
  int g;                       // d(loss)/d(out)
  std::vector<int>& dx;        // set dx[i] to d(loss)/d(in[i]); left at -1: no gradient flows
  // Control flow ops: the gradient of each result of the op (-1: none), `g` unused.
  const std::vector<int>& result_grads;
};

using GradRule = void (*)(GradCtx&);

namespace grad_rules {
#define HJIT_DECLARE_GRAD(kind, name, arity, traits, attrs, infer, sched) void kind(GradCtx& c);
HJIT_OPS(HJIT_DECLARE_GRAD)
#undef HJIT_DECLARE_GRAD
}  // namespace grad_rules

GradRule grad_rule_for(OpKind op);

}  // namespace hjit
