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

// Publishes v as built with `compiled` (counted as compiled or loaded; the function's schedule).
void finish_version(JitCore::State& s, Version& v, std::shared_ptr<CompiledFunction> compiled);

// The version chained after v in `slot` (Version::next for guards, other_flags for flags): made,
// traced and built by this call where there was none (logged as a re-trace for `reason`; the slot
// is emptied again if the build fails), else waited for while another call builds it.
struct ChainedVersion {
  std::shared_ptr<Version> version;
  bool built_here = false;
};
ChainedVersion chained_version(JitCore::State& s, Version& v, std::shared_ptr<Version> Version::*slot, const std::string& reason,
                               const CallArgs& args, Tracer trace);

}  // namespace hjit::detail
