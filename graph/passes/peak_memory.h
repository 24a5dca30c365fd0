#pragma once
#include <cstdint>
#include <functional>

#include <hjit/graph.h>

namespace hjit {

// What the estimate below leaves to its caller (the backend knows both).
struct PeakModel {
  std::function<int64_t(const Graph&)> body_peak;  // a control flow body's peak; default: this estimate
  std::function<int64_t(int64_t)> block_bytes;     // what the allocator takes for n bytes; default: n
  // Element-wise values the schedule stores rather than recomputes in each reader (expensive ones
  // read twice); default: none.
  std::function<bool(OpKind, size_t readers)> stores_elementwise;
};

// An estimate, from the graph alone, of the most bytes a compiled run of g holds at once beyond
// its inputs (the caller holds those): what JitOptions::memory_budget_mb plans by. It follows what
// the CPU schedules store and when a pipeline frees it (outputs realized in graph order, each
// stored value freed after its last reader):
//   - the outputs, allocated before the run;
//   - stored when computed: contractions, reductions and the other values that are not
//     element-wise or movement, matmul operands, values handed to or from host control flow, and
//     the element-wise values model.stores_elementwise names;
//   - fused, so not counted: element-wise and movement values read by nothing of the above, and
//     a contraction read only element-wise at its shape by values that end in one stored value
//     (computed at each tile of it); a value lives until the last reader of what is fused from it;
//   - for the length of a convolution (forward or weight gradient): a copy of each operand (padded,
//     or transposed);
//   - for the length of a control flow op: its body's own peak (a checkpoint's recomputation).
// Where g compiles to several pipelines (halide_backend/build/partition.h) the backend's
// estimate_peak_bytes() adds the values held between them.
int64_t estimate_peak_bytes(const Graph& g, const PeakModel& model = {});

}  // namespace hjit
