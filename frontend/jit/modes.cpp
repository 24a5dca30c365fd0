#include "frontend/jit/modes.h"

#include "frontend/jit/build_version.h"
#include "frontend/tracing/trace.h"

namespace hjit::detail {

FlaggedVersion version_for_flags(JitCore::State& s, std::shared_ptr<Version> v, const CallArgs& args, Tracer trace) {
  while (!flags_hold(v->flags)) {
    std::shared_ptr<Version> other;
    bool claimed = false;
    {
      std::lock_guard lock(v->next_mu);
      if (!v->other_flags) {
        v->other_flags = std::make_shared<Version>();
        v->other_flags->key = v->key;
        claimed = true;
      }
      other = v->other_flags;
    }
    if (claimed) {
      s.retraces.on_trace(other->key, "a flag read while tracing (a module's train/eval mode) differs from every version's");
      try {
        build_version(s, *other, args, trace);
      } catch (...) {
        std::lock_guard lock(v->next_mu);
        v->other_flags = nullptr;
        throw;
      }
      return {other, true};
    }
    other->built.wait();
    v = other;
  }
  return {v, false};
}

}  // namespace hjit::detail
