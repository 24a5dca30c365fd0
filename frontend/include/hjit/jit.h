// hjit::jit: trace a C++ function over Tensors once per signature, compile it with Halide, and run
// the compiled code on every later call with the same signature.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <hjit/detail/function_ref.h>
#include <hjit/detail/static_key.h>
#include <hjit/graph.h>
#include <hjit/tensor.h>

namespace hjit {

enum class TraceMode {
  Symbolic,  // tensors are tracers: reading a value throws ConcretizationError
  Concrete   // a call runs eagerly while recording: values can be read (item, bool, to_vector),
             // each read is a guard; a later call whose reads differ traces another version
             // (like torch.jit.trace, without freezing the branch taken first)
};

struct JitOptions {
  std::string name{};          // shows in logs, stats, errors and cache entries
  Device device = Device::CPU;
  int cuda_capability = 80;    // Device::CUDA: compute capability of the PTX (Halide 14: 30 to 86;
                               // 80 and 86 run on newer GPUs through the driver)
  // The schedule: checked when jit() is called (ValueError naming the function for a bad one).
  int opt_level = 2;           // 0: one stage per op, no fusion (the unfused baseline);
                               // 1: fusion + built-in schedules;
                               // 2: the named autoscheduler's schedule, kept where it beats the
                               //    built-in one (as 1 when none is named)
  std::string autoscheduler{}; // "" (none), "Adams2019", "Li2018", "Mullapudi2016" (opt_level 2; for
                               // a GPU, Li2018)
  TraceMode trace_mode = TraceMode::Symbolic;
  // false: reading a traced value (item, bool, to_vector) breaks the graph instead of throwing
  // ConcretizationError: the function runs at every call, the graph up to the read is computed
  // (compiled and cached like any pipeline) and C++ goes on with the value. Host code in
  // exclude_from_trace runs at every call. explain() lists the segments and why each ended.
  bool fullgraph = true;
  bool check_trace = false;    // compare each new compilation with eager execution
  double check_tolerance = 1e-5;
  // Check every call's results and assigned values for NaNs and infinities (JAX's debug_nans; also
  // on with HJIT_DEBUG_NANS=1). On one, nothing is assigned, the function runs again eagerly op by
  // op on the same inputs, and FloatingPointError names the first op that made a NaN (or an
  // infinity from finite inputs) and which of its inputs already held one. Costs a read of every
  // result per call; fullgraph functions only.
  bool debug_nans = false;
  // A tuning database (hjit/tune.h): a pipeline it knows runs its best measured schedule instead
  // of the one opt_level chooses (found compiled in the disk cache when the tuning run left it
  // there), with no search; other pipelines compile as without it. opt_level 1 or 2. Default:
  // $HJIT_TUNING_DB when set (at opt_level 1 or 2).
  std::string tuning_db{};
  // Re-traces (a new signature, or a guard that failed) past this many log a warning naming what
  // keeps changing: the jit-in-a-loop and shape-churn pitfalls. 0: never warn.
  int warn_after_retraces = 8;
  // Compiled versions kept per function; past this the least recently used is dropped. 0: no bound.
  size_t max_cache_entries = 64;
  // Dimensions whose size may change from call to call with no new trace or compile: {argument,
  // axis} pairs (axis < 0 counts from the end; every tensor of a std::vector<Tensor> argument).
  // They leave the cache key, and one pipeline serves every size: its extents are expressions of
  // the arguments' sizes (found by tracing again at other sizes), its schedule the built-in one
  // chosen at the first call's sizes (docs/jit.md: which sizes it serves). Where that cannot hold
  // (C++ that branches on the size, an op that compiles for fixed sizes only) the function compiles
  // per size as without it, and a warning says why, once. Kept in the disk cache. CPU only.
  std::vector<std::pair<int, int>> dynamic_dims{};
  // Gradients taken inside the function (grad, value_and_grad) are planned so that the step holds
  // at most this many MiB at once beyond its arguments, as estimated before compiling: past it, the
  // forward pass is cut into runs that are checkpointed (recomputed in the backward pass, as
  // hjit::checkpoint), as few as fit: MegEngine's sublinear memory. A budget no plan meets gets the
  // plan estimated to hold least, and a warning. 0: keep everything.
  int64_t memory_budget_mb = 0;
  // Arguments the call consumes (positions among its tensor arguments, a std::vector<Tensor>'s
  // tensors counted one by one): JAX's donate_argnums. A result of the argument's dtype and shape
  // computed from it element by element (x * a + b, an optimizer's update returned as a result) is
  // written into the argument's storage instead of new memory, where hjit can prove every element
  // is read before it is overwritten; stats().donated_bytes_reused counts it. After the call a
  // donated tensor holds nothing, reused or not: reading it or passing it to an op throws
  // ValueError, until assign() gives it a value again. x = f(x) then needs one buffer, not two.
  std::vector<int> donate{};
};

struct JitStats {
  int64_t traces = 0;       // times the function was traced
  int64_t compiles = 0;     // pipelines compiled (a trace may find its pipeline already compiled)
  int64_t cache_hits = 0;   // calls that ran compiled code without tracing
  double compile_ms = 0;    // time spent tracing, optimizing and compiling
  std::string schedule;     // of the latest compilation: "built-in", "unfused", "Adams2019", ..., or
                            // "built-in (Li2018 fell back: <why>)"
  int64_t entries = 0;      // compiled versions in the function's cache now
  int64_t evictions = 0;    // versions dropped as least recently used (max_cache_entries)
  int64_t graph_breaks = 0;   // fullgraph = false: values read, each ending a segment
  int64_t guard_failures = 0;  // TraceMode::Concrete: calls whose values read differed from a version's
  int64_t dynamic_entries = 0;  // dynamic_dims: versions compiled once for every size of those dims
  std::string recompile_warning;  // the latest re-trace warning ("" when none was given)
  int64_t temporary_bytes = 0;    // the most one call of a compiled version took besides its
                                  // arguments and results (memory_stats() has every pipeline's)
  int64_t update_bytes_copied = 0;  // bytes copied into assign()ed tensors after calls: 0 on the
                                    // CPU, where a new value trades storage with the old one
  int64_t donated_bytes_reused = 0;  // bytes of results written into donated arguments' storage
};

// The compile cache, process-wide: pipelines found in memory, loaded from the disk cache, and
// compiled. The disk cache lives in HJIT_CACHE_DIR (default $XDG_CACHE_HOME/hjit, else
// ~/.cache/hjit; set and empty: off), at most HJIT_CACHE_MAX_MB (default 2048) megabytes, least
// recently used entries evicted first.
struct CacheStats {
  int64_t memory_hits = 0;    // compiles answered by this process's own compiled pipelines
  int64_t disk_hits = 0;      // pipelines loaded from the disk cache instead of compiled
  int64_t misses = 0;         // pipelines compiled
  int64_t disk_rejected = 0;  // disk entries that failed their checks (corrupt, truncated, foreign): compiled again
  int64_t disk_writes = 0;
  int64_t disk_evictions = 0;
  int64_t disk_entries = 0;   // on disk now, and their size
  int64_t disk_bytes = 0;
  std::string directory;      // "" when the disk cache is off
  // The shared tier behind the disk (HJIT_CACHE_REDIS=host:port with HJIT_CACHE_KEY_FILE or
  // HJIT_CACHE_KEY; docs/saving-export-cache.md): entries another machine compiled (counted in
  // disk_hits too), entries refused for want of a valid tag, entries shared.
  int64_t shared_hits = 0;
  int64_t shared_rejected = 0;
  int64_t shared_writes = 0;
  std::string shared;         // host:port, "" when the shared tier is off
};
CacheStats cache_stats();

namespace detail {

using Tracer = FunctionRef<std::vector<Tensor>(const std::vector<Tensor>& args, std::vector<int>* tree)>;

// One call's arguments, flattened: the tensors (with the position of the argument each came from)
// and the static values.
struct CallArgs {
  static constexpr int kInline = 16;
  const Tensor* inline_tensors[kInline];
  int inline_index[kInline];
  std::vector<const Tensor*> more_tensors;
  std::vector<int> more_index;
  size_t count = 0;
  StaticKey statics;
  bool any_traced = false;
  // Jitted::into: the tensor whose storage the first result is computed into, where it can be.
  const Tensor* into = nullptr;

