// What the backend asks of a scheduler. The backend lowers, applies and compiles; deciding the
// schedule is schedules/'s job, which implements this interface and registers itself, so the
// backend never includes schedules/ (the two folders meet only at this header and at link time).
// One method per kind of decided schedule: which kind a request is, is the backend's to dispatch
// (build/choice.h), once.
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
  // The schedules of the lowered, unscheduled pipeline p (a GPU target's for a GPU target): one
  // stage per op, the built-in schedule with these parameters, an autoscheduler's (nullopt, with
  // the reason in *why, when it declines or fails: the caller falls back to the built-in one).
  virtual Schedule unfused(const LoweredPipeline& p) const = 0;
  virtual Schedule builtin(const LoweredPipeline& p, const BuiltinParams& params) const = 0;
  virtual std::optional<Schedule> autoscheduled(const LoweredPipeline& p, const Auto& how, std::string* why) const = 0;
  // Everything besides the graph and the target that each schedule depends on (versions,
  // parameters, threads, machine parameters): part of every cache key.
  virtual std::string unfused_identity() const = 0;
  virtual std::string builtin_identity(const BuiltinParams& params) const = 0;
  virtual std::string autoscheduled_identity(const Auto& how) const = 0;
  // The nodes the built-in schedule with these parameters computes with extern stages
  // (providers/extern_stages.h): decided on the graph, before lowering, which builds them differently.
  virtual std::set<int> extern_stages(const Graph& g, const BuiltinParams& params, bool fixed_sizes) const = 0;
  // The built-in schedule's parameters for g that the fitted model in use picks
  // (schedules/param_model.h): the defaults where it knows nothing near, or none is in use. Asked
  // for a CPU pipeline the built-in schedule with default parameters compiles; builtin_identity()
  // of the defaults names the model.
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
