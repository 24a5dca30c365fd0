// Applying a schedule value to a freshly lowered pipeline: the one place where schedules become
// calls on Halide Funcs.
#pragma once
#include <map>
#include <set>
#include <string>

#include "halide_backend/lowered.h"
#include "halide_backend/schedule_value.h"

namespace hjit::backend {

// Every Func the pipeline's outputs reach, by canonical name (schedule_value.h). Throws
// InternalError if two Funcs share a canonical name (a lowering that named two Funcs alike).
std::map<std::string, Halide::Func> funcs_by_canonical_name(const LoweredPipeline& p);

// Extern stages are decided before lowering: a schedule names each with an `extern` directive
// ("n5_matmul extern sgemm"), read here to lower them so, and written by add_extern_directives
// for a lowered pipeline's extern stages.
std::set<int> extern_stages_of(const Schedule& s);
void add_extern_directives(const LoweredPipeline& p, Schedule& s);

// Applies the directives in order. Throws ValueError when the schedule names a Func or a loop the
// pipeline does not have, and Halide::CompileError when Halide rejects a directive.
void apply_schedule(const Schedule& s, LoweredPipeline& p);

}  // namespace hjit::backend