  void push(const Tensor& t, int arg) {
    if (count < kInline) inline_tensors[count] = &t, inline_index[count] = arg;
    else more_tensors.push_back(&t), more_index.push_back(arg);
    ++count;
    any_traced |= t.is_traced();
  }
  const Tensor& tensor(size_t i) const { return i < kInline ? *inline_tensors[i] : *more_tensors[i - kInline]; }
  int arg_index(size_t i) const { return i < kInline ? inline_index[i] : more_index[i - kInline]; }
};

// The type-erased part of jit(): signature cache, tracing, compiling, running. In frontend/jit.cpp.
class JitCore {
 public:
  explicit JitCore(JitOptions options);
  ~JitCore();
  std::vector<Tensor> call(const CallArgs& args, Tracer trace, const std::vector<int>** tree);
  Graph graph(const CallArgs& args, Tracer trace);
  std::string explain(const CallArgs& args, Tracer trace);
  std::string device_code(const CallArgs& args, Tracer trace);
  JitStats stats() const;
  const JitOptions& options() const;
  struct State;  // defined in frontend/jit/state.h

 private:
  std::unique_ptr<State> s_;
};

// exclude_from_trace's check: host code inside a trace that runs only once is an error.
void check_host_code_allowed();

// Traces without compiling: the raw graph, as make_jaxpr shows it.
Graph trace_graph(const std::string& name, const CallArgs& args, Tracer trace);
bool tracing_active();
std::string default_name(const std::type_info& fn_type);

// ---- flattening arguments and results
template <class T>
using Bare = std::remove_cvref_t<T>;
template <class T>
inline constexpr bool is_tensor = std::is_same_v<Bare<T>, Tensor>;
template <class T>
inline constexpr bool is_tensor_list = std::is_same_v<Bare<T>, std::vector<Tensor>>;

template <class A>
void collect(CallArgs& c, int index, const A& a) {
  if constexpr (is_tensor<A>) {
    c.push(a, index);
  } else if constexpr (is_tensor_list<A>) {
    for (const Tensor& t : a) c.push(t, index);
    if (a.empty()) c.statics.add(index, std::string("<empty tensor list>"));
  } else {
    static_assert(HashableStatic<Bare<A>> || std::is_convertible_v<const A&, std::string>,
                  "hjit::jit: an argument that is not an hjit::Tensor or std::vector<hjit::Tensor> is static: its "
                  "value is part of the cache key, so its type must be arithmetic, an enum, std::string, or have "
                  "std::hash and operator==. Pass arrays as hjit::Tensor instead.");
    c.statics.add(index, a);
  }
}

// The argument the traced function sees in place of `a`.
template <class A>
decltype(auto) substitute(const A& a, const std::vector<Tensor>& tracers, size_t& k) {
  if constexpr (is_tensor<A>) {
    return Tensor(tracers[k++]);
  } else if constexpr (is_tensor_list<A>) {
    std::vector<Tensor> v(tracers.begin() + std::ptrdiff_t(k), tracers.begin() + std::ptrdiff_t(k + a.size()));
    k += a.size();
    return v;
  } else {
    return static_cast<const A&>(a);
  }
}

template <class R>
struct Result;  // flatten/unflatten of a traced function's result
template <>
struct Result<Tensor> {
  static void flatten(const Tensor& r, std::vector<Tensor>& out, std::vector<int>*) { out.push_back(r); }
  static Tensor unflatten(std::vector<Tensor>& in, size_t& pos, const std::vector<int>&, size_t&) { return std::move(in[pos++]); }
};
template <>
struct Result<std::vector<Tensor>> {
  static void flatten(const std::vector<Tensor>& r, std::vector<Tensor>& out, std::vector<int>* tree) {
    tree->push_back(int(r.size()));
    out.insert(out.end(), r.begin(), r.end());
  }
  static std::vector<Tensor> unflatten(std::vector<Tensor>& in, size_t& pos, const std::vector<int>& tree, size_t& t) {
    std::vector<Tensor> v;
    for (int i = 0; i < tree[t]; ++i) v.push_back(std::move(in[pos++]));
    ++t;
    return v;
  }
};
template <class... Ts>
struct Result<std::tuple<Ts...>> {
  static void flatten(const std::tuple<Ts...>& r, std::vector<Tensor>& out, std::vector<int>* tree) {
    std::apply([&](const auto&... x) { (Result<Bare<decltype(x)>>::flatten(x, out, tree), ...); }, r);
  }
  static std::tuple<Ts...> unflatten(std::vector<Tensor>& in, size_t& pos, const std::vector<int>& tree, size_t& t) {
    return std::tuple<Ts...>{Result<Ts>::unflatten(in, pos, tree, t)...};  // braces: left to right
  }
};
template <class A, class B>
struct Result<std::pair<A, B>> {
  static void flatten(const std::pair<A, B>& r, std::vector<Tensor>& out, std::vector<int>* tree) {
    Result<A>::flatten(r.first, out, tree);
    Result<B>::flatten(r.second, out, tree);
  }
  static std::pair<A, B> unflatten(std::vector<Tensor>& in, size_t& pos, const std::vector<int>& tree, size_t& t) {
    A a = Result<A>::unflatten(in, pos, tree, t);
    B b = Result<B>::unflatten(in, pos, tree, t);
    return {std::move(a), std::move(b)};
  }
};

template <class Fn, class... Args>
struct Invocation {
  using R = Bare<std::invoke_result_t<const Fn&, decltype(substitute(std::declval<const Bare<Args>&>(),
                                                                      std::declval<const std::vector<Tensor>&>(),
                                                                      std::declval<size_t&>()))...>>;
  static_assert(std::is_void_v<R> || requires { &Result<R>::flatten; },
                "hjit::jit: a traced function returns Tensor, std::vector<Tensor>, or a std::pair / std::tuple "
                "of those (or nothing)");

