// JitOptions::check_trace: a new version's first call is run eagerly too, on the same inputs, and
// its results and updates are compared with the compiled ones.
#pragma once
#include <string>
#include <vector>

#include "frontend/jit/version.h"

namespace hjit::detail {

// Max |compiled - eager| against tolerance * (1 + |eager|): "" when within, else what differs.
std::string compare_with_eager(const Tensor& compiled, const Tensor& eager, double tolerance, const std::string& what);

// The function run eagerly on the call's arguments (its updated tensors put back as they were
// after), compared with what v computed: its outputs, and the new values in v.update_buffers.
// CompileError naming the first difference.
void check_against_eager(const std::string& fn, double tolerance, const Version& v, const CallArgs& args, Tracer trace,
                         const std::vector<Tensor>& outputs);

}  // namespace hjit::detail
