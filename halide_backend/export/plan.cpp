// The plan of an exported library: which pipelines it holds and in what order they run. For this
// machine it is the compiled function's own: each pipeline lowered again with the schedule it was
// built with (for explain() as for a library, the same text gives the same code) and compiled to
// an object under a name of the library's. For another target the graph is cut and each part's
// schedule decided as compile() would for that target.
#include <map>

#include "halide_backend/build/build.h"
#include "halide_backend/build/partition.h"
#include "halide_backend/codegen/codegen.h"
#include "halide_backend/codegen/object_file.h"
#include "halide_backend/export/library.h"
#include "halide_backend/runtime/partitioned.h"
#include "support/log.h"

namespace hjit::backend {
namespace {

// A pipeline to write out: the graph it computes and its schedule's text.
struct Source {
  Graph graph;
  std::string schedule;
  std::string summary;
};

// The steps of one pipeline called on all the caller's inputs and outputs.
ExportStep whole(const Graph& g) {
  ExportStep s;
  for (size_t i = 0; i < g.inputs.size(); ++i) s.caller_inputs.push_back(int(i));
  for (size_t k = 0; k < g.outputs.size() + g.updates.size(); ++k) s.output_slot.push_back(int(k));
  return s;
}

ExportStep step_of(const Part& part, size_t pipeline) {
  return ExportStep{pipeline, part.caller_inputs, part.boundary_inputs, part.output_slot};
}

const HalideExecutable& pipeline_of(const Executable& e) {
  const auto* h = dynamic_cast<const HalideExecutable*>(&e);
  if (!h || !h->source())
    throw InternalError("hjit: export: compiled code of '" + e.name() + "' is not a pipeline hjit can write out");
  return *h;
}

// The sources and steps of the compiled function `compiled`, as it runs here.
void plan_compiled(const Executable& compiled, ExportPlan& plan, std::vector<Source>& sources) {
  auto add = [&](const HalideExecutable& h) {
    sources.push_back({h.source()->graph, h.info().schedule, h.info().summary});
    return sources.size() - 1;
  };
  if (const auto* partitioned = dynamic_cast<const PartitionedExecutable*>(&compiled)) {
    std::map<const Executable*, size_t> index;  // repeated layers share one pipeline
    for (size_t k = 0; k < partitioned->parts().size(); ++k) {
      const Executable* e = partitioned->executables()[k].get();
      auto [it, fresh] = index.emplace(e, 0);
      if (fresh) it->second = add(pipeline_of(*e));
      plan.steps.push_back(step_of(partitioned->parts()[k], it->second));
    }
    plan.boundary_bytes = partitioned->boundaries().bytes;
    plan.frees_after = partitioned->boundaries().frees_after;
    return;
  }
  const HalideExecutable& h = pipeline_of(compiled);
  ExportStep s = whole(h.source()->graph);
  s.pipeline = add(h);
  plan.steps.push_back(std::move(s));
  plan.frees_after.emplace_back();
}

// The same for another target: cut as compile() cuts, each part's schedule decided for the target.
void plan_decided(const Graph& g, const Options& o, ExportPlan& plan, std::vector<Source>& sources) {
  Options for_target = o;
  for_target.device = plan.target.device();
  auto decided = [&](const Graph& graph) {
    std::string why;
    std::optional<std::string> text;
    {
      std::lock_guard lock(compile_mutex());
      text = decide(graph, plan.target, o.schedule.choice, &why, /*extern_stages=*/false);
      if (!text) {  // an autoscheduler that declines: the built-in schedule
        log().warn("export: {} on '{}': {}; using the built-in schedule", o.schedule.str(), graph.name, why);
        text = decide(graph, plan.target, BuiltIn{}, &why, false);
      }
    }
    if (!text) throw CompileError("hjit: export: no schedule for '" + graph.name + "': " + why);
    return Source{graph, *text, o.schedule.str()};
  };
  const std::vector<Part> parts = parts_to_compile(g, for_target);
  if (parts.empty()) {
    sources.push_back(decided(g));
    plan.steps.push_back(whole(g));
    plan.frees_after.emplace_back();
    return;
  }
  std::map<std::string, size_t> index;  // parts alike are one pipeline, as compile() makes them
  for (const Part& part : parts) {
    auto [it, fresh] = index.emplace(part.graph.str(), sources.size());
    if (fresh) sources.push_back(decided(part.graph));
    plan.steps.push_back(step_of(part, it->second));
  }
  const Boundaries b = plan_boundaries(parts);
  plan.boundary_bytes = b.bytes;
  plan.frees_after = b.frees_after;
}

// A GPU target's pipelines check the buffers they are given: the library's _buffers entry takes
// the caller's. A CPU target's wrapper makes every buffer itself, as hjit does for its own calls,
// so its pipelines are the very code compile() made.
Buffers buffers_for(const Target& t) { return t.kind().host() ? Buffers::ByHjit : Buffers::ByCaller; }

}  // namespace

ExportPlan plan_export(const Graph& g, const Options& o, const std::shared_ptr<const Executable>& compiled,
                       const Target& target, const std::string& name, const std::string& scratch) {
  ExportPlan plan;
  plan.target = target;
  std::vector<Source> sources;
  if (compiled) plan_compiled(*compiled, plan, sources);
  else plan_decided(g, o, plan, sources);
  std::lock_guard lock(compile_mutex());
  for (size_t k = 0; k < sources.size(); ++k) {
    const Source& src = sources[k];
    const std::string function = name + "_p" + std::to_string(k);
    ExportedPipeline out;
    out.function = function;
    out.schedule_summary = src.summary;
    try {
      LoweredPipeline p = scheduled_as_given(src.graph, target, src.schedule);
      out.info = describe(src.graph, p, function, src.summary, src.schedule);
      for (const Stage& s : p.stages) out.calls_kernels |= s.is_extern;
      if (!out.info.computes_nothing()) {
        Halide::Module module = pipeline_module(p, target, function, /*jit=*/false, buffers_for(target));
        plan.device_code += device_code_of(module);
        const std::string object = scratch + "/" + function + ".o";
        write_object(module, object);
        plan.objects.push_back(object);
      }
    } catch (const Halide::Error& e) {
      throw CompileError("hjit: export: Halide could not compile '" + src.graph.name + "': " + e.what());
    }
    plan.pipelines.push_back(std::move(out));
  }
  log().debug("export: '{}' is {} pipelines run in {} steps", name, plan.pipelines.size(), plan.steps.size());
  return plan;
}

}  // namespace hjit::backend
