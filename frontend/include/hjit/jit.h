// hjit::jit: trace a C++ function over Tensors once per signature, compile it with Halide, and run
// the compiled code on every later call with the same signature.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <hjit/detail/tracing.h>
#include <hjit/graph.h>
#include <hjit/jit_options.h>
#include <hjit/tensor.h>

namespace hjit {

namespace detail {

// The type-erased part of jit(): signature cache, tracing, compiling, running. In frontend/jit/jit.cpp.
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

// A flag of host state that traced code branches on (nn::Module's train/eval mode is read through
// it): read while a function is traced, its value becomes part of the version traced, and a later
// call of a jitted function where the flag reads otherwise runs the version traced with that value,
// or traces one (once per combination of values; JitStats::traces counts them). The flag must
// outlive the jitted functions that read it. Outside a trace it only returns the value.
bool traced_flag(const bool& flag);
// Sets a flag that traced_flag reads. Set inside a traced function before it is read there, the
// flag is the function's own doing (jit([&](x, bool training) { net.train(training); ... })), not
// part of what the version is for.
void set_traced_flag(bool& flag, bool value);

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
