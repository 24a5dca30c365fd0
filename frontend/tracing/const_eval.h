// The constant folder's evaluator: one node run on constant operands with the eager kernels.
#pragma once
#include <vector>

#include <hjit/graph.h>

namespace hjit::detail {

ConstData evaluate_node(const Node& node, const std::vector<TensorType>& in_types, const std::vector<ConstData>& in_data);

}  // namespace hjit::detail
