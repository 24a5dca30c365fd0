#include "frontend/jit/build_version.h"

#include "frontend/tracing/const_eval.h"
#include "frontend/tracing/traced.h"
#include "graph/passes/optimize.h"
#include "support/log.h"

namespace hjit::detail {
namespace {

// The call's arguments with every dynamic size below 2 raised to 2 (null when none is): a pipeline
// for every size is traced where no size of 1 could be a broadcast, and serves the size of 1 too.
std::unique_ptr<ResizedArgs> lifted_args(const JitCore::State& s, const CallArgs& args) {
  bool any = false;
  auto lifted = resized_args(args, [&](size_t i, int d, int64_t size) {
    const int rank = args.tensor(i).impl()->type.rank();
    if (size >= 2 || !Signature::is_dynamic(args, i, d, rank, s.dynamic.dims())) return size;
    any = true;
    return int64_t(2);
  });
  return any ? std::move(lifted) : nullptr;
}

// dynamic_dims: v compiled once for every size of the dynamic dimensions, when one pipeline can
// serve them; otherwise v is keyed by this call's sizes (sizes_key) and nothing is compiled here.
// A first call with a dynamic size of 1 fits and compiles the function traced at 2 (*graph becomes
// that graph), once the graph at 1 is checked to be that graph at 1.
std::shared_ptr<CompiledFunction> compile_for_every_size(JitCore::State& s, Version& v, const CallArgs& args, Tracer trace,
                                                        Graph* graph) {
  Timer t;
  std::string why = s.dynamic.impossible();
  const bool known_impossible = !why.empty();
  if (why.empty()) {
    auto trace_at = [&](const CallArgs& at) {
      return trace_and_optimize(s.opt.name, false, at, trace, nullptr, s.opt.memory_budget_mb).graph;
    };
    const std::unique_ptr<ResizedArgs> lifted = lifted_args(s, args);
    std::optional<Graph> lifted_graph;
    try {
      if (lifted) lifted_graph = trace_at(lifted->args);
    } catch (const Error& e) {
      why = std::string("tracing at size 2 failed: ") + e.what();
    }
    const Graph& fitted = lifted_graph ? *lifted_graph : *graph;
    if (why.empty()) v.dynamic = s.dynamic.fit(lifted ? lifted->args : args, fitted, trace_at, &why);
    if (v.dynamic && lifted) {
      std::vector<int64_t> symbols;
      for (const SymbolicSizes::Source& src : v.dynamic->sources) symbols.push_back(args.tensor(size_t(src.input)).impl()->type.shape[size_t(src.dim)]);
      // Compared once both are simplified alike (at 1, a slice of the whole axis is no slice).
      ConstEvaluator eval = evaluate_node;
      if (optimize(instantiate(fitted, *v.dynamic, symbols), &eval).to_text() != graph->to_text()) {
        why = "the function traced at a dynamic size of 1 is not its graph at 2 with that size 1 (a broadcast?)";
        v.dynamic = nullptr;
      } else {
        // The pipeline serves this call: its splits are guarded where shifted ones would need 2.
        auto from_one = std::make_shared<SymbolicSizes>(*v.dynamic);
        from_one->serves_from = *std::min_element(symbols.begin(), symbols.end());
        v.dynamic = std::move(from_one);
      }
    }
    if (v.dynamic) {
      FunctionRequest r = s.request;
      r.schedule = r.schedule.at_every_size();
      r.dynamic = v.dynamic;
      r.donate.clear();  // (a pipeline of dynamic sizes computes nothing in place)
      try {
        std::shared_ptr<CompiledFunction> c = CompiledFunction::compile(fitted, std::move(r));
        v.min_dynamic_size = std::max<int64_t>(1, c->executable().min_dynamic_size());
        ++s.dynamic_entries;
        if (lifted_graph) *graph = std::move(*lifted_graph);
        log().debug("jit '{}': one pipeline for every size of the dynamic dimensions ({:.1f} ms)", s.opt.name, t.ms());
        return c;
      } catch (const ValueError& e) {
        why = e.what();
        s.dynamic.set_impossible(why);
        v.dynamic = nullptr;
      }
    }
  }
  // Said once at warning level: later sizes fall back for the reason kept.
  s.retraces.on_sizes_fixed(why);
  if (known_impossible) log().debug("jit '{}': dynamic_dims: compiling for these sizes only: {}", s.opt.name, why);
  else log().warn("jit '{}': dynamic_dims: one pipeline cannot serve every size, so each size compiles its own: {}", s.opt.name, why);
  v.sizes_key = Signature::of(args, Signature::hash_of(args, s.opt.name));
  return nullptr;
}

}  // namespace

void build_version(JitCore::State& s, Version& v, const CallArgs& args, Tracer trace,
                   const std::function<void(TraceState&)>& setup) {
  try {
    Timer t;
    Traced tr = trace_and_optimize(s.opt.name, s.opt.trace_mode == TraceMode::Concrete, args, trace, setup, s.opt.memory_budget_mb);
    ++s.traces;
    std::shared_ptr<CompiledFunction> c;
    if (s.dynamic.dims() && !v.fixed_sizes) c = compile_for_every_size(s, v, args, trace, &tr.graph);
    if (!c) c = CompiledFunction::compile(std::move(tr.graph), s.request);
    v.tree = std::move(tr.tree);
    v.captured = std::move(tr.captured);
    v.num_args = tr.num_args;
    v.first_outputs = std::move(tr.concrete_outputs);
    v.guards = std::move(tr.guards);
    v.flags = std::move(tr.flags);
    s.compile_us += int64_t(t.ms() * 1000);
    log().debug("jit '{}': ready in {:.1f} ms (backend {:.1f} ms{}{})", s.opt.name, t.ms(), c->compile_ms(),
                c->found_compiled() ? ", found compiled" : "",
                v.guards.empty() ? "" : ", " + std::to_string(v.guards.size()) + " guards");
    finish_version(s, v, std::move(c));
  } catch (...) {
    v.built.failed(std::current_exception());
    throw;
  }
}

void finish_version(JitCore::State& s, Version& v, std::shared_ptr<CompiledFunction> compiled) {
  if (compiled->loaded()) ++s.loaded;
  else if (!compiled->found_compiled()) ++s.compiles;
  v.fn = std::move(compiled);
  s.set_schedule(v.fn->executable().summary());
  v.built.done();
}

ChainedVersion chained_version(JitCore::State& s, Version& v, std::shared_ptr<Version> Version::*slot, const std::string& reason,
                               const CallArgs& args, Tracer trace) {
  std::shared_ptr<Version> other;
  bool claimed = false;
  {
    std::lock_guard lock(v.next_mu);
    if (!(v.*slot)) {
      v.*slot = std::make_shared<Version>();
      (v.*slot)->key = v.key;
      claimed = true;
    }
    other = v.*slot;
  }
  if (!claimed) {
    other->built.wait();
    return {other, false};
  }
  s.retraces.on_trace(other->key, reason);
  try {
    build_version(s, *other, args, trace);
  } catch (...) {
    std::lock_guard lock(v.next_mu);
    v.*slot = nullptr;
    throw;
  }
  return {other, true};
}

}  // namespace hjit::detail
