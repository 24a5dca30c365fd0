// What the backend does for each kind of schedule request (schedule_request.h: Unfused, BuiltIn,
// Auto, Given): one object per kind, made by the one std::visit over a request's choice
// (choice.cpp). Every other place asks the object; a kind added to ScheduleChoice does not compile
// until it has its object there.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "halide_backend/build/build.h"
#include "halide_backend/scheduling/schedule_value.h"

namespace hjit::backend {

class ChoiceHandler {
 public:
  virtual ~ChoiceHandler() = default;
  // Everything besides the graph and the target the code depends on: part of every cache key.
  virtual std::string identity() const = 0;
  // How a big graph compiles in parts (build/partition.h): not at all, cut to bound each part's
  // compile time (unfused), or besides in two halves at once, one in a child process (built-in;
  // with a disk cache). Parts alike are scheduled alike by these two.
  enum class Partitioning { None, Bounded, Halves };
  virtual Partitioning partitioning() const = 0;
  // Whether a tuning database's schedule may stand in for it (all but a schedule given as it is).
  virtual bool tunable() const = 0;
  // g lowered into p and its schedule: decided by the scheduler (nullopt, with the reason in *why,
  // when an autoscheduler declines) or, given, parsed. Extern stages are lowered as the schedule
  // says before the rest of it applies.
  virtual std::optional<Schedule> lower_and_schedule(const Graph& g, const Target& target, LoweredPipeline& p, std::string* why,
                                                     const SymbolicSizes* dynamic) const = 0;
  // Builds g as this kind is built: the passes of make() as they are, after a check in a child
  // process (a schedule from a file), or by trial runs (an autoscheduler's against the built-in
  // schedule, fitted parameters against the rules).
  virtual Built build(const Graph& g, const Options& o, const Target& target) const = 0;
  // The choice a build takes for g: the built-in schedule with default parameters on a CPU takes
  // those the fitted model picks (without extern stages when `extern_stages` is false).
  virtual ScheduleChoice for_graph(const Graph& g, const Target& target, bool extern_stages) const = 0;
  // The one line naming a pipeline's schedule ("built-in cols=3", "tuned (built-in cols=2)").
  virtual std::string summary(const Schedule& s) const = 0;
};

// The one dispatch over a request's choice.
std::unique_ptr<const ChoiceHandler> handler_for(const ScheduleChoice& choice);

}  // namespace hjit::backend
