// JitOptions::fullgraph = false: the function runs at every call with symbolic tracers; each value
// read computes the graph so far up to that value (a compiled segment, cached by its graph like
// every pipeline), and C++ goes on with the value; what the function returns and assigns is the
// last segment.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "frontend/jit/state.h"

namespace hjit::detail {

// One graph break of a call.
struct Break {
  std::string what;      // item, operator bool, to_vector, data
  std::string value;     // the value read: its type and the op that made it
  size_t nodes = 0;      // nodes of the segment computed for it (after optimization)
  std::string schedule;  // that segment's schedule summary
};

struct SegmentedCall {
  std::vector<Tensor> outputs;    // the function's results (none unless run)
  std::vector<Break> breaks;      // why each segment but the last ended
  std::shared_ptr<Version> last;  // the last segment: the results and updates
};

// One call in segments; with run = false the last segment is built but not run (explain()).
SegmentedCall call_in_segments(JitCore::State& s, const CallArgs& args, Tracer trace, bool run);

// What explain() shows for such a function: its segments, their sizes and schedules, why each
// ended, and the last segment's own explanation.
std::string explain_segments(const std::string& fn, const SegmentedCall& call);

}  // namespace hjit::detail
