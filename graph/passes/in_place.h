#pragma once
#include <utility>
#include <vector>

#include <hjit/graph.h>

namespace hjit {

// Which outputs may be computed into the storage of a donated input (JitOptions::donate): pairs of
// (input index, output slot: graph outputs, then updates). An output qualifies for an input of its
// dtype and shape when every value computed from the input is element-wise at the input's shape
// (each element read only for the same element of the output: no broadcast, movement, reduction
// or contraction reads it) and the output is the only result computed from it. A compiled loop
// that reads each element of the input once, just before writing the same element of the output,
// may then write over it (the backend keeps the output's loops from recomputing an element).
// Each output takes at most one input; inputs in `donated` order.
std::vector<std::pair<int, int>> in_place_outputs(const Graph& g, const std::vector<int>& donated);

}  // namespace hjit
