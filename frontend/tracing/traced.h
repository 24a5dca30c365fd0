// A function traced and optimized, ready for the backend: what jit() compiles and save() writes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <hjit/detail/tracing.h>

#include "frontend/tensor/tensor_impl.h"
#include "frontend/tracing/trace.h"

namespace hjit::detail {

struct Traced {
  Graph graph;  // optimized
  std::vector<int> tree;  // result structure
  std::vector<std::shared_ptr<TensorImpl>> captured;  // graph inputs after the arguments
  std::vector<Tensor> concrete_outputs;  // TraceMode::Concrete: the eager results
  // TraceMode::Concrete: the values read while tracing, as bytes; the graph computes each as an
  // output after the function's own.
  std::vector<std::vector<uint8_t>> guards;
  std::vector<std::pair<const bool*, bool>> flags;  // host flags read while tracing (hjit::traced_flag)
  size_t num_args = 0;
};

// `setup` (optional) prepares the trace before the function runs (fullgraph = false: its on_read);
// memory_budget_mb: JitOptions', for the gradients taken inside (checkpoint_segments.h).
Traced trace_and_optimize(const std::string& name, bool concrete, const CallArgs& args, Tracer trace,
                          const std::function<void(TraceState&)>& setup = nullptr, int64_t memory_budget_mb = 0);

// The graph with inputs first.. replaced by constants holding `values` (then optimized again, so
// that what depends only on them folds): MegEngine's capture_as_const. ValueError when the
// function assigns to one of them.
Graph freeze_inputs(const Graph& g, size_t first, const std::vector<Tensor>& values);

}  // namespace hjit::detail
