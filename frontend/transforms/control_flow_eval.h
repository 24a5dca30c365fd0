// Running a control flow op's graphs on tensors: how replay() and the eager kernels evaluate a
// cond, while_loop or scan node (the oracle its compiled form is tested against).
#pragma once
#include <vector>

#include <hjit/graph.h>
#include <hjit/tensor.h>

namespace hjit::detail {

// Every result of the op (attrs: its graphs; `result` is ignored) on eager operands. Call with
// traces suspended: the graphs' nodes run as eager ops.
std::vector<Tensor> run_control_flow(OpKind op, const std::vector<Tensor>& operands, const Attrs& attrs);

// Records the op's results as nodes of the active trace when an operand is traced or captured;
// otherwise runs it now.
std::vector<Tensor> apply_control_flow(OpKind op, const std::vector<Tensor>& operands, const Attrs& attrs);

}  // namespace hjit::detail
