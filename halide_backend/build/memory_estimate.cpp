// backend::estimate_peak_bytes: the graph-level model, pipeline by pipeline as compile() splits.
#include <algorithm>
#include <map>

#include "graph/op_def.h"
#include "graph/passes/peak_memory.h"
#include "halide_backend/backend.h"
#include "halide_backend/build/partition.h"
#include "halide_backend/scheduling/scheduler.h"
#include "support/allocator.h"

namespace hjit::backend {

int64_t estimate_peak_bytes(const Graph& g, const Options& options) {
  PeakModel model;
  model.body_peak = [&options](const Graph& body) { return estimate_peak_bytes(body, options); };
  model.block_bytes = [](int64_t bytes) { return int64_t(block_size(size_t(bytes))); };
  model.stores_elementwise = [](OpKind op, size_t readers) { return scheduler().stores_elementwise(op, readers); };
  bool control_flow = false;
  for (const Node& n : g.nodes) control_flow |= is_host_step(n.op);
  std::vector<Part> parts;
  if (!control_flow) parts = parts_to_compile(g, options);
  if (parts.empty()) return hjit::estimate_peak_bytes(g, model);
  // Parts run in order, each with the values earlier parts handed on that it or a later part
  // reads (PartitionedExecutable::run).
  std::map<int, size_t> last_reader;     // boundary id -> the last part reading it
  std::map<int, int64_t> boundary_bytes;  // boundary id -> its block's bytes
  for (size_t p = 0; p < parts.size(); ++p)
    for (int b : parts[p].boundary_inputs) last_reader[b] = p;
  int64_t held = 0, peak = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const Part& part = parts[p];
    peak = std::max(peak, held + hjit::estimate_peak_bytes(part.graph, model));  // its outputs included
    for (size_t o = 0; o < part.graph.outputs.size(); ++o)
      if (part.output_slot[o] < 0) {
        const TensorType& t = part.graph.type(part.graph.outputs[o]);
        const int64_t bytes = model.block_bytes(t.numel() * int64_t(dtype_size(t.dtype)));
        boundary_bytes[-1 - part.output_slot[o]] = bytes;
        held += bytes;
      }
    for (int b : part.boundary_inputs)
      if (last_reader[b] == p) held -= boundary_bytes[b];
  }
  return peak;
}

}  // namespace hjit::backend
