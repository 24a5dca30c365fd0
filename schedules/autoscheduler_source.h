// Reading what Halide 14's autoschedulers return (AutoSchedulerResults::schedule_source, C++ text
// in three dialects: Adams2019's, Li2018's and Mullapudi2016's) into a schedule value.
#pragma once
#include <string>

#include "halide_backend/lowering/lowered.h"
#include "halide_backend/scheduling/schedule_value.h"

namespace hjit::schedules {

// `unscheduled`: the same graph lowered afresh, not yet scheduled; the source's references
// (pipeline.get_func(i), f.get_schedule().dims()[i].var, f.args()[i]) are resolved against it.
// Throws ValueError for C++ this reader does not understand (the caller then falls back).
backend::Schedule parse_autoscheduler_source(const std::string& source, const backend::LoweredPipeline& unscheduled);

}  // namespace hjit::schedules
