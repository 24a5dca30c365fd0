// Jitted::into: a result computed into the storage of a tensor the caller keeps (out=).
#include <hjit/error.h>
#include <hjit/jit.h>

#include "frontend/tensor/device.h"
#include "frontend/tensor/tensor_impl.h"

namespace hjit::detail {

const Tensor* prepare_into(Tensor& out, const CallArgs& call, const std::string& fn) {
  const TensorImpl& o = impl_of(out, "Jitted::into");
  if (o.traced()) throw ValueError("jit '" + fn + "': into: out is a traced value; inside a traced function, assign() it");
  make_writable(*out.impl());
  if (o.device() != Device::CPU) return nullptr;
  // An argument read through out's storage would be overwritten while the call reads it.
  for (size_t i = 0; i < call.count; ++i)
    if (call.tensor(i).impl()->storage == o.storage) return nullptr;
  return &out;
}

void finish_into(Tensor& out, const Tensor& result, const std::string& fn) {
  if (result.same_storage(out)) return;
  if (result.dtype() != out.dtype() || result.shape() != out.shape())
    throw ValueError("jit '" + fn + "': into: the result is " + result.impl()->type.str() + " but out is " +
                     out.impl()->type.str() + "; into writes a result of out's dtype and shape");
  out.assign(result);
}

}  // namespace hjit::detail
