// hjit-tune --merge: tuning databases of separate runs become one. A candidate is copied as it was
// measured and never made best by the copy (a run's fastest-looking candidate may have lost its
// confirmation); each pipeline's best is then the fastest of the bests its runs kept.
#include <filesystem>
#include <optional>
#include <set>
#include <tuple>

#include <hjit/error.h>
#include <hjit/tune.h>

#include "tuning/database.h"

namespace hjit {
namespace {

// What makes two records one measurement (ids differ between databases).
using Measured = std::tuple<std::string, std::string, double, bool, std::string, double>;
Measured measured(const tuning::CandidateRecord& c) { return {c.origin, c.schedule, c.ms, c.valid, c.error, c.at_s}; }

}  // namespace

std::string merge_tuning_databases(const std::string& into, const std::vector<std::string>& from) {
  std::shared_ptr<tuning::Database> out = tuning::Database::open(into, true);
  std::string account;
  std::set<std::filesystem::path> seen{std::filesystem::weakly_canonical(into)};
  for (const std::string& path : from) {
    if (!seen.insert(std::filesystem::weakly_canonical(path)).second)
      throw ValueError("hjit-tune --merge: '" + path + "' is given twice (or is the database merged into)");
    std::shared_ptr<tuning::Database> in = tuning::Database::open(path, false);
    int pipelines = 0, added_pipelines = 0, copied = 0, new_best = 0;
    for (const tuning::PipelineRecord& p : in->pipelines()) {
      ++pipelines;
      const bool existed = out->find_pipeline(p.key).has_value();
      tuning::PipelineRecord q = p;
      q.id = 0;
      q = out->pipeline(q);
      added_pipelines += !existed;
      out->add_tuning_time(q.id, p.tuning_s);
      if (q.builtin_ms <= 0 && p.builtin_ms > 0) out->set_builtin_ms(q.id, p.builtin_ms);
      std::set<Measured> have;
      for (const tuning::CandidateRecord& c : out->candidates(q.id)) have.insert(measured(c));
      const std::optional<tuning::CandidateRecord> kept = out->best(q.id), theirs = in->best(p.id);
      std::optional<int64_t> theirs_here;
      for (tuning::CandidateRecord c : in->candidates(p.id)) {
        const bool is_theirs = theirs && c.id == theirs->id;
        if (have.count(measured(c))) continue;  // merged before
        c.pipeline = q.id, c.best = false;
        const int64_t id = out->add(c, false);
        have.insert(measured(c));
        ++copied;
        if (is_theirs) theirs_here = id;
      }
      if (theirs_here && (!kept || tuning::faster(*theirs, *kept))) {
        out->mark_best(q.id, *theirs_here);
        ++new_best;
      }
    }
    account += "merged " + path + " into " + into + ": " + std::to_string(pipelines) + " pipelines (" + std::to_string(added_pipelines) +
               " new), " + std::to_string(copied) + " candidates copied, " + std::to_string(new_best) + " bests from it\n";
  }
  return account;
}

}  // namespace hjit
