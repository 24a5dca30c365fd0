// Ahead-of-time export: a compiled function written out as a static library and a C header that
// need neither hjit nor Halide nor LLVM. lib<name>.a holds the function's pipelines (for this
// machine: the very code compile() built, under names of their own), Halide's runtime for the
// target, a C wrapper that takes plain pointers and runs the pipelines in order, the graph's
// constants, and the kernels of the providers its extern stages call.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <hjit/graph.h>

#include "halide_backend/backend.h"

namespace hjit::backend {

struct ExportRequest {
  std::string directory, name;
  // "" or "host": this machine, as compile() builds for it; otherwise any Halide target string.
  std::string target;
  std::vector<std::string> input_names;  // one per graph input (for the header)
  std::string source;                    // what was exported, for the header's comment
};

// Writes <directory>/lib<name>.a and <directory>/<name>.h (and the device code of a GPU target);
// returns the paths. `compiled`: what compile(g, o) returned, for a request of this machine's
// target (its pipelines are written out as they run here); null for another target, whose
// pipelines are cut and scheduled as compile() would for it, without trial runs (the code cannot
// run here) and without extern stages (the kernels are this machine's). Throws ValueError for a
// bad name or target or a graph a library cannot hold (control flow, collectives), CompileError
// when a tool (cc, ar) is missing or fails.
std::vector<std::string> export_library(const Graph& g, const Options& o, const std::shared_ptr<const Executable>& compiled,
                                        const ExportRequest& request);

// ValueError for a name that is not a C identifier, or a graph a library cannot hold (control
// flow and collectives are hjit's host code): checked before anything is compiled.
void check_exportable(const Graph& g, const ExportRequest& request);

// Whether `target` ("" or "host" included) is the target compile() builds for on this machine
// for a function of `o`.
bool is_host_target(const std::string& target, const Options& o);

}  // namespace hjit::backend
