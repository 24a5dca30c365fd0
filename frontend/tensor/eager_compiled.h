// Eager ops at compiled speed (EagerKernels::Compiled, <hjit/eager.h>): an op worth it runs as a
// single-op pipeline compiled like every pipeline (and cached in memory and on disk), as eager
// ops on a GPU always do (frontend/tensor/device.h). The plain kernels stay the reference.
#pragma once
#include <vector>

#include <hjit/graph.h>
#include <hjit/tensor.h>

namespace hjit::detail {

// Computes op into out (allocated, of the op's type, on the CPU) with a compiled pipeline and
// returns true; false when the plain kernel should run: EagerKernels::Plain, an op too small or
// of a class that compiling does not speed up, shapes seen for the first time, or a pipeline that
// did not compile (said once, at warning level).
bool run_compiled_eager(OpKind op, const std::vector<Tensor>& inputs, const Attrs& attrs, const Tensor& out);

}  // namespace hjit::detail
