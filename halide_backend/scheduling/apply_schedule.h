// Applying a schedule value to a freshly lowered pipeline: the one place where schedules become
// calls on Halide Funcs.
#pragma once
#include <map>
#include <set>
#include <string>

#include "halide_backend/lowering/lowered.h"
#include "halide_backend/scheduling/schedule_value.h"

namespace hjit::backend {

// Every Func the pipeline's outputs reach, by canonical name (schedule_value.h). Throws
// InternalError if two Funcs share a canonical name (a lowering that named two Funcs alike).
std::map<std::string, Halide::Func> funcs_by_canonical_name(const LoweredPipeline& p);

// Extern stages are decided before lowering: a schedule names each with an `extern` directive
// ("n5_matmul extern sgemm"), read here to lower them so, and written by add_extern_directives
// for a lowered pipeline's extern stages.
std::set<int> extern_stages_of(const Schedule& s);
void add_extern_directives(const LoweredPipeline& p, Schedule& s);

// How a pipeline of dynamic sizes ends a split of a loop whose extent varies (decided at the
// traced size). Shifted inwards, the steady state of every loop stays free of guards, but the
// extent must reach the split factor: smaller sizes compile a pipeline of their own. Guarded, the
// pipeline serves every size, at a cost where tiles hold intermediate stages (W10's attention at
// 64-256 positions: 1.4-1.9x the shifted pipeline's time; a small GPT's generation step: the
// same). build() shifts them where the traced sizes reach every split, and guards them otherwise
// (a model first called at one token, as generation is, gets one pipeline for every length).
enum class DynamicTails { Shifted, Guarded };
// Applies the directives in order. Throws ValueError when the schedule names a Func or a loop the
// pipeline does not have, and Halide::CompileError when Halide rejects a directive.
void apply_schedule(const Schedule& s, LoweredPipeline& p, DynamicTails tails = DynamicTails::Shifted);
// The smallest value of a dynamic pipeline's symbols it must serve: the traced sizes', or less
// where SymbolicSizes::serves_from says so (0 without dynamic sizes).
int64_t smallest_served_size(const LoweredPipeline& p);

}  // namespace hjit::backend
