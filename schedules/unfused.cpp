// opt_level 0: one compute_root stage per op.
#include <sstream>

#include "schedules/loop_nest.h"
#include "schedules/reduction.h"
#include "schedules/schedule.h"
#include "schedules/stage_info.h"

namespace hjit::schedules {

using backend::Stage;

std::string schedule_unfused(backend::LoweredPipeline& p) {
  const int threads = halide_threads();
  std::ostringstream os;
  for (Stage& s : p.stages) {
    if (is_source(s) || !s.func.defined() || (s.consumers.empty() && !s.is_output)) continue;
    const int vec = vector_width(p.target, value_type(s));
    if (has_reduction(s)) {
      // The accumulator is the op's stage; its reader is a copy, kept only when it is an output.
      s.reduction.compute_root();
      os << s.reduction.name() << ": root " << schedule_reduction(p, s, true) << schedule_helpers_at_root(p, s) << "\n";
      if (!s.is_output) continue;
    } else if (!s.is_output) {
      s.func.compute_root();
    }
    os << s.func.name() << ": root " << vectorize_and_parallelize(s.func, s.vars, s.extents, vec, threads).what << "\n";
  }
  for (size_t k = 0; k < p.outputs.size(); ++k)
    if (p.output_is_wrapper[k] && p.outputs[k].defined()) {
      const Stage& s = p.stages[size_t(p.output_node[k])];
      os << p.outputs[k].name() << ": "
         << vectorize_and_parallelize(p.outputs[k], s.vars, s.extents, vector_width(p.target, value_type(s)), threads).what
         << "\n";
    }
  return os.str();
}

}  // namespace hjit::schedules
