#include "frontend/jit/build_version.h"

#include "frontend/traced.h"
#include "support/log.h"

namespace hjit::detail {
namespace {

// dynamic_dims: v compiled once for every size of the dynamic dimensions, when one pipeline can
// serve them; otherwise v is keyed by this call's sizes (sizes_key) and nothing is compiled here.
std::optional<backend::Compiled> compile_for_every_size(JitCore::State& s, Version& v, const CallArgs& args, Tracer trace,
                                                        const Graph& graph) {
  Timer t;
  std::string why = s.dynamic.impossible();
  if (why.empty()) {
    auto trace_at = [&](const CallArgs& at) {
      return trace_and_optimize(s.opt.name, false, at, trace, nullptr, s.opt.memory_budget_mb).graph;
    };
    v.dynamic = s.dynamic.fit(args, graph, trace_at, &why);
    if (v.dynamic) {
      backend::Options o = s.backend_opt;
      o.schedule = o.schedule.at_every_size();
      o.dynamic = v.dynamic;
      try {
        backend::Compiled c = backend::compile(graph, o);
        v.min_dynamic_size = std::max<int64_t>(1, c.executable->min_dynamic_size());
        ++s.dynamic_entries;
        log().debug("jit '{}': one pipeline for every size of the dynamic dimensions ({:.1f} ms)", s.opt.name, t.ms());
        return c;
      } catch (const ValueError& e) {
        why = e.what();
        s.dynamic.set_impossible(why);
        v.dynamic = nullptr;
      }
    }
  }
  log().debug("jit '{}': compiling for these sizes only: {}", s.opt.name, why);
  v.sizes_key = Signature::of(args, Signature::hash_of(args, s.opt.name));
  return std::nullopt;
}

}  // namespace

void build_version(JitCore::State& s, Version& v, const CallArgs& args, Tracer trace,
                   const std::function<void(TraceState&)>& setup) {
  try {
    Timer t;
    Traced tr = trace_and_optimize(s.opt.name, s.opt.trace_mode == TraceMode::Concrete, args, trace, setup, s.opt.memory_budget_mb);
    ++s.traces;
    std::optional<backend::Compiled> c;
    if (s.dynamic.dims() && !v.fixed_sizes) c = compile_for_every_size(s, v, args, trace, tr.graph);
    if (!c) c = backend::compile(tr.graph, s.options_for(tr.graph));
    if (!c->cache_hit) ++s.compiles;
    v.graph = std::move(tr.graph);
    v.exe = c->executable;
    v.tree = std::move(tr.tree);
    v.captured = std::move(tr.captured);
    v.num_args = tr.num_args;
    for (int o : v.graph.outputs) v.out_types.push_back(v.graph.type(o));
    for (const Update& u : v.graph.updates) v.update_input.push_back(size_t(v.graph.node(u.target).attrs.i("index")));
    v.first_outputs = std::move(tr.concrete_outputs);
    v.guards = std::move(tr.guards);
    s.compile_us += int64_t(t.ms() * 1000);
    log().debug("jit '{}': ready in {:.1f} ms (backend {:.1f} ms{}{})", s.opt.name, t.ms(), c->ms,
                c->cache_hit ? ", found compiled" : "",
                v.guards.empty() ? "" : ", " + std::to_string(v.guards.size()) + " guards");
  } catch (...) {
    v.built.failed(std::current_exception());
    throw;
  }
  s.set_schedule(v.exe->summary());
  v.built.done();
}

}  // namespace hjit::detail
