#include "frontend/jit/graph_breaks.h"

#include "frontend/tracing/const_eval.h"
#include "frontend/tensor/device.h"
#include "frontend/jit/build_version.h"
#include "graph/passes/optimize.h"
#include "support/log.h"

namespace hjit::detail {

SegmentedCall call_in_segments(JitCore::State& s, const CallArgs& args, Tracer trace, bool run) {
  SegmentedCall call;
  std::vector<Break>* breaks = &call.breaks;
  auto on_read = [&](TraceState& ts) {
    ts.on_read = [&s, &args, breaks, &ts](TensorImpl& im, const char* what) {
      Graph g = ts.graph;
      g.outputs = {im.value};
      g.updates.clear();
      ConstEvaluator eval = evaluate_node;
      FunctionRequest request = s.request;
      request.donate.clear();  // (the arguments are read again by the segments after this one)
      const std::shared_ptr<CompiledFunction> segment = CompiledFunction::compile(optimize(g, &eval), std::move(request));
      CallInputs inputs;
      for (size_t i = 0; i < args.count; ++i) inputs.push(args.tensor(i).impl().get());
      for (const auto& captured : ts.captured) inputs.push(captured.get());
      std::vector<Tensor> out;
      segment->run(inputs.view(), out);
      im.storage = out.at(0).impl()->storage;
      ++s.graph_breaks;
      breaks->push_back(Break{what, im.type.str() + " (" + op_name(ts.graph.node(im.value).op) + ")",
                              segment->graph().nodes.size(), segment->executable().summary()});
      log().debug("jit '{}': graph break {} at {} of {}", s.opt.name, breaks->size(), what, breaks->back().value);
    };
  };
  call.last = std::make_shared<Version>();
  build_version(s, *call.last, args, trace, on_read);
  if (!run) return call;
  Version& v = *call.last;
  const CallInputs inputs = v.inputs(args);
  {
    std::unique_lock<std::mutex> call_lock = v.fn->lock_for_call();
    v.fn->run(inputs.view(), call.outputs);
    s.update_bytes_copied += v.fn->apply_updates(inputs.view());
  }
  call.outputs.resize(v.num_outputs());
  return call;
}

std::string explain_segments(const std::string& fn, const SegmentedCall& call) {
  const std::vector<Break>& breaks = call.breaks;
  std::string out = "jit '" + fn + "' (fullgraph = false): " + std::to_string(breaks.size() + 1) +
                    " segments; the function runs at every call and each value read ends a segment\n";
  for (size_t k = 0; k < breaks.size(); ++k)
    out += "segment " + std::to_string(k + 1) + ": " + std::to_string(breaks[k].nodes) + " nodes, ends at " + breaks[k].what +
           " of " + breaks[k].value + "; schedule " + breaks[k].schedule + "\n";
  out += "segment " + std::to_string(breaks.size() + 1) + " (results and updates): " +
         std::to_string(call.last->graph().nodes.size()) + " nodes; schedule " + call.last->fn->executable().summary() + "\n\n";
  return out + call.last->fn->executable().explain();
}

}  // namespace hjit::detail

namespace hjit::detail {

void check_host_code_allowed() {
  const TraceState* ts = current_trace();
  if (ts && !ts->on_read)
    throw ValueError("exclude_from_trace inside '" + ts->fn_name + "', which is traced once and then runs compiled: the "
                     "host code would run only while tracing. Jit the function with JitOptions{.fullgraph = false} to "
                     "run it at every call.");
}

}  // namespace hjit::detail
