// The linker that makes shared objects: of compiled pipelines (codegen/codegen.h) and of a GPU
// device's runtime (runtime/device_runtime.h).
#pragma once
#include <string>

namespace hjit::backend {

// Whether shared objects can be linked here (an ld on PATH, or HJIT_LINKER), and the linker.
bool can_link();
const std::string& linker_path();

}  // namespace hjit::backend
