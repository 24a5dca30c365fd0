// Running a graph through the op API: each node becomes the same op applied to Tensors, so a graph
// replays eagerly when nothing is traced, and becomes nodes of the active trace when something is
// (how grad() puts its gradient graph into a jitted function).
#pragma once
#include <functional>
#include <vector>

#include <hjit/graph.h>
#include <hjit/tensor.h>

namespace hjit::detail {

// inputs: one tensor per graph input. The graph's updates are applied to those input tensors with
// assign. Returns the graph's outputs. `after_node`, when given, sees each node's value as soon as
// it is computed (debug_nans looks for the first that is not finite).
using NodeObserver = std::function<void(size_t node, const std::vector<Tensor>& values)>;
std::vector<Tensor> replay(const Graph& g, const std::vector<Tensor>& inputs, const NodeObserver& after_node = {});

}  // namespace hjit::detail
