#include "frontend/jit/graph_breaks.h"

#include <algorithm>
#include <functional>

#include "frontend/tracing/const_eval.h"
#include "frontend/tracing/traced.h"
#include "frontend/tensor/device.h"
#include "frontend/jit/build_version.h"
#include "graph/op_def.h"
#include "graph/passes/dce.h"
#include "graph/passes/optimize.h"
#include "graph/rewriter.h"
#include "support/log.h"

namespace hjit::detail {
namespace {

// A segment cheap to run eagerly runs on the eager kernels until its graph has run kCompileAfter
// times: compiling a pipeline (0.2-3 s) for the steps between reads (a detector's per-class
// thresholds, its box decoding and gathers, whose sizes change with every image) costs far more
// than running them, and a graph that keeps coming back is compiled once it has. Cheap: at most
// kEagerElements computed, or kEagerElementwise without a contraction or a loop (whose eager
// kernels are far from compiled code's speed).
constexpr int64_t kEagerElements = int64_t(1) << 16, kEagerElementwise = int64_t(1) << 20;
constexpr int kCompileAfter = 3;
// Segments remembered per function (a detector meets one per class and image size).
constexpr size_t kMaxSegments = 2048;

bool cheap_eagerly(const Graph& g) {
  int64_t n = 0;
  bool heavy = false;
  for (const Node& node : g.nodes) {
    if (node.op == OpKind::Parameter || node.op == OpKind::Constant) continue;
    n += node.type.numel();
    heavy |= has_trait(node.op, Contraction) || has_trait(node.op, ControlFlow);
  }
  return n <= (heavy ? kEagerElements : kEagerElementwise);
}

// What identifies a segment's graph, exactly: its text without the constants' data (printed as
// hex by to_text, the larger part of a detector's segment: its anchors), then their raw bytes.
std::string segment_key(const Graph& g) {
  std::string key = g.str();
  for (const ConstData& c : g.constants)
    if (c.nbytes > 0) key.append(static_cast<const char*>(c.data), c.nbytes);
  return key;
}

// The last segment: whether it runs eagerly (small, and not yet run kCompileAfter times).
bool small_and_new(JitCore::State& s, const Graph& g) {
  if (!cheap_eagerly(g)) return false;
  std::lock_guard lock(s.segments_mu);
  return ++s.segments[segment_key(g)].eager_runs <= kCompileAfter;
}

// The segment's inputs as tensors: the call's arguments, then the captured tensors.
std::vector<Tensor> segment_inputs(const CallArgs& args, const std::vector<std::shared_ptr<TensorImpl>>& captured) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < args.count; ++i) in.push_back(args.tensor(i));
  for (const auto& c : captured) in.emplace_back(c);
  return in;
}

bool all_have_values(const std::vector<Tensor>& in) {
  for (const Tensor& t : in)
    if (!t.impl()->storage || t.impl()->device() != Device::CPU) return false;
  return true;
}

// g with only the inputs its nodes read (a model's trace holds every parameter, and each value
// computed at a break is one more input: the segment after the hundredth break reads a few of
// hundreds), and those inputs' tensors from `all`.
Graph read_inputs_only(const Graph& g, const std::vector<Tensor>& all, std::vector<Tensor>& in) {
  std::vector<char> read(g.nodes.size(), 0);
  for (const Node& node : g.nodes)
    for (int i : node.inputs) read[size_t(i)] = 1;
  for (int o : g.outputs) read[size_t(o)] = 1;
  Graph out;
  out.name = g.name;
  std::vector<int> args(g.inputs.size(), -1);  // (an input nothing reads maps nowhere)
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (!read[size_t(g.inputs[i])]) continue;
    args[i] = out.add_parameter(g.type(g.inputs[i]), g.is_captured(g.inputs[i]));
    in.push_back(all.at(i));
  }
  out.outputs = inline_graph(out, g, args);
  return out;
}

// Computes the outputs of g (no updates: the last segment makes them) into `out`; says how in b.
// A graph met before runs as it did then, without being optimized or looked up again.
void run_segment(JitCore::State& s, Graph g, const CallArgs& args, const std::vector<std::shared_ptr<TensorImpl>>& captured,
                 std::vector<Tensor>& out, Break& b) {
  std::vector<Tensor> in;
  g = read_inputs_only(g, segment_inputs(args, captured), in);
  const std::string key = segment_key(g);
  std::shared_ptr<CompiledFunction> fn;
  Graph optimized;
  bool eager = false;
  {
    std::lock_guard lock(s.segments_mu);
    if (s.segments.size() > kMaxSegments) s.segments.clear();  // (a bound, not a policy)
    JitCore::State::Segment& seen = s.segments[key];
    if (seen.optimized.nodes.empty()) {
      ConstEvaluator eval = evaluate_node;
      seen.optimized = optimize(g, &eval);
    }
    fn = seen.fn;
    optimized = seen.optimized;
    eager = !fn && cheap_eagerly(optimized) && ++seen.eager_runs <= kCompileAfter && all_have_values(in);
  }
  b.nodes = optimized.nodes.size();
  if (eager) {
    const SuspendTraces eager_ops;
    out = eval_graph(optimized, in);
    b.schedule = "eager (small)";
    return;
  }
  if (!fn) {
    FunctionRequest request = s.request;
    request.donate.clear();  // (the arguments are read again by the segments after this one)
    fn = CompiledFunction::compile(std::move(optimized), std::move(request));
    if (fn->loaded()) ++s.loaded;
    else if (!fn->found_compiled()) ++s.compiles;
    std::lock_guard lock(s.segments_mu);
    s.segments[key].fn = fn;
  }
  CallInputs inputs;
  for (const Tensor& t : in) inputs.push(t.impl().get());
  fn->run(inputs.view(), out);
  b.schedule = fn->executable().summary();
}

