// JitOptions::donate (JAX's donate_argnums): arguments a call consumes. A result computed from a
// donated argument element by element is written into its storage where the compiled code allows
// it (graph/passes/in_place.h) and nothing else holds that storage; after the call every donated
// argument holds nothing, reused or not.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/jit/version.h"
#include "halide_backend/backend.h"

namespace hjit::detail {

// Each position names one of the call's tensor arguments, once (ValueError otherwise).
void check_donate(const std::string& fn, const std::vector<int>& donate, const CallArgs& args);
// A donated argument the function also captures (reads as a tensor of its own) would leave the
// compiled function without its storage at the next call: ValueError.
void check_donated_not_captured(const std::string& fn, const std::vector<int>& donate, const Version& v, const CallArgs& args);
// The (input, output slot) pairs the backend may compute into one buffer, for a graph traced with
// these donated arguments (graph outputs only: an update's value trades storage with its tensor
// anyway).
std::vector<std::pair<int, int>> donatable_outputs(const Graph& g, const std::vector<int>& donate);
// Per output of v: the donated argument whose storage it is computed into, or -1. Where the
// compiled code allows it (Executable::in_place) and nothing else holds the storage: no other
// tensor shares it, and no other argument or captured input is that tensor.
std::vector<int> donated_storage_for_outputs(const Version& v, const CallArgs& args);
// After the call: donated arguments give their storage up (a result that took it holds it now).
// Tracers (a jitted function called inside another trace) have none.
void consume_donated(const std::string& fn, const std::vector<int>& donate, const CallArgs& args);

}  // namespace hjit::detail
