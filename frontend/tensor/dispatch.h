// "Ops record; backends run": every op of the API comes here. Inside a trace, when an operand is a
// tracer or a captured tensor, the op records a node; otherwise it infers the type with the same
// op table and runs the eager kernel at once.
#pragma once
#include <vector>

#include <hjit/graph.h>
#include <hjit/tensor.h>

namespace hjit::detail {

Tensor apply(OpKind op, const std::vector<Tensor>& inputs, Attrs attrs = {});

// A source op (iota): a node of the active trace, or computed now when nothing is traced.
Tensor apply_source(OpKind op, TensorType type, Attrs attrs);

// Runs one node eagerly on eager tensors (no tracing): the oracle the compiled code is tested against.
Tensor run_eager(OpKind op, const std::vector<Tensor>& inputs, const Attrs& attrs);

}  // namespace hjit::detail
