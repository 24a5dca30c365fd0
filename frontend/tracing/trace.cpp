#include "frontend/tracing/trace.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "frontend/tensor/device.h"

namespace hjit::detail {
namespace {

thread_local std::vector<TraceState*> t_traces;  // innermost last
std::atomic<uint64_t> g_next_trace_id{1};

}  // namespace

TraceState* current_trace() { return t_traces.empty() ? nullptr : t_traces.back(); }

// Recorded in every trace on this thread's stack: a gradient traced inside a jitted function reads
// the flag for the outer version too.
namespace {
bool was_read(const TraceState& ts, const bool& flag) {
  return std::any_of(ts.flags.begin(), ts.flags.end(), [&](const auto& f) { return f.first == &flag; });
}
bool was_set(const TraceState& ts, const bool& flag) {
  return std::find(ts.flags_set.begin(), ts.flags_set.end(), &flag) != ts.flags_set.end();
}
}  // namespace

void record_flag(const bool& flag) {
  for (TraceState* ts : t_traces)
    if (!was_read(*ts, flag) && !was_set(*ts, flag)) ts->flags.emplace_back(&flag, flag);
}

void record_flag_set(const bool& flag) {
  for (TraceState* ts : t_traces)
    if (!was_read(*ts, flag) && !was_set(*ts, flag)) ts->flags_set.push_back(&flag);
}

bool flags_hold(const std::vector<std::pair<const bool*, bool>>& flags) {
  return std::all_of(flags.begin(), flags.end(), [](const auto& f) { return *f.first == f.second; });
}

uint64_t current_trace_id() { return t_traces.empty() ? 0 : t_traces.back()->id; }

TraceScope::TraceScope(std::string fn_name, bool concrete) : state_(std::make_unique<TraceState>()) {
  state_->id = g_next_trace_id++;
  state_->fn_name = std::move(fn_name);
  state_->concrete = concrete;
  state_->graph.name = state_->fn_name;
  if (!t_traces.empty()) state_->memory_budget_bytes = t_traces.back()->memory_budget_bytes;
  t_traces.push_back(state_.get());
}

TraceScope::~TraceScope() {
  if (!t_traces.empty() && t_traces.back() == state_.get()) t_traces.pop_back();
}

Tensor make_tracer(TraceState& ts, int value, std::shared_ptr<Storage> concrete) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = ts.graph.type(value);
  impl->trace_id = ts.id;
  impl->value = value;
  impl->born_in_trace = ts.id;
  impl->storage = std::move(concrete);
  ts.tracers.push_back(impl);
  return Tensor(std::move(impl));
}

SuspendTraces::SuspendTraces() { saved_.swap(t_traces); }
SuspendTraces::~SuspendTraces() { saved_.swap(t_traces); }

Tensor TraceScope::add_argument(const TensorType& type) {
  int id = state_->graph.add_parameter(type, false);
  ++state_->num_args;
  Tensor tracer = make_tracer(*state_, id);
  state_->argument_param[tracer.impl().get()] = id;
  return tracer;
}

Tensor TraceScope::add_argument(const Tensor& example) {
  const TensorImpl& im = impl_of(example, state_->fn_name.c_str());
  int id = state_->graph.add_parameter(im.type, false);
  ++state_->num_args;
  Tensor tracer = make_tracer(*state_, id, state_->concrete ? im.storage : nullptr);
  state_->argument_param[tracer.impl().get()] = id;
  return tracer;
}

bool is_active_trace(uint64_t id) {
  for (const TraceState* ts : t_traces)
    if (ts->id == id) return true;
  return false;
}

std::vector<Tensor> TraceScope::run(const CallArgs& args, Tracer trace, std::vector<int>* tree) {
  std::vector<Tensor> tracers;
  for (size_t i = 0; i < args.count; ++i) tracers.push_back(add_argument(args.tensor(i)));
  try {
    return trace(tracers, tree);
  } catch (const Error&) {
    rethrow_in_trace(*state_);
  }
}

int value_in_trace(TraceState& ts, const Tensor& t) {
  const TensorImpl& im = impl_of(t, ts.fn_name.c_str());
  if (im.traced() && im.trace_id == ts.id) return im.value;
  if (im.traced() && !is_active_trace(im.trace_id))
    throw ValueError("a traced tensor " + im.type.str() + " was used outside the trace that made it (tracing '" +
                     ts.fn_name + "'): a traced value escaped its function, e.g. into a global or a variable "
                     "captured by reference. Return it from the traced function instead.");
  // Made before this trace began (an eager tensor, or a tracer of an enclosing trace, as when
  // grad() traces inside jit()): an implicit input.
  if (im.born_in_trace != ts.id || im.traced()) {
    auto it = ts.captured_value.find(&im);
    if (it != ts.captured_value.end()) return it->second;
    int id = ts.graph.add_parameter(im.type, true);
    t.impl()->captured_by_trace.value.store(true, std::memory_order_relaxed);
    ts.captured.push_back(t.impl());
    ts.captured_param[&im] = id;
    ts.captured_value[&im] = id;
    return id;
  }
  auto it = ts.constant_value.find(&im);  // made inside the traced function: a constant
  if (it != ts.constant_value.end()) return it->second;
  int id = im.uniform ? ts.graph.add_full(im.type, *im.uniform)
                      : ts.graph.add_constant(im.type, ConstData{im.storage, im.data(), im.storage->nbytes});
  ts.keep_alive.push_back(t.impl());  // the map is keyed by address: keep it from being reused
  ts.constant_value[&im] = id;
  return id;
}

