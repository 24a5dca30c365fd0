// The control flow ops' eager kernels: one result of the op, computed from its graphs (constant
// folding and one-node evaluation come here; replay() runs all results of a node group at once).
#include <cstring>

#include "frontend/transforms/control_flow_eval.h"
#include "frontend/eager/kernel.h"
#include "frontend/tensor/tensor_impl.h"
#include "frontend/tracing/trace.h"

namespace hjit::eager {
namespace {

void one_result(const KernelArgs& a) {
  std::vector<Tensor> operands;
  for (const In& in : a.in) operands.push_back(Tensor::from_bytes(in.data, size_t(in.type->numel()) * size_t(dtype_size(in.type->dtype)), in.type->shape, in.type->dtype));
  detail::SuspendTraces eager;
  const Tensor r = detail::run_control_flow(a.op, operands, a.attrs)[size_t(a.attrs.i("result"))];
  const size_t bytes = size_t(a.out.type->numel()) * size_t(dtype_size(a.out.type->dtype));
  if (bytes > 0) std::memcpy(a.out.data, r.impl()->data(), bytes);
}

}  // namespace

void Cond(const KernelArgs& a) { one_result(a); }
void While(const KernelArgs& a) { one_result(a); }
void Scan(const KernelArgs& a) { one_result(a); }
void Checkpoint(const KernelArgs& a) { one_result(a); }

}  // namespace hjit::eager
