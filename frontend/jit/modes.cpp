#include "frontend/jit/modes.h"

#include "frontend/tracing/trace.h"

namespace hjit::detail {

ChainedVersion version_for_flags(JitCore::State& s, std::shared_ptr<Version> v, const CallArgs& args, Tracer trace) {
  while (!flags_hold(v->flags)) {
    ChainedVersion other = chained_version(s, *v, &Version::other_flags,
                                           "a flag read while tracing (a module's train/eval mode) differs from every version's", args, trace);
    if (other.built_here) return {other.version, true};
    v = std::move(other.version);
  }
  return {v, false};
}

}  // namespace hjit::detail
