#pragma once
#include <functional>
#include <vector>

#include <hjit/graph.h>

namespace hjit {

// Runs one node on constant operands and returns the bytes of its result. The frontend supplies it
// (built on the eager kernels): the graph layer knows no kernels and no storage.
using ConstEvaluator =
    std::function<ConstData(const Node& node, const std::vector<TensorType>& in_types, const std::vector<ConstData>& in_data)>;

// Constant folding. A node whose operands are all uniform fulls becomes a full when it is
// elementwise (evaluated once on scalars) or moves data; a node whose operands are all constants
// becomes a constant when its result has at most max_elements elements. A constant of one element
// becomes a full. Precondition: verified.
Graph fold_constants(const Graph& g, const ConstEvaluator& eval, int64_t max_elements = 1 << 16);

}  // namespace hjit
