// The collectives' eager kernels: the exchange itself (distributed/collectives.h), which the
// compiled graphs' host steps run too.
#include "distributed/collectives.h"
#include "frontend/eager/kernel.h"

namespace hjit::eager {
namespace {

void exchange(const KernelArgs& a) {
  const In* in = a.in.empty() ? nullptr : &a.in[0];
  distributed::run_collective(a.op, a.attrs, in ? in->type : nullptr, in ? in->data : nullptr, *a.out.type, a.out.data);
}

}  // namespace

void AllReduce(const KernelArgs& a) { exchange(a); }
void AllGather(const KernelArgs& a) { exchange(a); }
void ReduceScatter(const KernelArgs& a) { exchange(a); }
void DistBroadcast(const KernelArgs& a) { exchange(a); }
void Send(const KernelArgs& a) { exchange(a); }
void Recv(const KernelArgs& a) { exchange(a); }

}  // namespace hjit::eager
