// The trace context: while a function is traced, every op whose operands include a tracer or a
// captured tensor records a node into the graph of the innermost active trace on this thread.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <hjit/graph.h>
#include <hjit/detail/tracing.h>

#include "frontend/tensor/tensor_impl.h"

namespace hjit::detail {

struct TraceState {
  uint64_t id = 0;
  std::string fn_name;
  bool concrete = false;  // TraceMode::Concrete: tracers also carry their eager value
  Graph graph;
  int num_args = 0;  // the first num_args graph inputs are the traced arguments
  // Captured eager tensors (made before the trace began), in graph input order after the args.
  std::vector<std::shared_ptr<TensorImpl>> captured;
  std::unordered_map<const TensorImpl*, int> captured_param;  // captured impl -> its parameter node
  std::unordered_map<const TensorImpl*, int> captured_value;  // captured impl -> current value (after assigns)
  std::unordered_map<const TensorImpl*, int> constant_value;  // in-trace eager tensor -> node id
  std::vector<std::shared_ptr<TensorImpl>> keep_alive;        // owners of constants' bytes
  // Tracers of the arguments -> their parameter, and the value assign() gave each argument.
  std::unordered_map<const TensorImpl*, int> argument_param;
  std::unordered_map<int, int> argument_value;
  // Every tracer made in this trace: one still alive when the trace is over has escaped it.
  std::vector<std::weak_ptr<TensorImpl>> tracers;
  // Concrete mode: the values read (item, bool, to_vector) and the bytes seen, in order. They
  // become extra outputs of the graph; a later call whose values differ is traced again.
  struct Guard {
    int value;
    std::vector<uint8_t> bytes;
  };
  std::vector<Guard> guards;
  // Host flags read while tracing (hjit::traced_flag) and the value each read: part of what the
  // version is for (frontend/jit/modes.h).
  std::vector<std::pair<const bool*, bool>> flags;
  std::vector<const bool*> flags_set;  // set by the traced code before any read (not recorded)
  // fullgraph = false: a read of a symbolic tracer breaks the graph here; this computes the
  // tracer's value from the graph so far (setting its storage) instead of a ConcretizationError.
  std::function<void(TensorImpl& tracer, const char* what)> on_read;
  // JitOptions::memory_budget_mb in bytes (0: none), inherited by nested traces: a gradient taken
  // inside checkpoints its forward pass to fit (graph/autodiff/checkpoint_segments.h).
  int64_t memory_budget_bytes = 0;
};

// Starts a trace on this thread for the lifetime of the object.
class TraceScope {
 public:
  TraceScope(std::string fn_name, bool concrete);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
  TraceState& state() { return *state_; }

  // A tracer for a new argument of the traced function (the concrete value is kept in Concrete mode).
  Tensor add_argument(const Tensor& example);
  // A symbolic tracer for a new argument of this type (a loop body's slice of a scanned tensor).
  Tensor add_argument(const TensorType& type);
  // Runs the traced function on tracers for the call's tensors; its errors name the function.
  std::vector<Tensor> run(const CallArgs& args, Tracer trace, std::vector<int>* tree);
  // Marks `outputs` as the graph outputs and returns the finished graph (updates included).
  Graph finish(const std::vector<Tensor>& outputs);
  // After the traced function's results are dropped: ValueError if one of this trace's tracers is
  // still held somewhere (a global, or a captured variable rebound to a traced value).
  void check_no_escaped_tracers() const;

 private:
  std::unique_ptr<TraceState> state_;
};

// No trace is active on this thread for the lifetime of the object: ops run eagerly (how a control
// flow op computes its value from its graphs inside a Concrete trace, or in an eager kernel).
class SuspendTraces {
 public:
  SuspendTraces();
  ~SuspendTraces();
  SuspendTraces(const SuspendTraces&) = delete;
  SuspendTraces& operator=(const SuspendTraces&) = delete;
 private:
  std::vector<TraceState*> saved_;
};

TraceState* current_trace();
uint64_t current_trace_id();
bool is_active_trace(uint64_t id);  // a trace on this thread's stack (the current or an enclosing one)

// The value id of `t` in trace `ts`: a tracer's own value, a captured tensor's parameter (made on
// first use), or a constant for an eager tensor made inside the traced function.
int value_in_trace(TraceState& ts, const Tensor& t);

// `target.assign(value)` inside the trace: a captured target and an argument get an update (done
// to the caller's tensor after every call); a tracer or an in-trace tensor is rebound to the
// value (every handle sharing it sees the new value).
void record_assign(TraceState& ts, const Tensor& target, const Tensor& value);

// A tracer for node `value` of the trace (carrying `concrete` as its value in Concrete mode).
Tensor make_tracer(TraceState& ts, int value, std::shared_ptr<Storage> concrete = nullptr);

// The active trace a tracer belongs to (null when none on this thread's stack).
TraceState* trace_of(const TensorImpl& tracer);

// hjit::traced_flag inside traces: the flag and its value recorded with each (once per flag), unless
// the trace set it first (record_flag_set: hjit::set_traced_flag).
void record_flag(const bool& flag);
void record_flag_set(const bool& flag);
// Whether each flag a trace recorded reads the value it read then.
bool flags_hold(const std::vector<std::pair<const bool*, bool>>& flags);

// A concrete tracer's value is being read: recorded as a guard of its trace (once per value).
void record_read(const TensorImpl& tracer);

// Rethrows the exception in flight with "(while tracing 'name')" appended, keeping its type, so
// that an error reads the same eagerly and traced, plus the function it happened in.
[[noreturn]] void rethrow_in_trace(const TraceState& ts);

}  // namespace hjit::detail