  static CallArgs collect_all(const Args&... args) {
    CallArgs c;
    int i = 0;
    (collect(c, i++, args), ...);
    return c;
  }

  // Runs fn with tracers in place of the tensor arguments, flattening what it returns.
  static std::vector<Tensor> trace(const Fn& fn, const std::vector<Tensor>& tracers, std::vector<int>* tree,
                                   const Args&... args) {
    size_t k = 0;
    auto subst = std::tuple<decltype(substitute(args, tracers, k))...>{substitute(args, tracers, k)...};
    std::vector<Tensor> flat;
    if constexpr (std::is_void_v<R>) {
      std::apply(fn, subst);
    } else {
      R r = std::apply(fn, subst);
      Result<R>::flatten(r, flat, tree);
    }
    return flat;
  }
};

// Calls use(name, call, tracer) with fn's default name, the example arguments flattened, and a
// tracer of fn over them: what every API that traces a function once (save, export, tune, trace)
// hands its implementation.
template <class Fn, class Use, class... Args>
decltype(auto) traced_once(const Fn& fn, Use&& use, const Args&... args) {
  using Inv = Invocation<std::decay_t<Fn>, Args...>;
  CallArgs call = Inv::collect_all(args...);
  auto tracer = [&](const std::vector<Tensor>& tracers, std::vector<int>* tree) { return Inv::trace(fn, tracers, tree, args...); };
  return use(default_name(typeid(std::decay_t<Fn>)), call, tracer);
}

}  // namespace detail

namespace detail {
// Jitted::into, before the call: out made writable (storage of its own, as assign() gives it);
// returns &out, or null where the call reads out's storage (it is then copied in after).
const Tensor* prepare_into(Tensor& out, const CallArgs& call, const std::string& fn);
// After: checks the result fits out and copies it in unless it was computed there.
void finish_into(Tensor& out, const Tensor& result, const std::string& fn);
}  // namespace detail

// The callable jit() returns. Copies share one cache.
template <class Fn>
class Jitted {
 public:
  Jitted(Fn fn, JitOptions options) : fn_(std::move(fn)) {
    if (options.name.empty()) options.name = detail::default_name(typeid(Fn));
    core_ = std::make_shared<detail::JitCore>(std::move(options));
  }

