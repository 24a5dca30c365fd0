// Building a compiled pipeline for a graph: lower, ask the scheduler for a schedule, apply it,
// generate code; and the guard that keeps an autoscheduler's schedule only when it earns its place.
#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "halide_backend/backend.h"
#include "halide_backend/runtime/executable.h"
#include "halide_backend/codegen/target.h"
#include "halide_backend/lowering/lowered.h"

namespace hjit::backend {

// Held while Halide compiles or lowers anything: its compiler keeps process-global state.
std::mutex& compile_mutex();

struct Built {
  std::shared_ptr<HalideExecutable> executable;
  std::optional<std::string> shared_object;  // its code, for the disk cache (none when JIT-compiled)
};

// g lowered, with the schedule of that text form applied (as build() applied it: extern stages,
// tails of dynamic sizes). Call under compile_mutex(); throws Halide's errors.
LoweredPipeline scheduled_as_given(const Graph& g, const Target& target, const std::string& schedule_text,
                                   const SymbolicSizes* dynamic = nullptr);

// Halide's lowered statement for g with the schedule of that text form (explain()).
std::string lowered_statement(const Graph& g, const Target& target, const std::string& schedule_text,
                              const SymbolicSizes* dynamic = nullptr);

// Parses the schedule of that text form and applies it to g here (their errors are typed), then
// has Halide lower the result in a child process: CompileError when the child does not come back
// (a crash inside Halide, or no result in time_limit_s). Call under compile_mutex().
void check_schedule_in_child(const Graph& g, const Target& target, const std::string& schedule_text, double time_limit_s = 120);

// The schedule text `how` decides for g (backend.h's decide_schedule). Call under compile_mutex().
// extern_stages false: none, whatever the fitted parameters would choose (code for another machine).
std::optional<std::string> decide(const Graph& g, const Target& target, const ScheduleChoice& how, std::string* why,
                                  bool extern_stages = true);

// Builds the pipeline as o.schedule chooses (its tuning database is compile()'s to consult, not
// this function's): the choice's handler (build/choice.h) says how. Throws CompileError when Halide
// rejects it. Call under compile_mutex().
Built build(const Graph& g, const Options& o, const Target& target);

class ChoiceHandler;

// One pipeline built, pass by pass (each logged at debug level): lowered and scheduled as `how`
// says, in-place outputs guarded, the schedule applied (tails for dynamic sizes), described, its
// code generated (a shared object, or Halide's JIT where no linker is installed), loaded. No
// executable (with the reason in *why) when an autoscheduler does not schedule it.
Built make(const Graph& g, const Options& o, const Target& target, const ChoiceHandler& how, std::string* why = nullptr);

// Whether the pipeline computes anything: every output (and update) may have no elements.
bool computes_nothing(const Graph& g);

}  // namespace hjit::backend
