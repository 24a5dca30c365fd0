// Tuning databases as the backend's store of tuned schedules (halide_backend/scheduling/tuned_store.h):
// compile() asks it for every graph when a tuning database is named.
#include "halide_backend/scheduling/tuned_store.h"
#include "tuning/database.h"
#include "tuning/pipeline_key.h"

namespace hjit::tuning {
namespace {

class DatabaseStore final : public backend::TunedStore {
 public:
  std::optional<backend::TunedPipeline> find(const Graph& g, Device device, const std::string& name,
                                             const std::string& db) const override {
    const PipelineRecord p = describe_pipeline(g, device, name);
    std::optional<std::string> schedule = best_schedule(db, p.key);
    if (!schedule) return std::nullopt;
    // The schedule names the Funcs of the canonical graph: same inputs and outputs, in the same order.
    return backend::TunedPipeline{canonical_graph(g), std::move(*schedule)};
  }
};

const bool registered = [] {
  static const DatabaseStore instance;
  backend::register_tuned_store(instance);
  return true;
}();

}  // namespace
}  // namespace hjit::tuning
