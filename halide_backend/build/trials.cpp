#include "halide_backend/build/trials.h"

#include <cmath>
#include <cstdio>

#include "halide_backend/scheduling/trial.h"
#include "support/log.h"

namespace hjit::backend {
namespace {

constexpr double kNoiseMs = 0.02;  // below ~20 us a run, timings are noise

// The built-in schedule's trial, the reference an autoscheduler's is compared with: its inputs,
// results and time. The inputs are made up: the built-in schedule may raise on them (an index out
// of range of a small table), which says nothing about the user's inputs, so integers are tried as
// varied values, then as zeros. Nullopt, with the reason, when neither runs.
struct Reference {
  TrialInts ints = TrialInts::Varied;
  std::optional<TrialBuffers> buffers;
  double ms = 0;
};
std::optional<Reference> reference_run(const Graph& g, const Executable& builtin, std::string* why) {
  Reference r;
  for (TrialInts tried : {TrialInts::Varied, TrialInts::Zeros}) {
    try {
      r.buffers.emplace(g, tried);
      r.ms = trial_ms(builtin, *r.buffers);
      r.ints = tried;
      return r;
    } catch (const Error& e) {
      r.buffers.reset();
      if (tried == TrialInts::Zeros) *why = std::string("no trial inputs run (") + e.what() + ")";
    }
  }
  return std::nullopt;
}

// The autoscheduler's candidate, built and run on the reference's inputs: empty, with the reason,
// when it does not schedule, build, run, or compute the reference's results.
Built candidate_run(const Graph& g, const Options& o, const Target& target, const ChoiceHandler& choice, const Reference& ref,
                    double* ms, std::string* why) {
  try {
    Built chosen = make(g, o, target, choice, why);
    if (!chosen.executable) return {};
    TrialBuffers trial(g, ref.ints);
    *ms = trial_ms(*chosen.executable, trial);
    const std::string diff = first_difference(trial, *ref.buffers);
    if (diff.empty()) return chosen;
    *why = "its schedule computes wrong results (" + diff + ")";
  } catch (const std::exception& e) {
    *why = std::string("its schedule failed: ") + e.what();
  }
  return {};
}

}  // namespace

Built build_guarded(const Graph& g, const Options& o, const Target& target, const Auto& how, const ChoiceHandler& choice) {
  constexpr double kTolerated = 1.5;
  const std::string name = autoscheduler_name(how.scheduler);
  const std::unique_ptr<const ChoiceHandler> builtin_choice = handler_for(BuiltIn{});
  auto fell_back = [&](Built builtin, const std::string& why) {
    log().warn("{} on '{}': {}; using the built-in schedule", name, g.name, why);
    builtin.executable->set_summary("built-in (" + name + " fell back: " + why + ")");
    return builtin;
  };
  std::string why;
  if (!target.kind().usable()) {
    // Nothing here can run it: the autoscheduler's schedule is used when it compiles.
    try {
      Built chosen = make(g, o, target, choice, &why);
      if (chosen.executable) return chosen;
    } catch (const Halide::Error& e) {
      why = std::string("its schedule failed: ") + e.what();
    }
    return fell_back(make(g, o, target, *builtin_choice), why);
  }
  Built builtin = make(g, o, target, *builtin_choice);
  const std::optional<Reference> ref = reference_run(g, *builtin.executable, &why);
  if (!ref) return fell_back(std::move(builtin), why);
  double auto_ms = 0;
  Built chosen = candidate_run(g, o, target, choice, *ref, &auto_ms, &why);
  if (chosen.executable && (auto_ms <= kTolerated * ref->ms || auto_ms - ref->ms < kNoiseMs)) {
    log().debug("{} on '{}': {:.3f} ms a run (built-in {:.3f} ms)", name, g.name, auto_ms, ref->ms);
    return chosen;
  }
  if (chosen.executable) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "its schedule ran %.1fx slower than the built-in one (%.3f ms vs %.3f ms a run)",
                  auto_ms / ref->ms, auto_ms, ref->ms);
    why = buf;
  }
  return fell_back(std::move(builtin), why);
}

Built build_fitted(const Graph& g, const Options& o, const Target& target, const BuiltinParams& fitted) {
  constexpr double kTolerated = 1.1;
  Built chosen = make(g, o, target, *handler_for(BuiltIn{fitted}));
  if (computes_nothing(g)) return chosen;
  Built rules = make(g, o, target, *handler_for(BuiltIn{}));
  for (TrialInts ints : {TrialInts::Varied, TrialInts::Zeros}) {
    try {
      TrialBuffers trial(g, ints);
      double fitted_ms = HUGE_VAL, rules_ms = HUGE_VAL;
      for (int round = 0; round < 3; ++round) {  // alternately: a burst of noise does not decide
        fitted_ms = std::min(fitted_ms, trial_ms(*chosen.executable, trial));
        rules_ms = std::min(rules_ms, trial_ms(*rules.executable, trial));
      }
      if (fitted_ms <= kTolerated * rules_ms || fitted_ms - rules_ms < kNoiseMs) return chosen;
      log().debug("param model on '{}': {} ran {:.3f} ms a run, the rules {:.3f} ms; using the rules", g.name, fitted.str(),
                  fitted_ms, rules_ms);
      char why[200];
      std::snprintf(why, sizeof why, "built-in (fitted %s ran %.2fx slower: %.4f ms a run against %.4f)", fitted.str().c_str(),
                    fitted_ms / rules_ms, fitted_ms, rules_ms);
      rules.executable->set_summary(why);
      return rules;
    } catch (const Error&) {
    }
  }
  return chosen;
}

}  // namespace hjit::backend
