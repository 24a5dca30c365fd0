#include "tuning/use.h"

#include <cstdlib>

#include "support/log.h"
#include "tuning/database.h"
#include "tuning/pipeline_key.h"

namespace hjit::tuning {

std::string tuning_db_path(const std::string& db) {
  if (!db.empty()) return db;
  const char* env = std::getenv("HJIT_TUNING_DB");
  return env ? env : "";
}

backend::Compiled compile_tuned(const Graph& g, const backend::Options& o, const std::string& db_path) {
  if (db_path.empty() || !o.schedule_text.empty()) return backend::compile(g, o);
  Timer t;
  const PipelineRecord p = describe_pipeline(g, o.device, o.name);
  std::optional<std::string> schedule = best_schedule(db_path, p.key);
  if (!schedule) {
    log().debug("tuning: '{}' is not in {} ({:.2f} ms to look); compiling as without it", g.name, db_path, t.ms());
    return backend::compile(g, o);
  }
  log().debug("tuning: '{}' has a tuned schedule in {} ({:.2f} ms to look)", g.name, db_path, t.ms());
  backend::Options tuned = o;
  tuned.schedule_text = *schedule;
  tuned.schedule_from_file = true;
  try {
    return backend::compile(canonical_graph(g), tuned);  // same inputs and outputs, in the same order
  } catch (const Error& e) {
    log().warn("tuning: the tuned schedule of '{}' in {} does not apply ({}); compiling as without it", g.name, db_path,
               e.what());
    return backend::compile(g, o);
  }
}

}  // namespace hjit::tuning
