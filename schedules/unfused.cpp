// opt_level 0: one compute_root stage per op.
#include <sstream>

#include "schedules/loop_nest.h"
#include "schedules/reduction.h"
#include "schedules/schedule.h"
#include "schedules/stage_info.h"

namespace hjit::schedules {

using backend::Stage;

std::string unfused_identity() { return "unfused v1 threads=" + std::to_string(halide_threads()); }

backend::Schedule schedule_unfused(const backend::LoweredPipeline& p) {
  const int threads = halide_threads();
  Schedule out;
  std::ostringstream os;
  auto name = [](const Halide::Func& f) { return backend::canonical_name(f.name()); };
  for (const Stage& s : p.stages) {
    if (is_source(s) || !s.func.defined() || (s.consumers.empty() && !s.is_output)) continue;
    const int vec = vector_width(p.target, value_type(s));
    FuncRef f(&out, s.func);
    if (has_reduction(s)) {
      // The accumulator is the op's stage; its reader is a copy, kept only when it is an output.
      FuncRef(&out, s.reduction).compute_root();
      os << name(s.reduction) << ": root " << schedule_reduction(p, s, true, out) << schedule_helpers_at_root(p, s, out) << "\n";
      if (!s.is_output) continue;
    } else if (!s.is_output) {
      f.compute_root();
    }
    if (!has_reduction(s) && !s.helpers.empty()) os << name(s.func) << " steps:" << schedule_helpers_at_root(p, s, out) << "\n";
    os << name(s.func) << ": root " << vectorize_and_parallelize(f, s.vars, s.extents, vec, threads).what << "\n";
  }
  for (size_t k = 0; k < p.outputs.size(); ++k)
    if (p.output_is_wrapper[k] && p.outputs[k].defined()) {
      const Stage& s = p.stages[size_t(p.output_node[k])];
      os << name(p.outputs[k]) << ": "
         << vectorize_and_parallelize(FuncRef(&out, p.outputs[k]), s.vars, s.extents, vector_width(p.target, value_type(s)),
                                      threads)
                .what
         << "\n";
    }
  out.notes = note_lines(os.str());
  out.source = unfused_identity();
  return out;
}

}  // namespace hjit::schedules
