// What the backend asks of a scheduler. The backend lowers, applies and compiles; deciding the
// schedule is schedules/'s job, which implements this interface and registers itself, so the
// backend never includes schedules/ (the two folders meet only at this header and at link time).
#pragma once
#include <optional>
#include <set>
#include <string>

#include <hjit/graph.h>

#include "halide_backend/schedule_request.h"
#include "halide_backend/scheduling/schedule_value.h"

namespace Halide {
struct Target;
}

namespace hjit::backend {

struct LoweredPipeline;

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // The schedule `how` (Unfused, BuiltIn or Auto; a Given is applied as it is) decides for the
  // lowered, unscheduled pipeline p. nullopt, with the reason in *why, when an autoscheduler declines
  // or fails (the caller falls back to the built-in schedule).
  virtual std::optional<Schedule> schedule(const LoweredPipeline& p, const ScheduleChoice& how, std::string* why) const = 0;
  // Everything besides the graph and the target that the schedule `how` depends on (versions,
  // parameters, threads, machine parameters): part of every cache key.
  virtual std::string identity(const ScheduleChoice& how) const = 0;
  // The nodes `how` computes with extern stages (extern_stages.h): decided on the graph, before
  // lowering, which builds them differently.
  virtual std::set<int> extern_stages(const Graph& g, const ScheduleChoice& how) const = 0;
  // The built-in schedule's parameters for g that the fitted model in use picks
  // (schedules/param_model.h): the defaults where it knows nothing near, or none is in use. Asked
  // for a CPU pipeline the built-in schedule with default parameters compiles; identity() of that
  // choice names the model.
  virtual BuiltinParams fitted_params(const Graph& g, const Halide::Target& target) const = 0;
  // Whether the built-in schedule stores an element-wise value of `op` that `readers` nodes read,
  // rather than recomputing it in each (estimate_peak_bytes counts the stored ones).
  virtual bool stores_elementwise(OpKind op, size_t readers) const = 0;
};

// Called once, by schedules/, before the first compile.
void register_scheduler(const Scheduler& s);
// Throws InternalError when none was registered.
const Scheduler& scheduler();

}  // namespace hjit::backend
