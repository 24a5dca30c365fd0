// The standard workloads of docs/performance.md, as hjit functions with their inputs, plus the
// hand-written references hjit-bench sets them against.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <hjit/hjit.h>
#include <hjit/tune.h>

namespace bench {

struct Runner {
  std::function<hjit::Tensor()> call;
  std::function<hjit::JitStats()> stats;  // empty when eager
};

struct Workload {
  std::string id, name, shapes;
  // A call of the workload on its inputs: eager when options is null, else through hjit::jit.
  std::function<Runner(const hjit::JitOptions* options)> make_runner;
  // A tuning run of the workload's function on its inputs (hjit-tune --workload).
  std::function<hjit::TuneResult(const hjit::TuneOptions& options)> tune;
  // Exports the function into dir (export_library: dir/lib<name>.a and <name>.h) and returns its
  // graph, whose inputs and outputs (then updates) are the exported arguments: the function's own
  // inputs, then (bake_parameters = false) the tensors it captures.
  std::function<hjit::Graph(const std::string& dir, const std::string& name, const hjit::ExportOptions& options)> export_to;
  // The function traced on its inputs (hjit::trace): the optimized graph jit() compiles, and its
  // inputs (the function's, then the tensors it captures: the exported library's with
  // bake_parameters = false).
  std::function<hjit::TracedFunction()> trace;
  double flops = 0;                     // per call, for a GFLOP/s column (0: not reported)
  double bytes = 0;                     // least memory traffic per call (inputs read and results
                                        // written once), for a fraction of bandwidth
  bool stateful = false;                // updates parameters: results differ from call to call
  std::string reference;                // the hand-written reference, if there is one
  std::function<void()> run_reference;  // computes the same result without hjit
  std::function<double()> reference_error;  // max |reference - eager|, to show the reference is right
};

// All workloads bench knows, W1..W11 of docs/performance.md.
std::vector<std::string> workload_ids();
// "W1,W3" -> {"W1", "W3"}: the lists hjit-bench and hjit-tune take on their command lines.
std::vector<std::string> split_list(const std::string& comma_separated);
Workload make_workload(const std::string& id);

}  // namespace bench
