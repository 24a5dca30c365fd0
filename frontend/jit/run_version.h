// Running a compiled version on a call's tensors: buffers bound (results allocated, or computed
// into donated storage), the pipeline run, and the new values of assign()ed tensors made theirs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/jit/version.h"

namespace hjit::detail {

// Runs v on the call's arguments and v's captured tensors; `outputs` gets one tensor per output
// (the function's results, then the guards'). On a GPU, operands are in the device's memory (CPU
// tensors copied up for the call) and results stay there. reuse_donated: results may be computed
// into donated arguments' storage (frontend/jit/donation.h); returns the bytes so reused.
int64_t run_version(Version& v, const CallArgs& args, std::vector<Tensor>& outputs, Device device, bool reuse_donated);

// The new values of updated tensors become theirs: a tensor's storage and the buffer its new value
// was computed into trade their bytes (double buffering: no copy, and the next call computes into
// the old bytes; every handle of the tensor sees the new value). Copied only where the two differ
// in size or device. Returns the bytes copied.
int64_t apply_updates(const Version& v, const CallArgs& args);

// The storage an update writes: the argument's or the captured tensor's. An argument whose
// storage is borrowed from another tensor (same_value) gets its own first, as assign() does.
TensorImpl& update_target(const Version& v, const CallArgs& args, size_t input);

// A captured tensor only v still holds was rebound or dropped by its owner after the trace
// (w = w - lr * g outside the function): the compiled code would read its old value forever.
// ValueError saying to assign() instead.
void check_captured_alive(const Version& v, const std::string& fn);

}  // namespace hjit::detail
