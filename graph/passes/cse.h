#pragma once
#include <hjit/graph.h>

namespace hjit {

// Common subexpression elimination: nodes with the same op, operands, attributes and type become
// one; constants with the same bytes become one. Parameters are never merged. Leaves dead nodes
// for DCE. Precondition: a verified graph.
Graph cse(const Graph& g);

}  // namespace hjit
