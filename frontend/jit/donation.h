// JitOptions::donate (JAX's donate_argnums): arguments a call consumes. A result computed from a
// donated argument element by element is written into its storage where the compiled code allows
// it (graph/passes/in_place.h) and nothing else holds that storage; after the call every donated
// argument holds nothing, reused or not.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/jit/version.h"

namespace hjit::detail {

// Each position names one of the call's tensor arguments, once (ValueError otherwise).
void check_donate(const std::string& fn, const std::vector<int>& donate, const CallArgs& args);
// A donated argument the function also captures (reads as a tensor of its own) would leave the
// compiled function without its storage at the next call: ValueError.
void check_donated_not_captured(const std::string& fn, const std::vector<int>& donate, const Version& v, const CallArgs& args);
// (Where a result takes a donated argument's storage is the compiled function's to decide at each
// call: frontend/compiled/function.h, RunOptions::reuse_donated.)
// After the call: donated arguments give their storage up (a result that took it holds it now).
// Tracers (a jitted function called inside another trace) have none.
void consume_donated(const std::string& fn, const std::vector<int>& donate, const CallArgs& args);

}  // namespace hjit::detail
