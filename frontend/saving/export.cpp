// export_library: trace, optionally bake the captured tensors in, and write the compiled function
// out (frontend/compiled/function.h).
#include <hjit/export.h>

#include "frontend/compiled/function.h"
#include "frontend/tracing/traced.h"

namespace hjit::detail {

std::vector<std::string> export_traced(const std::string& directory, const std::string& name, const ExportOptions& options,
                                       const std::string& fn_name, const CallArgs& args, Tracer trace) {
  // Exported code is what it is where it runs: a tuning database is read only when named.
  FunctionRequest request;
  request.name = fn_name;
  request.schedule = backend::schedule_request(
      "hjit: export_library '" + name + "'", {.opt_level = options.opt_level, .autoscheduler = options.autoscheduler,
                                               .tuning_db = options.tuning_db, .tuning_db_from_environment = false});
  Traced tr = trace_and_optimize(fn_name, false, args, trace);
  std::vector<Tensor> captured;
  for (const auto& c : tr.captured) captured.push_back(alias_tensor(c->storage, c->type));
  Graph g = options.bake_parameters ? freeze_inputs(tr.graph, tr.num_args, captured) : std::move(tr.graph);
  backend::ExportRequest r;
  r.directory = directory;
  r.name = name;
  r.target = options.target;
  r.source = "'" + fn_name + "'";
  for (size_t i = 0; i < g.inputs.size(); ++i)
    r.input_names.push_back(i < tr.num_args ? "in" + std::to_string(i) : "param" + std::to_string(i - tr.num_args));
  return CompiledFunction::write_library(std::move(g), std::move(request), r);
}

}  // namespace hjit::detail
