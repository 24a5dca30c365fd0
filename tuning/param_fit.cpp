// hjit-tune --fit-model: the built-in schedule's parameter model (schedules/param_model.h) fitted
// to tuning databases. Each CPU pipeline a database holds is one sample: its features, and the
// built-in parameters that ran fastest on it (a library call is not the built-in schedule's to
// make), with their speed-up over the default parameters measured in the same run; the rules where
// the run's confirmation kept them.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>

#include <hjit/error.h>
#include <hjit/tune.h>

#include "halide_backend/builtin_params.h"
#include "schedules/param_model.h"
#include "tuning/candidates.h"
#include "tuning/database.h"

namespace hjit {
namespace {

using schedules::ParamSample;

// The built-in parameters a candidate's origin names ("built-in cols=3 rows=6"), or nothing for
// other schedulers and library calls.
std::optional<backend::BuiltinParams> builtin_params_of(const std::string& origin) {
  if (tuning::scheduler_of(origin) != "built-in") return std::nullopt;
  const size_t space = origin.find(' ');
  backend::BuiltinParams p;
  try {
    p = backend::BuiltinParams::parse(space == std::string::npos ? "" : origin.substr(space + 1));
  } catch (const ValueError&) {
    return std::nullopt;  // (a database of another version's knobs)
  }
  if (p.extern_gemm || p.extern_conv || p.extern_int_conv) return std::nullopt;
  return p;
}

std::optional<ParamSample> sample_of(tuning::Database& db, const tuning::PipelineRecord& p, std::string& why) {
  if (p.target.find("cuda") != std::string::npos || p.target.find("opencl") != std::string::npos)
    return why = "a GPU's", std::nullopt;
  Graph g;
  try {
    g = Graph::parse(p.graph);
  } catch (const Error& e) {
    return why = std::string("its graph does not parse: ") + e.what(), std::nullopt;
  }
  // The fastest of the rules' measurements and of all the built-in points' (tuning::faster).
  std::optional<tuning::CandidateRecord> rules, fastest;
  backend::BuiltinParams best;
  bool rules_confirmed = false;
  for (const tuning::CandidateRecord& c : db.candidates(p.id)) {
    const std::optional<backend::BuiltinParams> params = c.valid ? builtin_params_of(c.origin) : std::nullopt;
    if (!params || c.ms <= 0) continue;
    // (A run ends timing its best against the rules in alternating rounds, and marks the rules
    // best when the other is not 2% faster there: then the rules won, whatever single timings say.)
    if (params->is_default() && c.best) rules_confirmed = true;
    if (params->is_default() && (!rules || tuning::faster(c, *rules))) rules = c;
    if (!fastest || tuning::faster(c, *fastest)) fastest = c, best = *params;
  }
  if (rules_confirmed) fastest = rules, best = {};
  // Its gain over the rules: against their fastest measurement, else against the baseline timed
  // beside it or the pipeline's built-in time.
  const double gain = !fastest ? 0 : rules ? tuning::times_faster(*fastest, *rules) : tuning::speedup(*fastest, p.builtin_ms);
  if (gain <= 0) return why = "no built-in candidate measured", std::nullopt;
  ParamSample s;
  s.features = schedules::features_of(g, schedules::vector_bits_of(p.target));
  s.params = best;
  s.gain = std::max(1.0, gain);
  s.name = p.name + " " + p.signature;
  return s;
}

}  // namespace

std::string fit_param_model(const std::vector<std::string>& dbs, const std::string& out_path) {
  // One sample per place in feature space: the one whose parameters won most (the same pipeline
  // tuned in two databases, or two pipelines that look alike).
  std::map<std::string, ParamSample> by_place;
  std::string report;
  for (const std::string& path : dbs) {
    std::shared_ptr<tuning::Database> db = tuning::Database::open(path, false);
    for (const tuning::PipelineRecord& p : db->pipelines()) {
      std::string why;
      std::optional<ParamSample> s = sample_of(*db, p, why);
      if (!s) {
        report += "  skipped " + p.name + " (" + path + "): " + why + "\n";
        continue;
      }
      std::string place = s->features.kind;
      for (double v : s->features.v) place += " " + std::to_string(int(v * 100 + 0.5));
      auto [it, fresh] = by_place.emplace(place, *s);
      if (!fresh && s->gain > it->second.gain) it->second = *s;
    }
  }
  std::vector<ParamSample> samples;
  for (auto& [place, s] : by_place) samples.push_back(std::move(s));
  const schedules::ParamModel model(std::move(samples));
  std::ofstream out(out_path, std::ios::binary);
  out << model.str();
  if (!out.flush()) throw ValueError("hjit-tune --fit-model: cannot write '" + out_path + "'");
  int wins = 0;
  for (const ParamSample& s : model.samples()) {
    wins += !s.params.is_default();
    char line[512];
    std::snprintf(line, sizeof line, "  %-48.48s %-20s %5.2fx %s\n", s.name.c_str(), s.features.kind.c_str(), s.gain,
                  s.params.is_default() ? "(the rules)" : s.params.str().c_str());
    report += line;
  }
  return "parameter model " + out_path + " (" + model.identity() + "): " + std::to_string(model.samples().size()) +
         " samples, " + std::to_string(wins) + " with parameters of their own\n" + report;
}

}  // namespace hjit