// At a read: the value read and every other value of the trace still held by the function (the
// code after the read may use any of them) computed in one segment, each then an input of the
// segments after it, so that nothing before a break is computed twice.
void break_graph(JitCore::State& s, const CallArgs& args, TraceState& ts, TensorImpl& read, const char* what,
                 std::vector<Break>& breaks) {
  Break b{what, read.type.str() + " (" + op_name(ts.graph.node(read.value).op) + ")", 0, ""};
  std::vector<std::shared_ptr<TensorImpl>> held;
  std::vector<TensorImpl*> live{&read};
  // (The tracers that died since are dropped: each later break scans only the living.)
  std::erase_if(ts.tracers, [](const std::weak_ptr<TensorImpl>& t) { return t.expired(); });
  for (const auto& weak : ts.tracers) {
    std::shared_ptr<TensorImpl> t = weak.lock();
    if (!t || t.get() == &read || t->trace_id != ts.id || t->storage) continue;
    const Node& node = ts.graph.node(t->value);
    if (node.inputs.empty()) continue;  // an input or a constant: nothing to compute
    held.push_back(t);
    live.push_back(t.get());
  }
  std::vector<int> outputs;
  std::vector<size_t> output_of;  // live[k]'s output (tracers may share a value)
  for (const TensorImpl* t : live) {
    auto at = std::find(outputs.begin(), outputs.end(), t->value);
    output_of.push_back(size_t(at - outputs.begin()));
    if (at == outputs.end()) outputs.push_back(t->value);
  }
  // The nodes those values need, taken from the trace without copying the rest of it (a model's
  // trace before its last break holds every node of the model).
  std::swap(ts.graph.outputs, outputs);
  std::vector<Update> updates;
  std::swap(ts.graph.updates, updates);
  Graph g = dce(ts.graph);
  std::swap(ts.graph.outputs, outputs);
  std::swap(ts.graph.updates, updates);
  std::vector<Tensor> out;
  run_segment(s, std::move(g), args, ts.captured, out, b);
  std::vector<int> param_of(out.size(), -1);
  for (size_t k = 0; k < live.size(); ++k) {
    TensorImpl& t = *live[k];
    t.storage = out.at(output_of[k]).impl()->storage;
    // From here on the value is an input of the trace (a captured tensor holding it), no longer
    // the nodes that computed it.
    if (!t.storage) throw InternalError("jit '" + s.opt.name + "': a graph break computed a value without storage");
    int& param = param_of[output_of[k]];
    if (param < 0) {
      const std::shared_ptr<TensorImpl> value = alias_tensor(t.storage, t.type).impl();
      param = ts.graph.add_parameter(t.type, true);
      ts.captured.push_back(value);
      ts.captured_param[value.get()] = param;
      ts.captured_value[value.get()] = param;
    }
    t.value = param;
  }
  ++s.graph_breaks;
  breaks.push_back(std::move(b));
  log().debug("jit '{}': graph break {} at {} of {}: {} values computed ({})", s.opt.name, breaks.size(), what,
              breaks.back().value, live.size(), breaks.back().schedule);
}

}  // namespace

SegmentedCall call_in_segments(JitCore::State& s, const CallArgs& args, Tracer trace, bool run) {
  SegmentedCall call;
  auto on_read = [&](TraceState& ts) {
    ts.on_read = [&s, &args, &call, &ts](TensorImpl& im, const char* what) { break_graph(s, args, ts, im, what, call.breaks); };
  };
  call.last = std::make_shared<Version>();
  Version& v = *call.last;
  if (!run) {
    build_version(s, v, args, trace, on_read);
    return call;
  }
  Traced tr = trace_and_optimize(s.opt.name, false, args, trace, on_read, s.opt.memory_budget_mb);
  ++s.traces;
  v.tree = std::move(tr.tree);
  v.captured = std::move(tr.captured);
  v.num_args = tr.num_args;
  const std::vector<Tensor> in = segment_inputs(args, v.captured);
  if (tr.graph.updates.empty() && all_have_values(in) && small_and_new(s, tr.graph)) {
    const SuspendTraces eager;
    call.outputs = eval_graph(tr.graph, in);
    v.built.done();
    return call;
  }
  finish_version(s, v, CompiledFunction::compile(std::move(tr.graph), s.request));
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
