// Ahead-of-time export: a graph compiled into a static library and a C header that need neither
// hjit nor Halide nor LLVM: lib<name>.a holds the pipeline, Halide's runtime for the target, a C
// wrapper that takes plain pointers, and the graph's constants.
#pragma once
#include <string>
#include <vector>

#include <hjit/graph.h>

#include "halide_backend/schedule_request.h"

namespace hjit::backend {

struct ExportRequest {
  std::string directory, name;
  std::string target;          // a Halide target string; "" or "host": this machine
  ScheduleRequest schedule;    // Unfused or BuiltIn (schedule_request(): no tuning database)
  std::vector<std::string> input_names;  // one per graph input (for the header)
  std::string source;          // what was exported, for the header's comment
};

// Writes <directory>/lib<name>.a and <directory>/<name>.h; returns the paths. Throws ValueError
// for a bad name or target, CompileError when a tool (cc, ar) is missing or fails.
std::vector<std::string> export_static_library(const Graph& g, const ExportRequest& request);

}  // namespace hjit::backend
