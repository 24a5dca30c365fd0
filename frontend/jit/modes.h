// Host flags a version was traced with (hjit::traced_flag: a module's train/eval mode): a call
// whose flags read otherwise runs the version of its signature traced with those values, or
// traces one, chained after the version the cache holds.
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "frontend/jit/build_version.h"

namespace hjit::detail {

// v, or the version chained after it whose flags hold, built here where none does (built_here:
// traced and compiled by this call; in TraceMode::Concrete, run too).
ChainedVersion version_for_flags(JitCore::State& s, std::shared_ptr<Version> v, const CallArgs& args, Tracer trace);

}  // namespace hjit::detail
