#include "halide_backend/build/build.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>

#include <unistd.h>

#include "halide_backend/scheduling/apply_schedule.h"
#include "halide_backend/codegen/codegen.h"
#include "halide_backend/codegen/device_pipeline.h"
#include "halide_backend/lowering/lower.h"
#include "halide_backend/scheduling/scheduler.h"
#include "halide_backend/scheduling/trial.h"
#include "support/child_process.h"
#include "support/log.h"

namespace hjit::backend {

std::mutex& compile_mutex() {
  static std::mutex mu;
  return mu;
}

namespace {

// Halide's warnings (storage folding notes and the like) go to the debug log instead of stderr:
// hjit is quiet by default. Errors still throw, as Halide's own reporter does.
class QuietReporter final : public Halide::CompileTimeErrorReporter {
 public:
  void warning(const char* msg) override { log().debug("halide: {}", msg); }
  void error(const char* msg) override { throw Halide::CompileError(msg); }
};

void install_reporter() {
  static QuietReporter reporter;
  static std::once_flag once;
  std::call_once(once, [] { Halide::set_custom_compile_time_error_reporter(&reporter); });
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// Halide compiles on a stack of its own, switched to with makecontext, which the sanitizers cannot
// follow (ASan reports stack-buffer-underflows inside libHalide that are not there). Sanitized
// builds compile on the calling thread's stack, every entry point included (make sanitize gives
// threads 64 MiB of stack). libHalide is initialized before this library, so this comes after it.
const bool kCompileOnCallingStack = (Halide::set_compiler_stack_size(0), true);
#endif

std::string function_name(const std::string& name) {
  static std::atomic<int> counter{0};
  std::string s = "hjit_";
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (s.size() > 40) s.resize(40);
  return s + "_" + std::to_string(counter++);
}

// The pipeline lowered and scheduled as `how` decides (a Given: as its text says). Extern stages
// are lowered as the schedule says before the rest of it applies.
std::optional<Schedule> lower_and_schedule(const Graph& g, const Target& target, const ScheduleChoice& how,
                                           LoweredPipeline& p, std::string* why, const SymbolicSizes* dynamic = nullptr) {
  if (const Given* given = std::get_if<Given>(&how)) {
    Schedule s = Schedule::parse(given->text);
    p = lower(g, target.halide(false), extern_stages_of(s), dynamic);
    return s;
  }
  p = lower(g, target.halide(false), scheduler().extern_stages(g, how), dynamic);
  std::optional<Schedule> s = scheduler().schedule(p, how, why);
  if (s) add_extern_directives(p, *s);
  return s;
}

// An output written over an input (Options::in_place) computes each element once: its splits are
// guarded instead of shifted inwards (a last vector shifted inwards reads elements the loop has
// already overwritten). Its other loops visit each element once, reading the input's element just
// before writing the output's (graph/passes/in_place.h says why nothing else reads the input).
void compute_each_element_once(Schedule& s, const LoweredPipeline& p, const std::vector<std::pair<int, int>>& pairs) {
  std::set<std::string> outputs;
  for (const auto& [input, slot] : pairs)
    if (p.outputs.at(size_t(slot)).defined()) outputs.insert(canonical_name(p.outputs[size_t(slot)].name()));
  auto guarded = [](std::string& tail) {
    if (tail == "Auto" || tail == "ShiftInwards") tail = "GuardWithIf";
  };
  for (Directive& d : s.directives) {
    if (!outputs.count(d.func)) continue;
    if (d.verb == "split" && d.args.size() == 5) guarded(d.args[4]);
    if ((d.verb == "vectorize" || d.verb == "unroll" || d.verb == "parallel") && d.args.size() >= 2) {
      if (d.args.size() == 2) d.args.push_back("Auto");
      guarded(d.args[2]);
    }
  }
}

// The schedule applied to p. A pipeline of dynamic sizes whose shifted tails would not serve the
// sizes it was traced at is lowered again and given guarded tails (a Func takes its schedule once).
void apply_with_tails(const Graph& g, const Target& target, const Schedule& s, LoweredPipeline& p, const SymbolicSizes* dynamic) {
  apply_schedule(s, p);
  if (!p.dynamic || p.min_dynamic_size <= smallest_traced_size(p)) return;
  LoweredPipeline guarded;
  const std::optional<Schedule> again = lower_and_schedule(g, target, Given{s.str()}, guarded, nullptr, dynamic);
  apply_schedule(*again, guarded, DynamicTails::Guarded);
  p = std::move(guarded);
}

// The built-in schedule with default parameters, on a CPU, takes those the fitted model picks for g
// (scheduler.h's fitted_params; the model was fitted on CPU timings).
ScheduleChoice with_fitted_params(const Graph& g, const Target& target, const ScheduleChoice& how) {
  const BuiltIn* b = std::get_if<BuiltIn>(&how);
  if (!b || !b->params.is_default() || target.is_gpu()) return how;
  return BuiltIn{scheduler().fitted_params(g, target.halide(false))};
}

// One candidate: lowered afresh, scheduled `how`, compiled. No executable (with the reason in
// *why) when the autoscheduler does not schedule it.
Built make(const Graph& g, const Options& o, const Target& target, const ScheduleChoice& how, std::string* why = nullptr) {
  LoweredPipeline p;
  std::string reason;
  std::optional<Schedule> s = lower_and_schedule(g, target, how, p, &reason, o.dynamic.get());
  if (!s) {
    if (why) *why = reason;
    return {};
  }
  if (!o.in_place.empty()) compute_each_element_once(*s, p, o.in_place);
  apply_with_tails(g, target, *s, p, o.dynamic.get());
  const std::string summary = std::holds_alternative<Given>(how) ? "tuned (" + s->source + ")" : ScheduleRequest{how}.str();
  PipelineInfo info = describe(g, p, function_name(o.name.empty() ? g.name : o.name), summary, s->str());
  Built b;
  b.shared_object = compile_shared_object(p, target, info);
  if (!b.shared_object && target.is_gpu())
    throw CompileError("hjit: GPU pipelines are linked into shared objects, and this machine has no linker (ld)");
  b.executable = b.shared_object ? load_shared_object(*b.shared_object, std::move(info)) : jit_compile(p, target, std::move(info));
  return b;
}

// An autoscheduler's schedule is used only when it compiles, runs, computes what the built-in
// schedule computes, and is not much slower on this very pipeline; otherwise the built-in schedule
// stands in, with a warning. (Halide 14's autoschedulers fail on some pipelines, emit schedules
// that do not compile, that read outside the buffers, or that compute wrong results (Adams2019's
// storage folding of a padded pooling input), and are sometimes an order of magnitude slower.)
Built build_guarded(const Graph& g, const Options& o, const Target& target, const Auto& how) {
  constexpr double kTolerated = 1.5, kNoiseMs = 0.02;  // below ~20 us a run, timings are noise
  const std::string name = autoscheduler_name(how.scheduler);
  auto fell_back = [&](Built builtin, const std::string& why) {
    log().warn("{} on '{}': {}; using the built-in schedule", name, g.name, why);
    builtin.executable->set_summary("built-in (" + name + " fell back: " + why + ")");
    return builtin;
  };
  if (target.is_gpu() && !device_usable(target.device())) {
    // Nothing here can run it: the autoscheduler's schedule is used when it compiles.
    std::string why;
    try {
      Built chosen = make(g, o, target, how, &why);
      if (chosen.executable) return chosen;
    } catch (const Halide::Error& e) {
      why = std::string("its schedule failed: ") + e.what();
    }
    return fell_back(make(g, o, target, BuiltIn{}), why);
  }
  Built builtin = make(g, o, target, BuiltIn{});
  // The trial's inputs are made up: the built-in schedule may raise on them (an index out of range
  // of a small table), which says nothing about the user's inputs.
  std::optional<TrialBuffers> reference;
  TrialInts ints = TrialInts::Varied;
  double builtin_ms = 0;
  for (TrialInts tried : {TrialInts::Varied, TrialInts::Zeros}) {
    try {
      reference.emplace(g, tried);
      builtin_ms = trial_ms(*builtin.executable, *reference);
      ints = tried;
      break;
    } catch (const Error& e) {
      reference.reset();
      if (tried == TrialInts::Zeros) return fell_back(std::move(builtin), std::string("no trial inputs run (") + e.what() + ")");
    }
  }
  TrialBuffers trial(g, ints);
  Built chosen;
  std::string why;
  double auto_ms = 0;
  try {
    chosen = make(g, o, target, how, &why);
    if (chosen.executable) {
      auto_ms = trial_ms(*chosen.executable, trial);
      std::string diff = first_difference(trial, *reference);
      if (!diff.empty()) why = "its schedule computes wrong results (" + diff + ")", chosen = {};
    }
  } catch (const std::exception& e) {
    why = std::string("its schedule failed: ") + e.what();
    chosen = {};
  }
  if (chosen.executable && (auto_ms <= kTolerated * builtin_ms || auto_ms - builtin_ms < kNoiseMs)) {
    log().debug("{} on '{}': {:.3f} ms a run (built-in {:.3f} ms)", name, g.name, auto_ms, builtin_ms);
    return chosen;
  }
  if (chosen.executable) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "its schedule ran %.1fx slower than the built-in one (%.3f ms vs %.3f ms a run)",
                  auto_ms / builtin_ms, auto_ms, builtin_ms);
    why = buf;
  }
  return fell_back(std::move(builtin), why);
}

// Whether the pipeline computes anything: every output (and update) may have no elements.
bool computes_nothing(const Graph& g) {
  for (int out : g.outputs)
    if (g.type(out).numel() > 0) return false;
  for (const Update& u : g.updates)
    if (g.type(u.value).numel() > 0) return false;
  return true;
}

// The fitted model's parameters for g, kept where a trial on made-up inputs does not find them
// slower than the rules': the model generalizes from pipelines near this one, not this one (the
// parameters that won on a matmul of 8 rows by 512 ran 1.6-2.4x slower on 12 rows). Where the trial
// inputs do not run, the fitted parameters stand.
Built build_fitted(const Graph& g, const Options& o, const Target& target, const BuiltinParams& fitted) {
  constexpr double kTolerated = 1.1, kNoiseMs = 0.02;  // below ~20 us a run, timings are noise
  Built chosen = make(g, o, target, BuiltIn{fitted});
  if (computes_nothing(g)) return chosen;
  Built rules = make(g, o, target, BuiltIn{});
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

}  // namespace

LoweredPipeline scheduled_as_given(const Graph& g, const Target& target, const std::string& schedule_text,
                                   const SymbolicSizes* dynamic) {
  LoweredPipeline p;
  const std::optional<Schedule> s = lower_and_schedule(g, target, Given{schedule_text}, p, nullptr, dynamic);
  apply_with_tails(g, target, *s, p, dynamic);
  return p;
}

std::string lowered_statement(const Graph& g, const Target& target, const std::string& schedule_text,
                              const SymbolicSizes* dynamic) {
  std::lock_guard lock(compile_mutex());
  install_reporter();
  char path[] = "/tmp/hjit_stmt_XXXXXX";
  try {
    LoweredPipeline p = scheduled_as_given(g, target, schedule_text, dynamic);
    const std::vector<Halide::Func> outs = defined_outputs(p);
    if (outs.empty()) return "(nothing is computed)\n";
    const int fd = mkstemp(path);
    if (fd < 0) return "(no temporary file for the statement)\n";
    close(fd);
    const Halide::Target t = lowering_target(p, target, false);
    device_ready_pipeline(outs, t, Buffers::ByHjit).compile_to_lowered_stmt(path, halide_arguments(p), Halide::Text, t);
  } catch (const Halide::Error& e) {
    std::remove(path);
    throw CompileError("hjit: Halide could not lower '" + g.name + "': " + e.what());
  }
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path);
  return text;
}