  template <class... Args>
  auto operator()(const Args&... args) const {
    using Inv = detail::Invocation<Fn, Args...>;
    using R = typename Inv::R;
    detail::CallArgs call = Inv::collect_all(args...);
    if (call.any_traced && detail::tracing_active()) {
      // Called from inside another traced function: inline it into that trace.
      std::vector<Tensor> tracers;
      for (size_t i = 0; i < call.count; ++i) tracers.push_back(call.tensor(i));
      if constexpr (std::is_void_v<R>) {
        std::vector<int> tree;
        Inv::trace(fn_, tracers, &tree, args...);
        return;
      } else {
        size_t k = 0;
        auto subst = std::tuple<decltype(detail::substitute(args, tracers, k))...>{detail::substitute(args, tracers, k)...};
        return R(std::apply(fn_, subst));
      }
    } else {
      auto tracer = [&](const std::vector<Tensor>& tracers, std::vector<int>* tree) {
        return Inv::trace(fn_, tracers, tree, args...);
      };
      const std::vector<int>* tree = nullptr;
      std::vector<Tensor> out = core_->call(call, tracer, &tree);
      if constexpr (!std::is_void_v<R>) {
        size_t pos = 0, t = 0;
        return detail::Result<R>::unflatten(out, pos, *tree, t);
      }
    }
  }

