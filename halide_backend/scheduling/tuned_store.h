// Tuned schedules as the backend sees them: a store the tuning layer implements and registers
// (tuning/store.cpp), as schedules/ registers the Scheduler, so that the backend never includes
// tuning/ and the frontend reaches tuned schedules through compile() alone.
#pragma once
#include <optional>
#include <string>

#include <hjit/graph.h>

namespace hjit::backend {

struct TunedPipeline {
  Graph graph;           // the graph the schedule names Funcs of: g's inputs and outputs, in g's order
  std::string schedule;  // the best measured schedule's text form
};

class TunedStore {
 public:
  virtual ~TunedStore() = default;
  // The best schedule the tuning database at `db` knows for g on `device`; nullopt when it knows
  // none (or its best is the built-in schedule: what compile() does anyway). ValueError for a
  // missing, corrupt or foreign database.
  virtual std::optional<TunedPipeline> find(const Graph& g, Device device, const std::string& name,
                                            const std::string& db) const = 0;
};

// Called once, by tuning/, before the first compile.
void register_tuned_store(const TunedStore& store);
// Null when none was registered.
const TunedStore* tuned_store();

}  // namespace hjit::backend
