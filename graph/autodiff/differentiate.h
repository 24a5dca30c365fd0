#pragma once
#include <vector>

#include <hjit/graph.h>

namespace hjit {

// Reverse-mode differentiation. `g`'s output number `output` must be a 0-d floating point value
// (the loss). Returns a graph with g's inputs and updates whose outputs are g's outputs followed by
// d(loss)/d(input) for each graph input position in `wrt` (zeros where the loss does not depend
// on it). Broadcasting is undone by summing over the broadcast axes. Throws ValueError for a loss
// that is not a 0-d float, or a `wrt` input that is not floating point.
Graph differentiate(const Graph& g, int output, const std::vector<int>& wrt);

}  // namespace hjit
