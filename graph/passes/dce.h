#pragma once
#include <hjit/graph.h>

namespace hjit {

// Dead code elimination: keeps the nodes that outputs and updates need, and every parameter (the
// signature never changes). Precondition: a verified graph.
Graph dce(const Graph& g);

}  // namespace hjit
