// Building a version: the function traced on the call's arguments, optimized and compiled (for
// every size of its dynamic dimensions where one pipeline can serve them), then published to the
// callers waiting for it.
#pragma once
#include <functional>

#include "frontend/jit/state.h"
#include "frontend/tracing/trace.h"

namespace hjit::detail {

// Builds v (a new signature, or a new guarded version of one) and publishes it (v.built). On
// failure v is published failed (waiters rethrow) and the exception propagates. `setup`
// (optional) prepares the trace (fullgraph = false: its on_read).
void build_version(JitCore::State& s, Version& v, const CallArgs& args, Tracer trace,
                   const std::function<void(TraceState&)>& setup = nullptr);

}  // namespace hjit::detail
