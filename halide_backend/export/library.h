// The parts of writing a library out (export/export.cpp runs them in order): the plan of pipelines
// and steps, the header, the C wrapper, and the archive.
#pragma once
#include <string>
#include <vector>

#include "halide_backend/codegen/target.h"
#include "halide_backend/export/export.h"
#include "halide_backend/runtime/executable.h"

namespace hjit::backend {

// One distinct pipeline of the library, its object code written: its function (<name>_p<k>), its
// arguments in the function's order and its constants (describe()'s).
struct ExportedPipeline {
  std::string function;
  PipelineInfo info;
  std::string schedule_summary;
  bool calls_kernels = false;  // an extern stage: the providers' kernels go into the library
};

// One call of a pipeline, as a part of a partitioned executable runs (runtime/partitioned.h): its
// inputs are the caller's (indices) then values of earlier steps (boundary ids); each output is
// a caller's output slot (>= 0) or boundary value -1 - id.
struct ExportStep {
  size_t pipeline = 0;
  std::vector<int> caller_inputs, boundary_inputs, output_slot;
};

struct ExportPlan {
  Target target;
  std::vector<ExportedPipeline> pipelines;
  std::vector<ExportStep> steps;
  std::vector<size_t> boundary_bytes;          // by boundary id
  std::vector<std::vector<int>> frees_after;   // per step: boundary values no later step reads
  std::string device_code;                     // a GPU target's kernels (PTX, OpenCL C)
  std::vector<std::string> objects;            // the pipelines' object files, in the scratch directory
};

// The pipelines and the order they run in, each compiled to an object file in `scratch`: for this
// machine, those of `compiled`; for another target, cut and decided for it.
ExportPlan plan_export(const Graph& g, const Options& o, const std::shared_ptr<const Executable>& compiled,
                       const Target& target, const std::string& name, const std::string& scratch);

// One argument of the exported C function: the graph's inputs, outputs, then updates' new values.
struct CArg {
  std::string name;
  TensorType type;
  bool output;
};
std::vector<CArg> c_arguments(const Graph& g, const ExportRequest& r);

// The C type of a dtype's elements, and the function's parameter list.
const char* c_type(DType t);
std::string c_parameters(const std::vector<CArg>& args);

// What a program linking the library needs besides it ("-lpthread -ldl -lm", a provider's flags).
std::string link_flags(const ExportPlan& plan);

// <name>.h and the C wrapper's source.
std::string c_header(const ExportPlan& plan, const std::vector<CArg>& args, const ExportRequest& r);
std::string c_wrapper(const ExportPlan& plan, const std::vector<CArg>& args, const ExportRequest& r);
// A CPU library's parallel loops (hjit_NAME_par_for) and hjit_NAME_stop_pool, in C, for the
// wrapper's text after <pthread.h>, <stdlib.h> and HalideRuntime.h, NAME the library's name.
std::string c_thread_pool();

// Compiles the wrapper and the constants, adds Halide's runtime for the target and the kernels the
// pipelines call, and archives all with the pipelines' objects into `library`.
void archive_library(const ExportPlan& plan, const ExportRequest& r, const std::string& scratch, const std::string& library);

}  // namespace hjit::backend
