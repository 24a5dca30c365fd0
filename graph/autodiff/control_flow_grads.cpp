// Gradient rules of the control flow ops. A branch or loop body is differentiated as a graph of
// its own (vjp(), which recomputes the body's forward values inside), and the gradient is the same
// control flow op over those vjp graphs: a cond of the branches' vjps, a scan run the other way.
#include <memory>

#include "graph/autodiff/differentiate.h"
#include "graph/autodiff/grad_rules.h"
#include "graph/op_def.h"
#include "graph/passes/optimize.h"
#include "graph/rewriter.h"

namespace hjit::grad_rules {
namespace {

using GraphRef = std::shared_ptr<const Graph>;

// A graph made here, cleaned (dead forward values of a vjp, unused cotangents) as traced ones are.
GraphRef made(const Graph& g) { return std::make_shared<const Graph>(optimize(g, nullptr)); }

int zeros(Builder& b, const TensorType& t) { return b.graph().add_full(t, 0.0); }

// The cotangent of result k: its gradient, or zeros where the loss does not depend on it.
int cotangent(GradCtx& c, size_t k, const TensorType& t) {
  return c.result_grads[k] >= 0 ? c.result_grads[k] : zeros(c.b, t);
}

std::vector<int> results(Builder& b, OpKind op, const std::vector<int>& operands, const Attrs& attrs, size_t count) {
  std::vector<int> out;
  for (size_t r = 0; r < count; ++r) out.push_back(b.op(op, operands, Attrs(attrs).set("result", int64_t(r))));
  return out;
}

}  // namespace

void While(GradCtx&) {
  throw ValueError("while_loop is not reverse-differentiable: its trip count is known only when it runs, so the "
                   "steps to go back through are not known when the gradient is built (as in JAX). Differentiate "
                   "through fori_loop with integer bounds, or scan, instead");
}

// The backward pass of a checkpointed function runs it again: the gradient is a checkpoint of its
// vjp graph (which recomputes the forward values inside) on the same operands and the cotangents.
void Checkpoint(GradCtx& c) {
  const Graph& body = c.node.attrs.graph("body");
  std::vector<int> operands(c.in.begin(), c.in.end());
  for (size_t k = 0; k < body.outputs.size(); ++k) operands.push_back(cotangent(c, k, body.type(body.outputs[k])));
  const std::vector<int> fl = float_inputs(body);
  if (fl.empty()) return;
  const std::vector<int> grads = results(c.b, OpKind::Checkpoint, operands, Attrs{{"body", made(vjp(body))}}, fl.size());
  for (size_t r = 0; r < fl.size(); ++r) c.dx[size_t(fl[r])] = grads[r];
}

void Cond(GradCtx& c) {
  const Graph& then_g = c.node.attrs.graph("then");
  std::vector<int> operands(c.in.begin(), c.in.end());  // the predicate and the branches' operands
  for (size_t k = 0; k < then_g.outputs.size(); ++k) operands.push_back(cotangent(c, k, then_g.type(then_g.outputs[k])));
  Attrs attrs{{"then", made(vjp(then_g))}, {"else", made(vjp(c.node.attrs.graph("else")))}};
  const std::vector<int> fl = float_inputs(then_g);
  const std::vector<int> grads = results(c.b, OpKind::Cond, operands, attrs, fl.size());
  for (size_t r = 0; r < fl.size(); ++r) c.dx[size_t(1 + fl[r])] = grads[r];
}

// Forward: carries c, xs x, captures m; body(c, x_t, m) = (c', y_t). Backward: the forward again
// with each step's incoming carries stacked, then a scan the other way whose carries are the
// carries' cotangents and the captures' summed cotangents, and whose ys are the xs' cotangents.
void Scan(GradCtx& c) {
  const Attrs& at = c.node.attrs;
  const Graph& body = at.graph("body");
  const size_t n = size_t(at.i("carries")), k = size_t(at.i("xs")), m = c.in.size() - n - k;
  const size_t j = body.outputs.size() - n;
  const int64_t length = at.i("length");

  Graph saving = body;  // stores the carries each step starts from, as extra ys
  for (size_t i = 0; i < n; ++i) saving.outputs.push_back(saving.inputs[i]);
  Attrs fwd_attrs = at;
  fwd_attrs.set("body", made(saving));
  std::vector<int> stacked_carries;
  for (size_t i = 0; i < n; ++i)
    stacked_carries.push_back(c.b.op(OpKind::Scan, c.in, Attrs(fwd_attrs).set("result", int64_t(n + j + i))));

  const Graph body_vjp = vjp(body);
  const std::vector<int> fl = float_inputs(body);
  std::vector<int> float_carries, float_xs, float_caps;  // positions among the body's inputs
  for (int p : fl) (size_t(p) < n ? float_carries : size_t(p) < n + k ? float_xs : float_caps).push_back(p);

  // The backward body: (carry cotangents, capture sums, saved carry, x, y cotangent, captures).
  Graph back;
  back.name = body.name + "_backward";
  Builder bb(back);
  auto in_type = [&](size_t p) { return body.type(body.inputs[p]); };
  std::vector<int> ct_carry(n, -1), acc;
  for (int p : float_carries) ct_carry[size_t(p)] = back.add_parameter(in_type(size_t(p)));
  for (int p : float_caps) acc.push_back(back.add_parameter(in_type(size_t(p))));
  std::vector<int> args;  // body_vjp's: the body's inputs, then a cotangent per body output
  for (size_t p = 0; p < n + k + m; ++p) args.push_back(-1);
  for (size_t i = 0; i < n; ++i) args[i] = back.add_parameter(in_type(i));
  for (size_t i = n; i < n + k; ++i) args[i] = back.add_parameter(in_type(i));
  std::vector<int> ct_y;
  for (size_t i = 0; i < j; ++i) ct_y.push_back(back.add_parameter(body.type(body.outputs[n + i])));
  for (size_t i = n + k; i < n + k + m; ++i) args[i] = back.add_parameter(in_type(i));
  for (size_t i = 0; i < n; ++i) args.push_back(ct_carry[i] >= 0 ? ct_carry[i] : zeros(bb, body.type(body.outputs[i])));
  for (int y : ct_y) args.push_back(y);
  const std::vector<int> g = inline_graph(back, body_vjp, args);
  size_t next = 0;
  for (size_t r = 0; r < float_carries.size(); ++r) back.outputs.push_back(g[next++]);
  // g follows fl's order: carries, then xs, then captures (fl is sorted by position).
  std::vector<int> g_xs(g.begin() + long(float_carries.size()), g.begin() + long(float_carries.size() + float_xs.size()));
  std::vector<int> g_caps(g.begin() + long(float_carries.size() + float_xs.size()), g.end());
  for (size_t r = 0; r < float_caps.size(); ++r) back.outputs.push_back(bb.add(acc[r], g_caps[r]));
  for (int v : g_xs) back.outputs.push_back(v);

  std::vector<int> operands;
  for (int p : float_carries) operands.push_back(cotangent(c, size_t(p), in_type(size_t(p))));
  for (int p : float_caps) operands.push_back(zeros(c.b, in_type(size_t(p))));
  for (int s : stacked_carries) operands.push_back(s);
  for (size_t i = n; i < n + k; ++i) operands.push_back(c.in[i]);
  for (size_t i = 0; i < j; ++i) {
    TensorType stacked = body.type(body.outputs[n + i]);
    stacked.shape.insert(stacked.shape.begin(), length);
    operands.push_back(cotangent(c, n + i, stacked));
  }
  for (size_t i = n + k; i < n + k + m; ++i) operands.push_back(c.in[i]);
  const size_t back_carries = float_carries.size() + float_caps.size();
  Attrs back_attrs{{"body", made(back)},
                   {"length", length},
                   {"carries", int64_t(back_carries)},
                   {"xs", int64_t(n + k + j)},
                   {"reverse", int64_t(at.i("reverse") ? 0 : 1)}};
  const std::vector<int> r = results(c.b, OpKind::Scan, operands, back_attrs, back_carries + float_xs.size());
  size_t q = 0;
  for (int p : float_carries) c.dx[size_t(p)] = r[q++];
  for (int p : float_caps) c.dx[size_t(p)] = r[q++];
  for (int p : float_xs) c.dx[size_t(p)] = r[q++];
}

}  // namespace hjit::grad_rules
