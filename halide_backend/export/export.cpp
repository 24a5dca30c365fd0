// export_library: what can be a library is checked, the plan made (the pipelines and their order),
// then the header, the wrapper and the archive written, each a step of its own (export/library.h).
#include "halide_backend/export/export.h"

#include <cctype>
#include <filesystem>
#include <fstream>

#include "graph/op_def.h"
#include "graph/passes/constant_indices.h"
#include "halide_backend/build/control_flow.h"
#include "halide_backend/export/library.h"
#include "support/log.h"

namespace hjit::backend {

void check_exportable(const Graph& g, const ExportRequest& r) {
  if (r.name.empty() || !(std::isalpha(static_cast<unsigned char>(r.name[0])) || r.name[0] == '_'))
    throw ValueError("hjit: export: the name '" + r.name + "' must be a C identifier");
  for (char c : r.name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      throw ValueError("hjit: export: the name '" + r.name + "' must be a C identifier");
  // (A library for another target is never compiled here: its constant indices are checked now.)
  check_constant_indices(g);
  // A library is pipelines run in order; control flow and collectives are hjit's host code.
  for (const Node& n : g.nodes)
    if (has_trait(n.op, Collective))
      throw ValueError("hjit: export: '" + r.name + "' uses " + op_name(n.op) + ", which exchanges data with the other ranks "
                       "from hjit's host code and cannot be part of an exported library; export the parts before and "
                       "after it");
  if (has_host_steps(g))
    throw ValueError("hjit: export: '" + r.name + "' uses control flow ops (cond, while_loop, fori_loop, scan), which run "
                     "from hjit's host code between pipelines and cannot be exported as one; unroll the loop in C++ "
                     "(static trip counts) or select with hjit::where for the exported function");
}

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw ValueError("hjit: export: cannot write " + path);
}

// The library's files being made, removed however the export ends.
struct Scratch {
  std::string path;
  explicit Scratch(std::string p) : path(std::move(p)) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    std::filesystem::create_directories(path, ec);
    if (ec) throw ValueError("hjit: export: cannot create " + path + ": " + ec.message());
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

bool is_host_target(const std::string& target, const Options& o) {
  return target.empty() || target == "host" || Target::parse(target).str() == Target::host(o.device, o.cuda_capability).str();
}

std::vector<std::string> export_library(const Graph& g, const Options& o, const std::shared_ptr<const Executable>& compiled,
                                        const ExportRequest& r) {
  Timer t;
  check_exportable(g, r);
  const bool here = is_host_target(r.target, o);
  if (here != (compiled != nullptr))
    throw InternalError("hjit: export: the compiled function is what a library for this machine writes out, and only that");
  const Target target = here ? Target::host(o.device, o.cuda_capability) : Target::parse(r.target);
  std::error_code ec;
  std::filesystem::create_directories(r.directory, ec);
  if (ec) throw ValueError("hjit: export: cannot create the directory " + r.directory + ": " + ec.message());
  const Scratch scratch(r.directory + "/." + r.name + ".build");
  const ExportPlan plan = plan_export(g, o, compiled, target, r.name, scratch.path);
  log().debug("export: '{}' planned and compiled in {:.1f} ms", r.name, t.ms());
  const std::vector<CArg> args = c_arguments(g, r);
  const std::string header = r.directory + "/" + r.name + ".h", library = r.directory + "/lib" + r.name + ".a";
  write_text(header, c_header(plan, args, r));
  write_text(scratch.path + "/wrapper.c", c_wrapper(plan, args, r));
  archive_library(plan, r, scratch.path, library);
  std::vector<std::string> written{library, header};
  if (!plan.device_code.empty()) {
    written.push_back(r.directory + "/" + r.name + target.kind().device_code_extension());
    write_text(written.back(), plan.device_code);
  }
  log().debug("export: wrote {} files in {} in {:.1f} ms", written.size(), r.directory, t.ms());
  return written;
}

}  // namespace hjit::backend
