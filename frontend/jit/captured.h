// The tensors a version reads besides its arguments: those the function captured when it was
// traced, read at every call.
#pragma once
#include <string>

#include "frontend/jit/version.h"

namespace hjit::detail {

// Input `input` of v's graph for this call: an argument, or a captured tensor.
TensorImpl& input_tensor(const Version& v, const CallArgs& args, size_t input);

// A captured tensor only v still holds was rebound or dropped by its owner after the trace
// (w = w - lr * g outside the function): the compiled code would read its old value forever.
// ValueError saying to assign() instead.
void check_captured_alive(const Version& v, const std::string& fn);

}  // namespace hjit::detail
