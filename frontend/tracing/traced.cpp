// Tracing a function into an optimized graph: what jit() compiles, save() writes, export_library
// and tune() hand on, and hjit::trace returns.
#include <cxxabi.h>

#include <cstdlib>

#include <hjit/jit.h>

#include "frontend/tracing/const_eval.h"
#include "frontend/tracing/traced.h"
#include "graph/passes/optimize.h"
#include "support/log.h"

namespace hjit::detail {

Traced trace_and_optimize(const std::string& name, bool concrete, const CallArgs& args, Tracer trace,
                          const std::function<void(TraceState&)>& setup, int64_t memory_budget_mb) {
  Timer t;
  TraceScope scope(name, concrete);
  scope.state().memory_budget_bytes = memory_budget_mb << 20;
  if (setup) setup(scope.state());
  Traced r;
  std::vector<Tensor> outs = scope.run(args, trace, &r.tree);
  if (concrete)
    for (const Tensor& o : outs) {
      const TensorImpl& im = impl_of(o, name.c_str());
      r.concrete_outputs.push_back(alias_tensor(im.storage, im.type));
    }
  Graph raw = scope.finish(outs);
  outs.clear();
  scope.check_no_escaped_tracers();
  log().debug("traced '{}' in {:.2f} ms: {} nodes, {} inputs ({} captured), {} outputs", name, t.ms(), raw.nodes.size(),
              raw.inputs.size(), scope.state().captured.size(), raw.outputs.size());
  log().trace("trace of '{}':\n{}", name, raw.str());
  r.captured = scope.state().captured;
  for (TraceState::Guard& g : scope.state().guards) r.guards.push_back(std::move(g.bytes));
  r.flags = scope.state().flags;
  r.num_args = size_t(scope.state().num_args);
  ConstEvaluator eval = evaluate_node;
  r.graph = optimize(raw, &eval);
  log().trace("optimized graph of '{}':\n{}", name, r.graph.str());
  return r;
}

Graph trace_graph(const std::string& name, const CallArgs& args, Tracer trace) {
  TraceScope scope(name, false);
  std::vector<int> tree;
  std::vector<Tensor> outs = scope.run(args, trace, &tree);
  Graph g = scope.finish(outs);
  outs.clear();
  scope.check_no_escaped_tracers();
  return g;
}

TracedFunction trace_function(const std::string& name, const CallArgs& args, Tracer trace) {
  Traced tr = trace_and_optimize(name, false, args, trace);
  TracedFunction f;
  f.graph = std::move(tr.graph);
  f.num_args = tr.num_args;
  for (size_t i = 0; i < args.count; ++i) f.inputs.push_back(args.tensor(i));
  for (const auto& c : tr.captured) f.inputs.push_back(alias_tensor(c->storage, c->type));
  return f;
}

bool tracing_active() { return current_trace() != nullptr; }

std::string default_name(const std::type_info& fn_type) {
  int status = 0;
  char* d = abi::__cxa_demangle(fn_type.name(), nullptr, nullptr, &status);
  std::string s = (status == 0 && d) ? d : fn_type.name();
  std::free(d);
  // "main::{lambda(hjit::Tensor const&)#1}" -> "main::lambda#1"
  size_t open = s.find("{lambda(");
  if (open != std::string::npos) {
    size_t hash = s.find(")#", open);
    size_t close = s.find('}', hash == std::string::npos ? open : hash);
    if (hash != std::string::npos && close != std::string::npos)
      s = s.substr(0, open) + "lambda" + s.substr(hash + 1, close - hash - 1);
  }
  return s;
}

}  // namespace hjit::detail
