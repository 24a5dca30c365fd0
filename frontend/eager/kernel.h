// The eager kernels: plain C++ with OpenMP, one per op kind (declared from the op list, so a
// missing kernel is a link error). They are the reference implementation every compiled result is
// tested against, and they must stay honest loops the compiler can vectorize.
#pragma once
#include <vector>

#include <hjit/graph.h>

namespace hjit::eager {

struct In {
  const void* data;
  const TensorType* type;
};
struct Out {
  void* data;
  const TensorType* type;
};
struct KernelArgs {
  OpKind op;
  const Attrs& attrs;
  std::vector<In> in;
  Out out;
};
using Kernel = void (*)(const KernelArgs&);

#define HJIT_DECLARE_KERNEL(kind, name, arity, traits, attrs, infer, sched) void kind(const KernelArgs& a);
HJIT_OPS(HJIT_DECLARE_KERNEL)
#undef HJIT_DECLARE_KERNEL

Kernel kernel_for(OpKind op);

}  // namespace hjit::eager