void record_assign(TraceState& ts, const Tensor& target, const Tensor& value) {
  int v = value_in_trace(ts, value);
  TensorImpl& im = *target.impl();
  const std::shared_ptr<Storage>& concrete = value.impl()->storage;
  const bool captured = im.traced() ? im.trace_id != ts.id : im.born_in_trace != ts.id;
  // Concrete mode runs the first call eagerly: the write happens now, as it would in eager code.
  auto write_now = [&] {
    if (ts.concrete && concrete && im.storage && im.storage->nbytes > 0) copy_storage(*im.storage, *concrete);
  };
  if (captured) {
    value_in_trace(ts, target);  // the parameter the update writes to
    ts.captured_value[&im] = v;
    write_now();
    return;
  }
  if (auto arg = ts.argument_param.find(&im); arg != ts.argument_param.end()) {
    ts.argument_value[arg->second] = v;
    write_now();
    im.value = v;  // later reads in the trace see the new value
    return;
  }
  im.trace_id = ts.id;
  im.value = v;
  ts.tracers.push_back(target.impl());
  im.storage = ts.concrete ? concrete : nullptr;
  im.uniform.reset();
  ts.constant_value.erase(&im);
}

TraceState* trace_of(const TensorImpl& tracer) {
  for (TraceState* ts : t_traces)
    if (ts->id == tracer.trace_id) return ts;
  return nullptr;
}

void record_read(const TensorImpl& tracer) {
  TraceState* ts = trace_of(tracer);
  if (!ts || !ts->concrete || !tracer.storage || tracer.device() != Device::CPU) return;
  for (const TraceState::Guard& g : ts->guards)
    if (g.value == tracer.value) return;
  const uint8_t* p = static_cast<const uint8_t*>(tracer.data());
  ts->guards.push_back(TraceState::Guard{tracer.value, std::vector<uint8_t>(p, p + tracer.storage->nbytes)});
}

Graph TraceScope::finish(const std::vector<Tensor>& outputs) {
  TraceState& ts = *state_;
  for (const Tensor& o : outputs) ts.graph.outputs.push_back(value_in_trace(ts, o));
  for (const TraceState::Guard& g : ts.guards) ts.graph.outputs.push_back(g.value);
  for (int param : ts.graph.inputs) {  // arguments first, in input order
    auto it = ts.argument_value.find(param);
    if (it != ts.argument_value.end() && it->second != param) ts.graph.updates.push_back(Update{param, it->second});
  }
  for (const auto& impl : ts.captured) {
    int param = ts.captured_param.at(impl.get()), current = ts.captured_value.at(impl.get());
    if (current != param) ts.graph.updates.push_back(Update{param, current});
  }
  return std::move(ts.graph);
}

void TraceScope::check_no_escaped_tracers() const {
  for (const auto& weak : state_->tracers) {
    std::shared_ptr<TensorImpl> t = weak.lock();
    if (!t || t->trace_id != state_->id) continue;
    throw ValueError("a traced value " + t->type.str() + " escaped the function '" + state_->fn_name +
                     "': a variable that outlives the trace (a global, a static, or a tensor the function captures by "
                     "reference) still holds it after tracing. Rebinding a captured tensor inside a traced function "
                     "(w = w - lr * g) does this; update it in place instead (w.assign(w - lr * g)), which is done "
                     "after every call, or return the value from the function.");
  }
}

void rethrow_in_trace(const TraceState& ts) {
  const std::string where = " (while tracing '" + ts.fn_name + "')";
  try {
    throw;
  } catch (const ShapeError& e) {
    throw ShapeError(e.what() + where);
  } catch (const DTypeError& e) {
    throw DTypeError(e.what() + where);
  } catch (const IndexError& e) {
    throw IndexError(e.what() + where);
  } catch (const ValueError& e) {
    throw ValueError(e.what() + where);
  } catch (const ConcretizationError&) {
    throw;  // it names the function already
  } catch (const CompileError& e) {
    throw CompileError(e.what() + where);
  }
}

}  // namespace hjit::detail

namespace hjit {

bool traced_flag(const bool& flag) {
  detail::record_flag(flag);
  return flag;
}

void set_traced_flag(bool& flag, bool value) {
  detail::record_flag_set(flag);
  flag = value;
}

}  // namespace hjit