  // out.assign(fn(args...)) for a function of one result, computed straight into out's storage:
  // numpy's and PyTorch's out=. In the loop a user writes, y = f(x) makes the new result while
  // the old one is still alive, in memory the caches have not seen; f.into(y, x) writes where y
  // already is, with no allocation. The result must have out's dtype and shape (ValueError
  // otherwise). Where the call also reads out's storage (out is an argument or a captured tensor:
  // JitOptions::donate is the way to write x = f(x) in place), on a GPU, or under fullgraph =
  // false, the result is computed apart and copied in. Inside a traced function: out.assign(...).
  template <class... Args>
  Tensor& into(Tensor& out, const Args&... args) const {
    using Inv = detail::Invocation<Fn, Args...>;
    static_assert(std::is_same_v<typename Inv::R, Tensor>, "Jitted::into: the function must return one Tensor");
    detail::CallArgs call = Inv::collect_all(args...);
    if (call.any_traced && detail::tracing_active()) return out.assign((*this)(args...));
    call.into = detail::prepare_into(out, call, core_->options().name);
    auto tracer = [&](const std::vector<Tensor>& tracers, std::vector<int>* tree) { return Inv::trace(fn_, tracers, tree, args...); };
    const std::vector<int>* tree = nullptr;
    std::vector<Tensor> result = core_->call(call, tracer, &tree);
    detail::finish_into(out, result.at(0), core_->options().name);
    return out;
  }

  // The optimized graph for the signature of these arguments (traced if needed, not compiled).
  template <class... Args>
  Graph graph(const Args&... args) const {
    return traced_for(&detail::JitCore::graph, args...);
  }

  // The schedule and the lowered Halide statement compiled for these arguments' signature.
  template <class... Args>
  std::string explain(const Args&... args) const {
    return traced_for(&detail::JitCore::explain, args...);
  }

  // The GPU kernels' device code (PTX for Device::CUDA) compiled for these arguments' signature,
  // without running it: works on a machine with no GPU. Empty for CPU functions.
  template <class... Args>
  std::string device_code(const Args&... args) const {
    return traced_for(&detail::JitCore::device_code, args...);
  }

  JitStats stats() const { return core_->stats(); }
  const JitOptions& options() const { return core_->options(); }

 private:
  // Calls a JitCore query with these arguments' signature and a tracer of fn_ over them.
  template <class R, class... Args>
  R traced_for(R (detail::JitCore::*query)(const detail::CallArgs&, detail::Tracer), const Args&... args) const {
    using Inv = detail::Invocation<Fn, Args...>;
    detail::CallArgs call = Inv::collect_all(args...);
    auto tracer = [&](const std::vector<Tensor>& tracers, std::vector<int>* tree) {
      return Inv::trace(fn_, tracers, tree, args...);
    };
    return (core_.get()->*query)(call, tracer);
  }

 public:

 private:
  Fn fn_;
  std::shared_ptr<detail::JitCore> core_;
};

// Runs host code (logging, metrics, a callback) at every call of a jitted function, between its
// compiled segments: MegEngine's exclude_from_trace. Values it reads are computed there (a graph
// break). Needs JitOptions::fullgraph = false; in a function traced once (the default, or
// TraceMode::Concrete) it is a ValueError, since the code would run only while tracing. Eagerly it
// simply runs.
template <class F>
void exclude_from_trace(F&& fn) {
  detail::check_host_code_allowed();
  std::forward<F>(fn)();
}

template <class Fn>
Jitted<std::decay_t<Fn>> jit(Fn&& fn, JitOptions options = {}) {
  return Jitted<std::decay_t<Fn>>(std::forward<Fn>(fn), std::move(options));
}

// What fn computes for these example arguments as jit() compiles it (jax.jit(f).trace): the
// optimized graph, and the tensors its inputs read: the tensor arguments, then the tensors fn
// captured (its parameters, handles sharing their storage).
struct TracedFunction {
  Graph graph;
  std::vector<Tensor> inputs;  // one per graph input
  size_t num_args = 0;         // inputs[0, num_args) are the arguments; the rest were captured
};

namespace detail {
TracedFunction trace_function(const std::string& name, const CallArgs& args, Tracer trace);
}

template <class Fn, class... Args>
TracedFunction trace(const Fn& fn, const Args&... example_args) {
  return detail::traced_once(fn, detail::trace_function, example_args...);
}

// Runs a graph through the op API on one tensor per graph input (jax.core.eval_jaxpr): eagerly, or
// recorded into the active trace inside a traced function. The graph's updates are assign()ed to
// their input tensors; returns its outputs.
std::vector<Tensor> eval_graph(const Graph& graph, const std::vector<Tensor>& inputs);

// The graph fn records for these example arguments, before any optimization (like jax.make_jaxpr).
template <class Fn, class... Args>
Graph make_graph(const Fn& fn, const Args&... example_args) {
  return detail::traced_once(fn, detail::trace_graph, example_args...);
}

}  // namespace hjit
