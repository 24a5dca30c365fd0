// cond, while_loop, fori_loop, scan: eagerly, the loops they stand for; traced, one node per result
// whose graphs (branches, bodies) are traced once, in traces of their own nested in the caller's.
#include <hjit/control_flow.h>

#include <hjit/ops.h>

#include "frontend/tracing/const_eval.h"
#include "frontend/transforms/control_flow_eval.h"
#include "frontend/tracing/trace.h"
#include "graph/op_def.h"
#include "graph/passes/optimize.h"
#include "graph/rewriter.h"
#include "support/log.h"

namespace hjit {
namespace detail {
namespace {

using GraphRef = std::shared_ptr<const Graph>;
using BodyFn = std::function<Tensors(const Tensors&)>;

// A function traced into a graph of its own: its inputs are the arguments, then the tensors it
// reads from outside (tracers of the enclosing trace, eager tensors made before it).
struct Body {
  Graph graph;
  size_t num_args = 0;
  std::vector<std::shared_ptr<TensorImpl>> captured;
};

Body trace_body(const std::string& name, const std::vector<TensorType>& args, const BodyFn& fn) {
  TraceScope scope(name, false);
  Tensors tracers;
  for (const TensorType& t : args) tracers.push_back(scope.add_argument(t));
  Tensors out;
  try {
    out = fn(tracers);
  } catch (const Error&) {
    rethrow_in_trace(scope.state());
  }
  Body b;
  b.graph = scope.finish(out);
  if (!b.graph.updates.empty())
    throw ValueError(name + ": assign() inside a branch or loop body; return the new value instead (it becomes a result "
                     "or a carry), and assign it after the loop");
  b.num_args = args.size();
  b.captured = scope.state().captured;
  ConstEvaluator eval = evaluate_node;
  b.graph = optimize(b.graph, &eval);
  return b;
}

// The bodies rebuilt to take the same inputs: the arguments, then every tensor any of them reads.
std::vector<Tensor> share_captures(std::vector<Body*> bodies) {
  std::vector<std::shared_ptr<TensorImpl>> all;
  for (Body* b : bodies)
    for (const auto& c : b->captured)
      if (std::find(all.begin(), all.end(), c) == all.end()) all.push_back(c);
  for (Body* b : bodies) {
    Graph g;
    g.name = b->graph.name;
    std::vector<int> args;
    for (size_t i = 0; i < b->num_args; ++i) args.push_back(g.add_parameter(b->graph.type(b->graph.inputs[i])));
    std::vector<int> shared;
    for (const auto& c : all) shared.push_back(g.add_parameter(c->type));
    for (const auto& c : b->captured) args.push_back(shared[size_t(std::find(all.begin(), all.end(), c) - all.begin())]);
    g.outputs = inline_graph(g, b->graph, args);
    b->graph = std::move(g);
  }
  Tensors out;
  for (const auto& c : all) out.push_back(Tensor(c));
  return out;
}

GraphRef shared(Graph g) { return std::make_shared<const Graph>(std::move(g)); }

std::vector<TensorType> types_of(const Tensors& ts, const char* what) {
  std::vector<TensorType> out;
  for (const Tensor& t : ts) out.push_back(impl_of(t, what).type);
  return out;
}

void require_pred(const Tensor& pred) {
  const TensorType& t = impl_of(pred, "cond").type;
  if (t.dtype != DType::Bool || t.rank() != 0)
    throw DTypeError("cond: the predicate must be a bool[] (a 0-d comparison such as hjit::sum(x) > 0.0), got " + t.str());
}

// Carries must keep their types from one iteration to the next (checked by the op when traced).
void require_same_types(const char* op, const Tensors& before, const Tensors& after) {
  if (types_of(before, op) != types_of(after, op)) {
    std::string a, b;
    for (const Tensor& t : before) a += (a.empty() ? "" : ", ") + t.impl()->type.str();
    for (const Tensor& t : after) b += (b.empty() ? "" : ", ") + t.impl()->type.str();
    throw ShapeError(std::string(op) + ": the body must return the loop state it is given, (" + a + "), got (" + b +
                     ") (a carry may not change its shape or dtype from one iteration to the next)");
  }
}

std::string body_name(const char* op, const char* which) {
  TraceState* ts = current_trace();
  return (ts ? ts->fn_name + "/" : std::string()) + op + "_" + which;
}

Tensor index_scalar(int64_t i) { return Tensor::scalar(double(i), DType::I32); }

}  // namespace

std::vector<Tensor> apply_control_flow(OpKind op, const Tensors& operands, const Attrs& attrs) {
  TraceState* ts = current_trace();
  bool record = false;
  for (const Tensor& t : operands) {
    const TensorImpl& im = impl_of(t, op_name(op));
    record |= im.traced() || (ts && im.born_in_trace != ts->id);
  }
  if (!record || !ts) {
    std::vector<Tensor> results;
    {
      SuspendTraces eager;
      results = run_control_flow(op, operands, attrs);
    }
    // Computed now from values the trace made (a loop over constants): constants of the trace, as
    // the operands were, not tensors from outside it (captured, they died with the trace, and at
    // another dynamic size their value would be this size's).
    if (ts)
      for (Tensor& t : results) t.impl()->born_in_trace = ts->id;
    return results;
  }
  Node probe;
  probe.op = op;
  probe.attrs = attrs;
  const int results = control_flow_results(probe);
  std::vector<int> ids;
  for (const Tensor& t : operands) ids.push_back(value_in_trace(*ts, t));
  Tensors concrete;
  if (ts->concrete) {  // the first call of a Concrete trace runs eagerly as it records
    Tensors values;
    for (const Tensor& t : operands) values.push_back(alias_tensor(t.impl()->storage, t.impl()->type));
    SuspendTraces eager;
    concrete = run_control_flow(op, values, attrs);
  }
  Tensors out;
  for (int r = 0; r < results; ++r) {
    const int id = ts->graph.add_op(op, ids, Attrs(attrs).set("result", int64_t(r)));
    out.push_back(make_tracer(*ts, id, concrete.empty() ? nullptr : concrete[size_t(r)].impl()->storage));
  }
  return out;
}

}  // namespace detail

using namespace detail;

Tensors cond(const Tensor& pred, const std::function<Tensors(const Tensors&)>& then_fn,
             const std::function<Tensors(const Tensors&)>& else_fn, const Tensors& operands) {
  require_pred(pred);
  if (!current_trace()) return (pred.item<bool>() ? then_fn : else_fn)(operands);
  const std::vector<TensorType> types = types_of(operands, "cond");
  Body t = trace_body(body_name("cond", "then"), types, then_fn), e = trace_body(body_name("cond", "else"), types, else_fn);
  Tensors ops{pred};
  ops.insert(ops.end(), operands.begin(), operands.end());
  for (const Tensor& c : share_captures({&t, &e})) ops.push_back(c);
  return apply_control_flow(OpKind::Cond, ops, Attrs{{"then", shared(std::move(t.graph))}, {"else", shared(std::move(e.graph))}, {"result", int64_t(0)}});
}

std::function<Tensors(const Tensors&)> checkpoint(std::function<Tensors(const Tensors&)> fn) {
  return [fn = std::move(fn)](const Tensors& args) -> Tensors {
    if (!current_trace()) return fn(args);
    Body b = trace_body(body_name("checkpoint", "fn"), types_of(args, "checkpoint"), fn);
    Tensors ops = args;
    for (const Tensor& c : share_captures({&b})) ops.push_back(c);
    return apply_control_flow(OpKind::Checkpoint, ops, Attrs{{"body", shared(std::move(b.graph))}, {"result", int64_t(0)}});
  };
}

std::function<Tensor(const Tensor&)> checkpoint(std::function<Tensor(const Tensor&)> fn) {
  auto all = checkpoint(std::function<Tensors(const Tensors&)>([fn = std::move(fn)](const Tensors& a) { return Tensors{fn(a[0])}; }));
  return [all](const Tensor& x) { return all(Tensors{x})[0]; };
}

Tensor cond(const Tensor& pred, const std::function<Tensor(const Tensor&)>& then_fn,
            const std::function<Tensor(const Tensor&)>& else_fn, const Tensor& operand) {
  return cond(pred, [&](const Tensors& v) { return Tensors{then_fn(v[0])}; },
              [&](const Tensors& v) { return Tensors{else_fn(v[0])}; }, Tensors{operand})[0];
}

Tensors while_loop(const std::function<Tensor(const Tensors&)>& cond_fn, const std::function<Tensors(const Tensors&)>& body_fn,
                   const Tensors& init) {
  if (init.empty()) throw ValueError("while_loop: the loop needs at least one carry");
  if (!current_trace()) {
    Tensors state = init;
    while (true) {
      Tensor p = cond_fn(state);
      const TensorType& pt = impl_of(p, "while_loop").type;
      if (pt.dtype != DType::Bool || pt.rank() != 0)
        throw DTypeError("while_loop: the condition must return one bool[], got (" + pt.str() + ")");
      if (!p.item<bool>()) return state;
      Tensors next = body_fn(state);
      require_same_types("while_loop", state, next);
      state = std::move(next);
    }
  }
  const std::vector<TensorType> types = types_of(init, "while_loop");
  Body c = trace_body(body_name("while_loop", "cond"), types, [&](const Tensors& s) { return Tensors{cond_fn(s)}; });
  Body b = trace_body(body_name("while_loop", "body"), types, body_fn);
  Tensors ops = init;
  for (const Tensor& t : share_captures({&c, &b})) ops.push_back(t);
  Tensors out = apply_control_flow(OpKind::While, ops, Attrs{{"cond", shared(std::move(c.graph))}, {"body", shared(std::move(b.graph))}, {"result", int64_t(0)}});
  return out;
}

Tensor while_loop(const std::function<Tensor(const Tensor&)>& cond_fn, const std::function<Tensor(const Tensor&)>& body_fn,
                  const Tensor& init) {
  return while_loop([&](const Tensors& s) { return cond_fn(s[0]); }, [&](const Tensors& s) { return Tensors{body_fn(s[0])}; },
                    Tensors{init})[0];
}

Tensors fori_loop(int64_t lower, int64_t upper, const std::function<Tensors(const Tensor&, const Tensors&)>& body,
                  const Tensors& init) {
  if (lower > upper) upper = lower;  // no iterations, as for (i = lower; i < upper; ++i)
  if (lower < INT32_MIN || upper > INT32_MAX) throw ValueError("fori_loop: bounds must fit an i32");
  if (!current_trace()) {
    Tensors state = init;
    for (int64_t i = lower; i < upper; ++i) {
      Tensors next = body(index_scalar(i), state);
      require_same_types("fori_loop", state, next);
      state = std::move(next);
    }
    return state;
  }
  // A scan whose first carry is the index (JAX's fori_loop with static bounds): differentiable.
  Tensors carries{index_scalar(lower)};
  carries.insert(carries.end(), init.begin(), init.end());
  ScanResult r = scan(
      [&](const Tensors& c, const Tensors&) {
        Tensors next{c[0] + index_scalar(1)};
        Tensors state = body(c[0], Tensors(c.begin() + 1, c.end()));
        next.insert(next.end(), state.begin(), state.end());
        return std::pair<Tensors, Tensors>{next, {}};
      },
      carries, {}, upper - lower);
  return Tensors(r.carries.begin() + 1, r.carries.end());
}

Tensor fori_loop(int64_t lower, int64_t upper, const std::function<Tensor(const Tensor&, const Tensor&)>& body,
                 const Tensor& init) {
  return fori_loop(lower, upper, [&](const Tensor& i, const Tensors& s) { return Tensors{body(i, s[0])}; }, Tensors{init})[0];
}

Tensors fori_loop(const Tensor& lower, const Tensor& upper, const std::function<Tensors(const Tensor&, const Tensors&)>& body,
                  const Tensors& init) {
  for (const Tensor* b : {&lower, &upper}) {
    const TensorType& t = impl_of(*b, "fori_loop").type;
    if (t.rank() != 0 || !is_integral(t.dtype)) throw DTypeError("fori_loop: tensor bounds must be 0-d integers, got " + t.str());
  }
  const Tensor lo = lower.astype(DType::I32), hi = upper.astype(DType::I32);
  Tensors carries{lo};
  carries.insert(carries.end(), init.begin(), init.end());
  Tensors out = while_loop([&](const Tensors& c) { return c[0] < hi; },
                           [&](const Tensors& c) {
                             Tensors next{c[0] + index_scalar(1)};
                             Tensors state = body(c[0], Tensors(c.begin() + 1, c.end()));
                             next.insert(next.end(), state.begin(), state.end());
                             return next;
                           },
                           carries);
  return Tensors(out.begin() + 1, out.end());
}

Tensor fori_loop(const Tensor& lower, const Tensor& upper, const std::function<Tensor(const Tensor&, const Tensor&)>& body,
                 const Tensor& init) {
  return fori_loop(lower, upper, [&](const Tensor& i, const Tensors& s) { return Tensors{body(i, s[0])}; }, Tensors{init})[0];
}

ScanResult scan(const ScanBody& body, const Tensors& init, const Tensors& xs, int64_t length, bool reverse) {
  for (const Tensor& x : xs) {
    const TensorType& t = impl_of(x, "scan").type;
    if (t.rank() == 0) throw ShapeError("scan: a scanned operand needs a leading axis to scan along, got " + t.str());
    if (length < 0) length = t.shape[0];
    if (t.shape[0] != length)
      throw ShapeError("scan: every scanned operand needs a leading axis of the scan's length " + std::to_string(length) +
                       ", got " + t.str());
  }
  if (length < 0) throw ValueError("scan: with no xs, give the length");
  const size_t n = init.size();
  if (!current_trace()) {
    ScanResult r{init, {}};
    std::vector<Tensors> ys;
    for (int64_t step = 0; step < length; ++step) {
      const int64_t t = reverse ? length - 1 - step : step;
      Tensors x;
      for (const Tensor& a : xs) x.push_back(squeeze(slice(a, 0, t, t + 1), {0}));
      auto [next, y] = body(r.carries, x);
      require_same_types("scan", r.carries, next);
      if (!ys.empty() && types_of(ys.back(), "scan") != types_of(y, "scan"))
        throw ShapeError("scan: the body must return ys of the same shapes and dtypes at every step");
      r.carries = std::move(next);
      ys.push_back(std::move(y));
    }
    if (reverse) std::reverse(ys.begin(), ys.end());
    if (!ys.empty())
      for (size_t i = 0; i < ys[0].size(); ++i) {
        Tensors column;
        for (const Tensors& y : ys) column.push_back(y[i]);
        r.ys.push_back(stack(column, 0));
      }
    // With no steps the ys' shapes are unknown without tracing the body: trace it for them.
    if (length == 0) {
      std::vector<TensorType> args = types_of(init, "scan");
      for (const Tensor& x : xs) {
        TensorType t = x.impl()->type;
        t.shape.erase(t.shape.begin());
        args.push_back(t);
      }
      size_t num_ys = 0;
      Body b = trace_body("scan_body", args, [&](const Tensors& a) {
        auto [c, y] = body(Tensors(a.begin(), a.begin() + long(n)), Tensors(a.begin() + long(n), a.end()));
        num_ys = y.size();
        c.insert(c.end(), y.begin(), y.end());
        return c;
      });
      for (size_t i = 0; i < num_ys; ++i) {
        TensorType t = b.graph.type(b.graph.outputs[n + i]);
        t.shape.insert(t.shape.begin(), 0);
        r.ys.push_back(Tensor::zeros(t.shape, t.dtype));
      }
    }
    return r;
  }
  std::vector<TensorType> args = types_of(init, "scan");
  for (const Tensor& x : xs) {
    TensorType t = x.impl()->type;
    t.shape.erase(t.shape.begin());
    args.push_back(t);
  }
  Body b = trace_body(body_name("scan", "body"), args, [&](const Tensors& a) {
    auto [c, y] = body(Tensors(a.begin(), a.begin() + long(n)), Tensors(a.begin() + long(n), a.end()));
    if (c.size() != n)
      throw ShapeError("scan: the body must return " + std::to_string(n) + " carries, got " + std::to_string(c.size()));
    c.insert(c.end(), y.begin(), y.end());
    return c;
  });
  Tensors ops = init;
  ops.insert(ops.end(), xs.begin(), xs.end());
  for (const Tensor& c : share_captures({&b})) ops.push_back(c);
  Tensors out = apply_control_flow(OpKind::Scan, ops,
                                   Attrs{{"body", shared(std::move(b.graph))},
                                         {"length", length},
                                         {"carries", int64_t(n)},
                                         {"xs", int64_t(xs.size())},
                                         {"reverse", int64_t(reverse ? 1 : 0)},
                                         {"result", int64_t(0)}});
  return ScanResult{Tensors(out.begin(), out.begin() + long(n)), Tensors(out.begin() + long(n), out.end())};
}

}  // namespace hjit