void check_schedule_in_child(const Graph& g, const Target& target, const std::string& schedule_text, double time_limit_s) {
  install_reporter();
  LoweredPipeline p;
  try {
    p = scheduled_as_given(g, target, schedule_text);
  } catch (const Halide::Error& e) {
    throw CompileError("hjit: the schedule given for '" + g.name + "' does not apply: " + e.what());
  }
  const std::vector<Halide::Func> outs = defined_outputs(p);
  if (outs.empty()) return;
  try {
    run_in_child([&] {
      const Halide::Target t = lowering_target(p, target, false);
      device_ready_pipeline(outs, t, Buffers::ByHjit).compile_to_module(halide_arguments(p), "check", t);
      return std::string("lowered");
    }, time_limit_s);
  } catch (const ValueError& e) {
    throw CompileError("hjit: Halide lowered '" + g.name + "' with the schedule given in a child process, and " + e.what());
  }
}

std::optional<std::string> decide(const Graph& g, const Target& target, const ScheduleChoice& how, std::string* why,
                                  bool extern_stages) {
  install_reporter();
  LoweredPipeline p;
  ScheduleChoice chosen = with_fitted_params(g, target, how);
  if (BuiltIn* b = std::get_if<BuiltIn>(&chosen); b && !extern_stages) b->params.extern_gemm = b->params.extern_conv = false;
  std::optional<Schedule> s = lower_and_schedule(g, target, chosen, p, why);
  if (!s) return std::nullopt;
  return s->str();
}

Built build(const Graph& g, const Options& o, const Target& target) {
  install_reporter();
  try {
    if (const Given* given = o.schedule.as<Given>()) {
      if (given->origin == ScheduleOrigin::File) check_schedule_in_child(g, target, given->text);
    } else if (const Auto* a = o.schedule.as<Auto>()) {
      if (!computes_nothing(g)) return build_guarded(g, o, target, *a);
      return make(g, o, target, BuiltIn{});  // nothing for an autoscheduler to schedule
    }
    const ScheduleChoice how = with_fitted_params(g, target, o.schedule.choice);
    if (!(how == o.schedule.choice)) return build_fitted(g, o, target, std::get<BuiltIn>(how).params);
    return make(g, o, target, how);
  } catch (const Halide::Error& e) {
    throw CompileError("hjit: Halide could not compile '" + g.name + "': " + e.what());
  }
}

}  // namespace hjit::backend
