// TraceMode::Concrete: a call runs eagerly while recording, and each value it reads is a guard: the
// compiled graph computes it as an extra output, and a later call whose value differs runs the
// version that read that value, or traces a new one (by running the call eagerly), instead of
// reusing the branch taken first.
#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "frontend/jit/state.h"

namespace hjit::detail {

// Whether the values v read while it was traced read the same in this call (its outputs after the
// function's own); else the index of the first that differs.
std::optional<size_t> failed_guard(const Version& v, const std::vector<Tensor>& outputs);

struct GuardedRun {
  std::shared_ptr<Version> version;  // the version whose results `outputs` are
  int64_t donated_bytes = 0;         // donated storage the results took
  // No version's guards held: this call traced a new one by running eagerly, so `outputs` are
  // the function's results and its assign()s are done.
  bool traced = false;
  // Held until the call's updates are applied: the version's update buffers serve one call at a
  // time (CompiledFunction::lock_for_call).
  std::unique_lock<std::mutex> call_lock;
};
// Runs v, then the versions chained after it, until one whose guards hold (no guards: v). Where
// none holds, this call traces a new version at the end of the chain.
GuardedRun run_until_guards_hold(JitCore::State& s, std::shared_ptr<Version> v, const CallArgs& args, Tracer trace,
                                 bool reuse_donated, std::vector<Tensor>& outputs);

}  // namespace hjit::detail
