// Func names as hjit writes them down: Halide's unique_name() appends $<n> to a name already used
// in the process, which canonical_name removes, so that the same graph lowered in another process
// (or twice in one) names its Funcs alike (schedules refer to them by these names).
#pragma once
#include <string>

namespace hjit::backend {

std::string canonical_name(const std::string& halide_name);

}  // namespace hjit::backend
