#include "frontend/jit/captured.h"

namespace hjit::detail {

TensorImpl& input_tensor(const Version& v, const CallArgs& args, size_t input) {
  return input < args.count ? *args.tensor(input).impl() : *v.captured[input - args.count];
}

void check_captured_alive(const Version& v, const std::string& fn) {
  for (size_t j = 0; j < v.captured.size(); ++j)
    if (v.captured[j].use_count() == 1)
      throw ValueError("jit '" + fn + "': the tensor " + v.captured[j]->type.str() + " the function captured (input " +
                       std::to_string(v.num_args + j) + ") is no longer held by anything but the compiled function: it "
                       "was rebound (w = w - lr * g) or destroyed after the function was traced, and the compiled code "
                       "would keep reading its old value. Update captured tensors in place (w.assign(w - lr * g)).");
}

}  // namespace hjit::detail
