#include <hjit/grad.h>

#include <mutex>
#include <unordered_map>

#include "frontend/tracing/const_eval.h"
#include "frontend/tracing/replay.h"
#include "frontend/tracing/signature.h"
#include "frontend/tracing/trace.h"
#include "graph/autodiff/checkpoint_segments.h"
#include "graph/autodiff/differentiate.h"
#include "graph/passes/optimize.h"
#include "halide_backend/backend.h"
#include "support/log.h"

namespace hjit::detail {

namespace {

// A differentiated signature: the optimized gradient graph and what to feed it.
struct GradEntry {
  Signature key;
  Graph graph;                                         // outputs: value, then one per wrt input
  std::vector<std::shared_ptr<TensorImpl>> captured;   // inputs after the arguments
  std::vector<int> result_slot;  // per requested gradient: its graph output (-1: zeros, unused)
  std::vector<std::pair<const bool*, bool>> flags;  // host flags read while tracing (hjit::traced_flag)
};

}  // namespace

struct GradCore::State {
  std::vector<int> argnums;
  std::vector<Tensor> params;
  std::string name;
  std::mutex mu;
  std::unordered_multimap<uint64_t, std::shared_ptr<GradEntry>> cache;  // eager calls only
};

GradCore::GradCore(std::vector<int> argnums, std::vector<Tensor> params, std::string name)
    : s_(std::make_unique<State>()) {
  s_->argnums = std::move(argnums);
  s_->params = std::move(params);
  s_->name = std::move(name);
  for (const Tensor& p : s_->params)
    if (!p.defined()) throw ValueError(s_->name + ": a parameter is an undefined Tensor");
}

GradCore::~GradCore() = default;

namespace {

std::shared_ptr<GradEntry> build(const GradCore::State& s, const CallArgs& args, Tracer trace, uint64_t hash) {
  Timer t;
  TraceScope scope(s.name, false);
  std::vector<int> tree;
  std::vector<Tensor> outs = scope.run(args, trace, &tree);
  auto e = std::make_shared<GradEntry>();
  e->key = Signature::of(args, hash);
  Graph fwd = scope.finish(outs);
  outs.clear();
  scope.check_no_escaped_tracers();
  e->captured = scope.state().captured;
  e->flags = scope.state().flags;
  // The graph inputs to differentiate with respect to, and where each requested gradient lands.
  std::vector<int> wrt;
  for (int argnum : s.argnums) {
    bool found = false;
    for (size_t i = 0; i < args.count; ++i)
      if (args.arg_index(i) == argnum) {
        e->result_slot.push_back(int(wrt.size()));
        wrt.push_back(int(i));
        found = true;
      }
    if (!found)
      throw ValueError(s.name + ": argument " + std::to_string(argnum) +
                       " is not a Tensor (or is an empty std::vector<Tensor>); only tensors have gradients");
  }
  for (const Tensor& p : s.params) {
    int slot = -1;
    for (size_t j = 0; j < e->captured.size(); ++j)
      if (e->captured[j].get() == p.impl().get()) slot = int(args.count + j);
    if (slot < 0) {
      e->result_slot.push_back(-1);  // the loss does not read it: its gradient is zero
    } else {
      e->result_slot.push_back(int(wrt.size()));
      wrt.push_back(slot);
    }
  }
  // The step's graph: differentiated and optimized (as the enclosing trace will optimize it).
  auto step_of = [&wrt](const Graph& f) {
    ConstEvaluator eval = evaluate_node;
    return optimize(differentiate(f, 0, wrt), &eval);
  };
  if (const int64_t budget = scope.state().memory_budget_bytes; budget > 0) {  // (the enclosing jit's)
    // Plans are estimated as the built-in CPU schedule compiles them.
    backend::Options estimated;
    estimated.schedule = backend::schedule_request(s.name, {.opt_level = 1, .tuning_db_from_environment = false});
    CheckpointPlan plan;
    fwd = checkpoint_to_fit(
        fwd, budget, [&](const Graph& f) { return backend::estimate_peak_bytes(step_of(f), estimated); }, &plan);
    log().debug("{}: {}", s.name, plan.report);
    if (!plan.fits)
      log().warn("{}: memory_budget_mb = {} is not met: {}. hjit::memory_stats() measures the step", s.name, budget >> 20,
                 plan.report);
  }
  e->graph = step_of(fwd);
  log().debug("{}: differentiated in {:.2f} ms: {} -> {} nodes", s.name, t.ms(), fwd.nodes.size(), e->graph.nodes.size());
  log().trace("{} gradient graph:\n{}", s.name, e->graph.str());
  return e;
}

}  // namespace

void throw_grad_of_list(size_t n) {
  throw ValueError("grad: the differentiated argument is a std::vector<Tensor> with " + std::to_string(n) +
                   " tensors, so it has " + std::to_string(n) + " gradients, but grad(fn, argnum) returns one Tensor; "
                   "use hjit::grad<N>(fn) (a std::vector<Tensor> of gradients) or hjit::grad(fn, {N})");
}

std::vector<Tensor> GradCore::call(const CallArgs& args, Tracer trace) {
  State& s = *s_;
  const uint64_t hash = Signature::hash_of(args, s.name);
  // Inside a trace the entry would hold the tracers of that trace: differentiate afresh (the
  // enclosing jit caches the result); eagerly, reuse the gradient graph of this signature.
  const bool cacheable = !tracing_active();
  std::shared_ptr<GradEntry> e;
  if (cacheable) {
    std::lock_guard lock(s.mu);
    auto [lo, hi] = s.cache.equal_range(hash);
    for (auto it = lo; it != hi && !e; ++it)
      if (it->second->key.matches(args) && flags_hold(it->second->flags)) e = it->second;
  }
  if (!e) {
    e = build(s, args, trace, hash);
    if (cacheable) {
      std::lock_guard lock(s.mu);
      s.cache.emplace(hash, e);
    }
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < args.count; ++i) inputs.push_back(args.tensor(i));
  for (const auto& impl : e->captured) inputs.push_back(Tensor(impl));
  std::vector<Tensor> outs = replay(e->graph, inputs);
  // outs: the value, then the gradients in wrt order.
  std::vector<Tensor> result{outs[0]};
  const size_t first_param = e->result_slot.size() - s.params.size();
  for (size_t k = 0; k < e->result_slot.size(); ++k) {
    const int slot = e->result_slot[k];
    if (slot >= 0) {
      result.push_back(outs[1 + size_t(slot)]);
    } else {
      const Tensor& p = s.params[k - first_param];
      result.push_back(Tensor::zeros(p.shape(), p.dtype()).to(p.device()));
    }
  }
  return result;
}

}  // namespace hjit::detail
