// Indices a graph holds as values known before it runs (a literal in the traced code, a value the
// passes folded, a frozen parameter, an ONNX initializer), checked as eager checks them before the
// graph compiles. The compiled range check cannot stand in for this one: Halide folds a check of a
// constant index at compile time, and the clamp behind it would then answer silently.
#pragma once
#include <hjit/graph.h>

#include "graph/symbolic_sizes.h"

namespace hjit {

// Throws the IndexError eager execution raises for the first out-of-range constant index of a
// take or a check_index. An axis whose extent varies with `dynamic`'s symbols is left to the
// compiled check (its range is known at the call only).
void check_constant_indices(const Graph& g, const SymbolicSizes* dynamic = nullptr);

}  // namespace hjit
