// jit(): a call is a short sequence of steps, each a feature of its own in frontend/jit/: find the
// version for the call's signature or build it (version_cache, build_once, build_version,
// dynamic_sizes), run it until its guards hold (guards, run_version, donation), check a new one
// against eager (check_trace), make assign()ed values the tensors' (run_version), consume donated
// arguments (donation). fullgraph = false calls run in segments instead (graph_breaks).
#include <cstdlib>
#include <hjit/jit.h>

#include "frontend/jit/build_version.h"
#include "frontend/jit/check_trace.h"
#include "frontend/jit/debug_nans.h"
#include "frontend/jit/donation.h"
#include "frontend/jit/graph_breaks.h"
#include "frontend/jit/guards.h"
#include "frontend/jit/modes.h"
#include "frontend/jit/captured.h"
#include "frontend/jit/state.h"
#include "frontend/tracing/traced.h"
#include "halide_backend/devices.h"
#include "support/log.h"
#include "support/settings.h"
#include "support/thread_pool.h"

namespace hjit::detail {

JitCore::State::State(JitOptions o)
    : opt(std::move(o)), cache(opt.max_cache_entries), retraces(opt.name, opt.warn_after_retraces, !opt.dynamic_dims.empty()), dynamic(opt.dynamic_dims) {
  request.name = opt.name;
  request.device = opt.device;
  request.cuda_capability = opt.cuda_capability;
  request.schedule = backend::schedule_request(
      "jit '" + opt.name + "'",
      {.opt_level = opt.opt_level, .autoscheduler = opt.autoscheduler, .tuning_db = opt.tuning_db, .device = opt.device});
  request.donate = opt.donate;
}

void JitCore::State::set_schedule(std::string summary) {
  std::lock_guard lock(schedule_mu_);
  schedule_ = std::move(summary);
}

std::string JitCore::State::schedule() const {
  std::lock_guard lock(schedule_mu_);
  return schedule_;
}

namespace {

// The keys a call's version is found under, in order: with dynamic_dims, the version for every
// size (its key leaves those dimensions out), then one of these exact sizes.
struct Keys {
  uint64_t hashes[2];
  size_t count = 1;
  Keys(const JitCore::State& s, const CallArgs& args) {
    const DynamicDims* dyn = s.dynamic.dims();
    hashes[0] = Signature::hash_of(args, s.opt.name, dyn);
    if (dyn) hashes[1] = Signature::hash_of(args, s.opt.name), count = 2;
  }
  uint64_t every_size() const { return hashes[0]; }
  uint64_t exact() const { return hashes[count - 1]; }
  // Without the version for every size (found not to serve these sizes).
  std::span<const uint64_t> to_look_up(bool exact_only) const {
    return exact_only ? std::span<const uint64_t>(hashes + count - 1, 1) : std::span<const uint64_t>(hashes, count);
  }
};

std::shared_ptr<Version> find(JitCore::State& s, const CallArgs& args, const Keys& keys, bool exact_only) {
  for (uint64_t h : keys.to_look_up(exact_only))
    if (std::shared_ptr<Version> v = s.cache.find(h, args)) return v;
  return nullptr;
}

// A new version for the call: for every size where one pipeline may serve them, else for these.
std::shared_ptr<Version> new_version(JitCore::State& s, const CallArgs& args, const Keys& keys, bool exact_only) {
  const DynamicDims* dyn = s.dynamic.dims();
  const bool every_size = dyn && !exact_only && s.dynamic.impossible().empty();
  auto v = std::make_shared<Version>();
  v->fixed_sizes = dyn && !every_size;
  v->key = Signature::of(args, every_size ? keys.every_size() : keys.exact(), every_size ? dyn : nullptr);
  s.retraces.on_trace(v->key);
  return v;
}

struct Acquired {
  std::shared_ptr<Version> version;
  bool built_here = false;
};

// The version that runs this call: one lookup, then a wait while another caller builds it; or,
// where there is none, one made, built and published here.
Acquired acquire(JitCore::State& s, const CallArgs& args, Tracer trace) {
  const Keys keys(s, args);
  for (bool exact_only = false;; exact_only = true) {
    std::shared_ptr<Version> v = find(s, args, keys, exact_only);
    if (!v) {
      auto [found, made] = s.cache.find_or_insert(keys.to_look_up(exact_only), args, [&] { return new_version(s, args, keys, exact_only); });
      if (made) {
        try {
          build_version(s, *found, args, trace);
          check_donated_not_captured(s.opt.name, s.opt.donate, *found, args);
        } catch (...) {
          s.cache.forget(found);
          throw;
        }
        if (found->sizes_key) s.cache.rekey(found, *found->sizes_key);  // built for these sizes only
        s.retraces.on_built(found->key);
        return {found, true};
      }
      v = found;
    }
    v->built.wait();
    if (serves(*v, args)) return {v, false};
  }
}

// A version of these arguments' signature compiled aside, not run or cached here (explain() and
// device_code() of a signature not called yet).
std::shared_ptr<CompiledFunction> compile_aside(JitCore::State& s, const CallArgs& args, Tracer trace) {
  Traced tr = trace_and_optimize(s.opt.name, false, args, trace, nullptr, s.opt.memory_budget_mb);
  return CompiledFunction::compile(std::move(tr.graph), s.request);
}

// The version these arguments run, built (null when there is none, or its build failed).
std::shared_ptr<Version> built_version_for(JitCore::State& s, const CallArgs& args) {
  std::shared_ptr<Version> v = find(s, args, Keys(s, args), false);
  return v && v->built.succeeded() ? v : nullptr;
}

}  // namespace

std::vector<Tensor> JitCore::call(const CallArgs& args, Tracer trace, const std::vector<int>** tree) {
  State& s = *s_;
  const ThreadLimit threads(s.opt.threads);
  if (!s.opt.fullgraph) {
    thread_local std::shared_ptr<Version> last;  // keeps the result structure alive for the caller
    SegmentedCall call = call_in_segments(s, args, trace, true);
    last = std::move(call.last);
    *tree = &last->tree;
    return std::move(call.outputs);
  }
  const bool donates = !s.opt.donate.empty();
  if (donates) check_donate(s.opt.name, s.opt.donate, args);
  auto [version, built_here] = acquire(s, args, trace);
  if (!built_here && !version->flags.empty()) {
    ChainedVersion f = version_for_flags(s, std::move(version), args, trace);
    version = std::move(f.version), built_here = f.built_here;
  }
  std::vector<Tensor> outputs;
  if (built_here && s.opt.trace_mode == TraceMode::Concrete) {  // the tracing call ran eagerly
    outputs = std::move(version->first_outputs);
    *tree = &version->tree;
  } else {
    if (!built_here) {
      ++s.hits;
      check_captured_alive(*version, s.opt.name);
      if (donates) check_donated_not_captured(s.opt.name, s.opt.donate, *version, args);
    }
    const bool check = built_here && s.opt.check_trace;
    // (debug_nans replays the call on its arguments: none may be consumed.)
    const GuardedRun ran = run_until_guards_hold(s, version, args, trace, donates && !check && !s.opt.debug_nans, outputs);
    s.donated_bytes_reused += ran.donated_bytes;
    *tree = &ran.version->tree;
    if (!ran.traced) {
      if (check) {
        try {
          check_against_eager(s.opt.name, s.opt.check_tolerance, *ran.version, args, trace, outputs);
        } catch (...) {
          s.cache.forget(version);  // a retry must not find the unchecked version
          throw;
        }
      }
      if (s.opt.debug_nans) check_finite(s.opt.name, *ran.version, args, outputs);
      if (!ran.version->fn->update_inputs().empty())
        s.update_bytes_copied += ran.version->fn->apply_updates(ran.version->inputs(args).view());
      outputs.resize(ran.version->num_outputs());
    }
  }
  if (donates) consume_donated(s.opt.name, s.opt.donate, args);
  return outputs;
}

JitCore::JitCore(JitOptions options) {
  const std::string who = "jit '" + options.name + "'";
  if (options.check_tolerance < 0) throw ValueError(who + ": check_tolerance must be >= 0");
  if (options.threads < 0) throw ValueError(who + ": threads must be >= 0 (0: the process's default), got " + std::to_string(options.threads));
  const backend::DeviceKind& device = backend::device_kind(options.device);
  if (!options.fullgraph && !device.dynamic_sizes())
    throw ValueError(who + ": fullgraph = false runs its segments on the CPU; a function for " + device_name(options.device) +
                     " must trace to one graph (fullgraph = true)");
  if (!options.fullgraph && options.trace_mode == TraceMode::Concrete)
    throw ValueError(who + ": choose fullgraph = false (the function runs at every call, reads break the graph) or "
                     "TraceMode::Concrete (reads are guards of one graph), not both");
  if (!options.dynamic_dims.empty() && (!device.dynamic_sizes() || options.trace_mode == TraceMode::Concrete || !options.fullgraph))
    throw ValueError(who + ": dynamic_dims needs a CPU function traced once into one graph (Device::CPU, "
                     "TraceMode::Symbolic, fullgraph = true)");
  for (const auto& [arg, axis] : options.dynamic_dims)
    if (arg < 0) throw ValueError(who + ": dynamic_dims names argument " + std::to_string(arg));
  options.debug_nans |= setting::flag(setting::Id::DebugNans);
  s_ = std::make_unique<State>(std::move(options));  // the schedule options are checked there
}

JitCore::~JitCore() = default;
const JitOptions& JitCore::options() const { return s_->opt; }

JitStats JitCore::stats() const {
  const State& s = *s_;
  JitStats st;
  st.traces = s.traces.load(), st.compiles = s.compiles.load(), st.loaded = s.loaded.load(), st.cache_hits = s.hits.load();
  st.compile_ms = double(s.compile_us.load()) / 1000.0, st.schedule = s.schedule();
  st.entries = int64_t(s.cache.size());
  st.evictions = s.cache.evictions();
  st.guard_failures = s.guard_failures.load();
  st.graph_breaks = s.graph_breaks.load();
  st.dynamic_entries = s.dynamic_entries.load();
  st.recompile_warning = s.retraces.warning();
  st.update_bytes_copied = s.update_bytes_copied.load();
  st.donated_bytes_reused = s.donated_bytes_reused.load();
  for (const auto& v : s.cache.all())
    if (v->built.built()) st.temporary_bytes = std::max(st.temporary_bytes, v->fn->executable().temporary_bytes());
  return st;
}

Graph JitCore::graph(const CallArgs& args, Tracer trace) {
  if (std::shared_ptr<Version> v = built_version_for(*s_, args)) return v->graph();
  return trace_and_optimize(s_->opt.name, false, args, trace, nullptr, s_->opt.memory_budget_mb).graph;
}

std::string JitCore::explain(const CallArgs& args, Tracer trace) {
  if (!s_->opt.fullgraph) return explain_segments(s_->opt.name, call_in_segments(*s_, args, trace, false));
  if (std::shared_ptr<Version> v = built_version_for(*s_, args))  // the version these arguments run
    return (v->dynamic ? "one pipeline for every size of the dynamic dimensions:\n" + v->dynamic->str() + "\n\n" : "") +
           v->fn->executable().explain();
  return compile_aside(*s_, args, trace)->executable().explain();
}

std::string JitCore::device_code(const CallArgs& args, Tracer trace) {
  return compile_aside(*s_, args, trace)->executable().device_code();
}

}  // namespace hjit::detail
