#include "schedules/stage_info.h"

#include "graph/op_def.h"

namespace hjit::schedules {

bool is_source(const backend::Stage& s) { return has_trait(s.op, Source); }
bool has_reduction(const backend::Stage& s) { return !s.rvars.empty(); }
Halide::Type value_type(const backend::Stage& s) { return s.func.defined() ? s.func.output_types()[0] : Halide::Float(32); }

}  // namespace hjit::schedules
