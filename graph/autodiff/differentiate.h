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

// The vector-Jacobian product of g (a graph without updates), for the bodies of control flow:
// inputs are g's inputs, then one cotangent per output (of that output's type; ignored for
// non-float outputs); outputs are the cotangent of each floating point input, in input order
// (zeros where no output depends on it). g's forward values are recomputed inside.
Graph vjp(const Graph& g);

// Positions of g's floating point inputs: the inputs vjp(g) gives cotangents for, in its order.
std::vector<int> float_inputs(const Graph& g);

}  // namespace hjit
