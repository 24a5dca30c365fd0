// The build of one pipeline: make() is the ordered list of its passes (Halide's Lower.cpp is the
// model), each a function of its own, logged after it runs; build() hands a request to its kind's
// handler (build/choice.h), which runs make() as it is, after a check, or by trials.
#include "halide_backend/build/build.h"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>

#include <unistd.h>

#include "halide_backend/build/choice.h"
#include "halide_backend/codegen/codegen.h"
#include "halide_backend/codegen/device_pipeline.h"
#include "halide_backend/scheduling/apply_schedule.h"
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
// sizes it must (those it was traced at, or SymbolicSizes::serves_from) is lowered again and given
// guarded tails (a Func takes its schedule once).
void apply_with_tails(const Graph& g, const Target& target, const Schedule& s, LoweredPipeline& p, const SymbolicSizes* dynamic) {
  apply_schedule(s, p);
  if (!p.dynamic || p.min_dynamic_size <= smallest_served_size(p)) return;
  LoweredPipeline guarded;
  const std::optional<Schedule> again = handler_for(Given{s.str()})->lower_and_schedule(g, target, guarded, nullptr, dynamic);
  apply_schedule(*again, guarded, DynamicTails::Guarded);
  p = std::move(guarded);
}

// The code of p: a shared object (what the disk cache keeps), or Halide's JIT where no linker is.
Built generate_and_load(LoweredPipeline& p, const Target& target, PipelineInfo info) {
  Built b;
  b.shared_object = compile_shared_object(p, target, info);
  if (!b.shared_object && target.kind().shares_runtime())
    throw CompileError("hjit: GPU pipelines are linked into shared objects, and this machine has no linker (ld)");
  b.executable = b.shared_object ? load_shared_object(*b.shared_object, std::move(info)) : jit_compile(p, target, std::move(info));
  return b;
}

}  // namespace

Built make(const Graph& g, const Options& o, const Target& target, const ChoiceHandler& how, std::string* why) {
  Timer t;
  const std::string name = o.name.empty() ? g.name : o.name;
  LoweredPipeline p;
  std::string reason;
  std::optional<Schedule> s = how.lower_and_schedule(g, target, p, &reason, o.dynamic.get());
  if (!s) {
    if (why) *why = reason;
    log().debug("build '{}': not scheduled: {}", name, reason);
    return {};
  }
  log().debug("build '{}': lowered and scheduled ({}) in {:.1f} ms", name, s->source, t.ms());
  if (log().should_log(spdlog::level::trace)) {
    std::string notes;
    for (const std::string& line : s->notes) notes += "\n  " + line;
    log().trace("build '{}': schedule, one line per loop nest:{}", name, notes);
  }
  if (!o.in_place.empty()) compute_each_element_once(*s, p, o.in_place);
  apply_with_tails(g, target, *s, p, o.dynamic.get());
  log().debug("build '{}': schedule applied at {:.1f} ms", name, t.ms());
  PipelineInfo info = describe(g, p, function_name(name), how.summary(*s), s->str());
  Built b = generate_and_load(p, target, std::move(info));
  log().debug("build '{}': code generated and loaded at {:.1f} ms", name, t.ms());
  return b;
}

bool computes_nothing(const Graph& g) {
  for (int out : g.outputs)
    if (g.type(out).numel() > 0) return false;
  for (const Update& u : g.updates)
    if (g.type(u.value).numel() > 0) return false;
  return true;
}

Built build(const Graph& g, const Options& o, const Target& target) {
  install_reporter();
  try {
    return handler_for(o.schedule.choice)->build(g, o, target);
  } catch (const Halide::Error& e) {
    throw CompileError("hjit: Halide could not compile '" + g.name + "': " + e.what());
  }
}

LoweredPipeline scheduled_as_given(const Graph& g, const Target& target, const std::string& schedule_text,
                                   const SymbolicSizes* dynamic) {
  LoweredPipeline p;
  const std::optional<Schedule> s = handler_for(Given{schedule_text})->lower_and_schedule(g, target, p, nullptr, dynamic);
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
  const ScheduleChoice chosen = handler_for(how)->for_graph(g, target, extern_stages);
  std::optional<Schedule> s = handler_for(chosen)->lower_and_schedule(g, target, p, why, nullptr);
  if (!s) return std::nullopt;
  return s->str();
}

}  // namespace hjit::backend
