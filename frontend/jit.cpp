// jit(): the signature cache, tracing on a miss, compiling through the backend, and the hot path
// of a cached call (hash the signature, find the entry under a shared lock, bind buffers, run).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <condition_variable>
#include <cxxabi.h>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include <hjit/jit.h>
#include <hjit/memory.h>

#include "frontend/const_eval.h"
#include "frontend/device.h"
#include "frontend/signature.h"
#include "frontend/trace.h"
#include "frontend/traced.h"
#include "graph/passes/in_place.h"
#include "graph/passes/optimize.h"
#include "graph/symbolic_sizes.h"
#include "halide_backend/backend.h"
#include "support/hash.h"
#include "support/allocator.h"
#include "support/log.h"

namespace hjit::detail {
namespace {

// What one signature compiled to. Built once by the first caller; others wait for `ready`.
struct Entry {
  Signature key;
  std::atomic<uint64_t> last_used{0};  // the State's clock at the latest call (LRU eviction)

  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  std::exception_ptr error;

  Graph graph;  // optimized
  std::shared_ptr<const backend::Executable> exe;
  std::vector<int> tree;  // result structure
  std::vector<std::shared_ptr<TensorImpl>> captured;
  std::vector<TensorType> out_types;
  std::vector<size_t> update_input;  // per update: the input it writes (arguments, then captured)
  size_t num_args = 0;
  std::vector<Tensor> first_outputs;  // Concrete mode: the eager results of the tracing call
  // New values of updated inputs are computed into these (allocated on the first call, reused
  // after), then copied into the tensors' own storage. run_mu makes such calls one at a time.
  std::vector<std::shared_ptr<Storage>> update_buffers;
  std::mutex run_mu;
  // TraceMode::Concrete: the values read while tracing (bytes), computed as the outputs after the
  // function's num_outputs() own; `next` is another version of the signature, traced when these
  // guards failed (guarded by the State's mu).
  std::vector<std::vector<uint8_t>> guards;
  std::shared_ptr<Entry> next;
  // dynamic_dims: the graph's sizes as expressions of the marked dimensions (one pipeline for
  // every size; its key leaves them out). Null for a version of fixed sizes.
  std::shared_ptr<const SymbolicSizes> dynamic;
  int64_t min_dynamic_size = 1;  // the pipeline serves sizes from this up (its schedule's splits)
  bool fixed_sizes = false;      // built for this call's sizes only, though dynamic_dims are set
  // Meant for every size but built for the first call's sizes only: its key once it is ready
  // (the State re-keys it under its lock; until then `key` is what the cache holds).
  bool rekeyed = false;
  Signature sizes_key;
  size_t num_outputs() const { return out_types.size() - guards.size(); }
  // Once ready: whether this version, found for the call's key, serves its sizes.
  bool serves(const CallArgs& args) const {
    if (rekeyed) return sizes_key.matches(args);
    if (!dynamic) return true;
    for (const SymbolicSizes::Source& src : dynamic->sources)
      if (args.tensor(size_t(src.input)).impl()->type.shape[size_t(src.dim)] < min_dynamic_size) return false;
    return true;
  }
};

// Max |compiled - eager| against tolerance * (1 + |eager|); returns a message when it fails.
std::string compare(const Tensor& compiled, const Tensor& eager, double tol, const std::string& what) {
  if (compiled.shape() != eager.shape() || compiled.dtype() != eager.dtype())
    return what + ": compiled " + TensorType{compiled.dtype(), compiled.shape()}.str() + " but eager " +
           TensorType{eager.dtype(), eager.shape()}.str();
  std::vector<double> a = compiled.to_vector<double>(), b = eager.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    bool same = (a[i] == b[i]) || (std::isnan(a[i]) && std::isnan(b[i])) || std::fabs(a[i] - b[i]) <= tol * (1 + std::fabs(b[i]));
    if (!same)
      return what + ": element " + std::to_string(i) + " is " + std::to_string(a[i]) + " compiled, " +
             std::to_string(b[i]) + " eager (tolerance " + std::to_string(tol) + ")";
  }
  return "";
}

}  // namespace

struct JitCore::State {
  JitOptions opt;
  backend::Options backend_opt;
  mutable std::shared_mutex mu;
  std::unordered_multimap<uint64_t, std::shared_ptr<Entry>> entries;
  std::shared_ptr<Entry> last_built;
  std::atomic<int64_t> traces{0}, compiles{0}, hits{0}, compile_us{0}, evictions{0}, guard_failures{0}, graph_breaks{0};
  std::atomic<uint64_t> clock{0};
  std::string schedule;  // guarded by mu
  int64_t retraces = 0;                 // guarded by mu
  std::vector<std::string> changes;     // the latest re-traces' differences, guarded by mu
  std::string warning;                  // guarded by mu
  // dynamic_dims: why one pipeline cannot serve every size of this function ("" while it may).
  std::string dynamic_impossible;       // guarded by mu
  std::atomic<int64_t> dynamic_entries{0};
  std::atomic<int64_t> update_bytes_copied{0}, donated_bytes_reused{0};
  const DynamicDims* dynamic() const { return opt.dynamic_dims.empty() ? nullptr : &opt.dynamic_dims; }
  // The backend's options for a traced graph: with the results that may take a donated argument's
  // storage (graph outputs only: an update's value trades storage with its tensor anyway).
  backend::Options options_for(const Graph& g) const {
    backend::Options o = backend_opt;
    if (opt.donate.empty() || opt.device != Device::CPU) return o;
    for (const auto& [input, slot] : in_place_outputs(g, opt.donate))
      if (size_t(slot) < g.outputs.size()) o.in_place.emplace_back(input, slot);
    return o;
  }

  // A new entry is being traced: counts it, warns past the threshold, and makes room (mu held).
  // `reason`: why, when it is not a new signature.
  void on_retrace(const Entry& e, const std::string& reason = "") {
    if (!last_built && reason.empty()) {
      note_first_trace(opt.name, opt.warn_after_retraces);
      return;
    }
    std::string change = reason.empty() ? last_built->key.describe_change_to(e.key) : " " + reason;
    log().info("jit '{}': cache miss, retracing:{}", opt.name, change);
    ++retraces;
    changes.push_back(change);
    if (changes.size() > 4) changes.erase(changes.begin());
    if (opt.warn_after_retraces > 0 && retraces > opt.warn_after_retraces &&
        (retraces - opt.warn_after_retraces - 1) % opt.warn_after_retraces == 0) {
      std::string what;
      for (const std::string& c : changes) what += "\n  " + c;
      warning = "jit '" + opt.name + "' has been re-traced " + std::to_string(retraces) +
                " times; each new signature or value read traces and compiles again. The latest changes:" + what +
                "\nPass values that change every call as Tensors rather than static arguments, or pad shapes to a few "
                "sizes.";
      log().warn("{}", warning);
    }
  }

  // Least recently used entries past max_cache_entries are dropped (mu held).
  void evict_beyond_bound() {
    if (opt.max_cache_entries == 0) return;
    while (entries.size() > opt.max_cache_entries) {
      auto oldest = entries.end();
      for (auto it = entries.begin(); it != entries.end(); ++it)
        if (it->second->ready && (oldest == entries.end() || it->second->last_used < oldest->second->last_used))
          oldest = it;
      if (oldest == entries.end()) return;  // all still being built
      log().debug("jit '{}': {} versions cached, dropping the least recently used", opt.name, entries.size());
      if (last_built == oldest->second) last_built = nullptr;
      entries.erase(oldest);
      ++evictions;
    }
  }

  // jit() called inside a loop makes a new function, with an empty cache, every time: count first
  // traces per function name across the process.
  static void note_first_trace(const std::string& name, int threshold) {
    static std::mutex m;
    static std::unordered_map<std::string, int64_t> first_traces;
    std::lock_guard g(m);
    const int64_t n = ++first_traces[name];
    if (threshold > 0 && n == threshold + 1)
      log().warn("jit '{}': {} separately jitted copies of this function have traced it; jit() inside a loop "
                 "makes a new function with an empty cache each time. Make the jitted function once and call it "
                 "in the loop.", name, n);
  }

  // Drops an entry from the cache (its build or its check failed): the next call builds it again.
  void forget(uint64_t h, const std::shared_ptr<Entry>& e) {
    std::unique_lock lk(mu);
    auto [lo, hi] = entries.equal_range(h);
    for (auto it = lo; it != hi; ++it)
      if (it->second == e) {
        entries.erase(it);
        break;
      }
  }

  std::shared_ptr<Entry> find_locked(uint64_t h, const CallArgs& a) const {
    auto [lo, hi] = entries.equal_range(h);
    for (auto it = lo; it != hi; ++it)
      if (it->second->key.matches(a)) return it->second;
    return nullptr;
  }
};

// dynamic_dims: the sizes of `base` (traced from args) that vary with the marked dimensions,
// found by tracing again with them changed: one symbol per distinct size among them (dimensions
// of equal size move together), each changed alone, then all together as a check. Null, with
// the reason in *why, where one pipeline cannot serve every size; *lasting: for every size.
std::shared_ptr<const SymbolicSizes> fit_dynamic(JitCore::State& s, const CallArgs& args, Tracer trace, const Graph& base,
                                                 std::string* why, bool* lasting) {
  std::vector<int64_t> values;
  std::vector<SymbolicSizes::Source> sources;
  std::vector<std::vector<std::pair<size_t, int>>> members;
  for (size_t i = 0; i < args.count; ++i) {
    const TensorType& t = args.tensor(i).impl()->type;
    for (int d = 0; d < t.rank(); ++d) {
      if (!Signature::is_dynamic(args, i, d, t.rank(), s.dynamic())) continue;
      size_t k = size_t(std::find(values.begin(), values.end(), t.shape[size_t(d)]) - values.begin());
      if (k == values.size()) values.push_back(t.shape[size_t(d)]), sources.push_back({int(i), d}), members.emplace_back();
      members[k].emplace_back(i, d);
    }
  }
  *lasting = false;
  if (values.empty()) {
    *why = "no argument has the dimensions dynamic_dims names";
    return nullptr;
  }
  for (int64_t v : values)
    if (v < 2) {
      *why = "a dynamic dimension has size " + std::to_string(v) + " (a size below 2 could be a broadcast)";
      return nullptr;
    }
  auto trace_at = [&](const std::vector<int64_t>& vals) {
    std::vector<Tensor> holders;
    holders.reserve(args.count);
    CallArgs a;
    a.statics = args.statics;
    for (size_t i = 0; i < args.count; ++i) {
      TensorType t = args.tensor(i).impl()->type;
      bool changed = false;
      for (size_t k = 0; k < members.size(); ++k)
        for (const auto& [mi, md] : members[k])
          if (mi == i) t.shape[size_t(md)] = vals[k], changed = true;
      holders.push_back(changed ? Tensor::zeros(t.shape, t.dtype) : args.tensor(i));
    }
    for (size_t i = 0; i < args.count; ++i) a.push(holders[i], args.arg_index(i));
    return trace_and_optimize(s.opt.name, false, a, trace, nullptr, s.opt.memory_budget_mb).graph;
  };
  std::vector<std::vector<int64_t>> at{values};
  for (size_t k = 0; k < values.size(); ++k) {
    at.push_back(values);
    at.back()[k] += 3;
  }
  at.push_back(values);
  for (int64_t& v : at.back()) v += 8;
  std::vector<Graph> traced;
  try {
    for (size_t t = 1; t < at.size(); ++t) traced.push_back(trace_at(at[t]));
  } catch (const Error& e) {
    *why = std::string("tracing at another size failed: ") + e.what();
    *lasting = true;
    return nullptr;
  }
  std::vector<const Graph*> graphs{&base};
  for (const Graph& g : traced) graphs.push_back(&g);
  std::optional<SymbolicSizes> sizes = fit_symbolic_sizes(graphs, at, sources, why);
  if (!sizes) {
    *lasting = true;
    return nullptr;
  }
  return std::make_shared<const SymbolicSizes>(std::move(*sizes));
}

// Traces and compiles entry e (a new signature, or a new guarded version of one). On failure the
// entry is marked failed (waiters rethrow) and the exception propagates. With dynamic_dims, e's
// key leaves them out when one pipeline serves every size; else it is re-keyed to this call's.
void build_entry(JitCore::State& s, Entry& e, const CallArgs& args, Tracer trace,
                 const std::function<void(TraceState&)>& setup = nullptr) {
  try {
    Timer t;
    Traced tr = trace_and_optimize(s.opt.name, s.opt.trace_mode == TraceMode::Concrete, args, trace, setup, s.opt.memory_budget_mb);
    ++s.traces;
    backend::Compiled c;
    bool compiled = false;
    if (s.dynamic() && !e.fixed_sizes) {
      std::string why;
      bool lasting = false;
      {
        std::shared_lock lk(s.mu);
        why = s.dynamic_impossible;
      }
      if (why.empty()) {
        e.dynamic = fit_dynamic(s, args, trace, tr.graph, &why, &lasting);
        if (e.dynamic) {
          backend::Options o = s.backend_opt;
          o.schedule = o.schedule.at_every_size();
          o.dynamic = e.dynamic;
          try {
            c = backend::compile(tr.graph, o);
            compiled = true;
            e.min_dynamic_size = std::max<int64_t>(1, c.executable->min_dynamic_size());
            ++s.dynamic_entries;
            log().debug("jit '{}': one pipeline for every size of the dynamic dimensions ({:.1f} ms)", s.opt.name, t.ms());
          } catch (const ValueError& v) {
            why = v.what(), lasting = true;
            e.dynamic = nullptr;
          }
        }
      }
      if (!e.dynamic) {
        log().debug("jit '{}': compiling for these sizes only: {}", s.opt.name, why);
        e.sizes_key = Signature::of(args, Signature::hash_of(args, s.opt.name));
        e.rekeyed = true;
        if (lasting) {
          std::unique_lock lk(s.mu);
          s.dynamic_impossible = why;
        }
      }
    }
    if (!compiled) c = backend::compile(tr.graph, s.options_for(tr.graph));
    if (!c.cache_hit) ++s.compiles;
    e.graph = std::move(tr.graph);
    e.exe = c.executable;
    e.tree = std::move(tr.tree);
    e.captured = std::move(tr.captured);
    e.num_args = tr.num_args;
    for (int o : e.graph.outputs) e.out_types.push_back(e.graph.type(o));
    for (const Update& u : e.graph.updates) e.update_input.push_back(size_t(e.graph.node(u.target).attrs.i("index")));
    e.first_outputs = std::move(tr.concrete_outputs);
    e.guards = std::move(tr.guards);
    s.compile_us += int64_t(t.ms() * 1000);
    log().debug("jit '{}': ready in {:.1f} ms (backend {:.1f} ms{}{})", s.opt.name, t.ms(), c.ms,
                c.cache_hit ? ", found compiled" : "",
                e.guards.empty() ? "" : ", " + std::to_string(e.guards.size()) + " guards");
  } catch (...) {
    std::lock_guard g(e.mu);
    e.error = std::current_exception();
    e.ready = true;
    e.cv.notify_all();
    throw;
  }
  {
    std::unique_lock lk(s.mu);
    s.schedule = e.exe->summary();
  }
  {
    std::lock_guard g(e.mu);
    e.ready = true;
  }
  e.cv.notify_all();
}

JitCore::JitCore(JitOptions options) : s_(std::make_unique<State>()) {
  if (options.check_tolerance < 0) throw ValueError("jit '" + options.name + "': check_tolerance must be >= 0");
  if (!options.fullgraph && options.device != Device::CPU)
    throw ValueError("jit '" + options.name + "': fullgraph = false runs its segments on the CPU; a function for " +
                     device_name(options.device) + " must trace to one graph (fullgraph = true)");
  if (!options.fullgraph && options.trace_mode == TraceMode::Concrete)
    throw ValueError("jit '" + options.name + "': choose fullgraph = false (the function runs at every call, reads "
                     "break the graph) or TraceMode::Concrete (reads are guards of one graph), not both");
  if (!options.dynamic_dims.empty() && (options.device != Device::CPU || options.trace_mode == TraceMode::Concrete || !options.fullgraph))
    throw ValueError("jit '" + options.name + "': dynamic_dims needs a CPU function traced once into one graph "
                     "(Device::CPU, TraceMode::Symbolic, fullgraph = true)");
  for (const auto& [arg, axis] : options.dynamic_dims)
    if (arg < 0) throw ValueError("jit '" + options.name + "': dynamic_dims names argument " + std::to_string(arg));
  const std::string who = "jit '" + options.name + "'";
  s_->backend_opt.schedule = backend::schedule_request(
      who, {.opt_level = options.opt_level, .autoscheduler = options.autoscheduler, .tuning_db = options.tuning_db, .device = options.device});
  s_->opt = std::move(options);
  s_->backend_opt.name = s_->opt.name;
  s_->backend_opt.device = s_->opt.device;
  s_->backend_opt.cuda_capability = s_->opt.cuda_capability;
}

JitCore::~JitCore() = default;
const JitOptions& JitCore::options() const { return s_->opt; }

JitStats JitCore::stats() const {
  JitStats st;
  std::vector<std::shared_ptr<Entry>> versions;
  {
    std::shared_lock lk(s_->mu);
    st.traces = s_->traces.load(), st.compiles = s_->compiles.load(), st.cache_hits = s_->hits.load();
    st.compile_ms = double(s_->compile_us.load()) / 1000.0, st.schedule = s_->schedule;
    st.entries = int64_t(s_->entries.size());
    st.evictions = s_->evictions.load();
    st.guard_failures = s_->guard_failures.load();
    st.graph_breaks = s_->graph_breaks.load();
    st.dynamic_entries = s_->dynamic_entries.load();
    st.recompile_warning = s_->warning;
    st.update_bytes_copied = s_->update_bytes_copied.load();
    st.donated_bytes_reused = s_->donated_bytes_reused.load();
    for (const auto& [key, chain] : s_->entries)
      for (std::shared_ptr<Entry> e = chain; e; e = e->next) versions.push_back(e);
  }
  for (const auto& e : versions) {  // each under its own lock, taken after the State's is let go
    std::lock_guard lk(e->mu);
    if (e->ready && e->exe) st.temporary_bytes = std::max(st.temporary_bytes, e->exe->temporary_bytes());
  }
  return st;
}

Traced trace_and_optimize(const std::string& name, bool concrete, const CallArgs& args, Tracer trace,
                          const std::function<void(TraceState&)>& setup, int64_t memory_budget_mb) {
  Timer t;
  TraceScope scope(name, concrete);
  scope.state().memory_budget_bytes = memory_budget_mb << 20;
  if (setup) setup(scope.state());
  Traced r;
  std::vector<Tensor> outs = scope.run(args, trace, &r.tree);
  if (concrete)
    for (const Tensor& o : outs) {
      const TensorImpl& im = impl_of(o, name.c_str());
      r.concrete_outputs.push_back(alias_tensor(im.storage, im.type));
    }
  Graph raw = scope.finish(outs);
  outs.clear();
  scope.check_no_escaped_tracers();
  log().debug("traced '{}' in {:.2f} ms: {} nodes, {} inputs ({} captured), {} outputs", name, t.ms(), raw.nodes.size(),
              raw.inputs.size(), scope.state().captured.size(), raw.outputs.size());
  log().trace("trace of '{}':\n{}", name, raw.str());
  r.captured = scope.state().captured;
  for (TraceState::Guard& g : scope.state().guards) r.guards.push_back(std::move(g.bytes));
  r.num_args = size_t(scope.state().num_args);
  ConstEvaluator eval = evaluate_node;
  r.graph = optimize(raw, &eval);
  log().trace("optimized graph of '{}':\n{}", name, r.graph.str());
  return r;
}

namespace {

// The storage an update writes: the argument's or the captured tensor's. An argument whose
// storage is borrowed from another tensor (same_value) gets its own first, as assign() does.
TensorImpl& update_target(const Entry& e, const CallArgs& args, size_t input) {
  if (input >= args.count) return *e.captured[input - args.count];
  TensorImpl& t = *args.tensor(input).impl();
  if (t.borrowed && t.storage) {
    t.storage = copy_of(*t.storage);
    t.borrowed = false;
  }
  return t;
}

// A captured tensor only this entry still holds was rebound or dropped by its owner after the
// trace (w = w - lr * g outside the function): the compiled code would read the old value forever.
void check_captured_alive(const Entry& e, const std::string& fn) {
  for (size_t j = 0; j < e.captured.size(); ++j)
    if (e.captured[j].use_count() == 1)
      throw ValueError("jit '" + fn + "': the tensor " + e.captured[j]->type.str() + " the function captured (input " +
                       std::to_string(e.num_args + j) + ") is no longer held by anything but the compiled function: it "
                       "was rebound (w = w - lr * g) or destroyed after the function was traced, and the compiled code "
                       "would keep reading its old value. Update captured tensors in place (w.assign(w - lr * g)).");
}

// A function compiled for a GPU: operands in the device's memory (CPU tensors copied up for the
// call), results and updates left there.
void run_entry_on_device(Entry& e, const CallArgs& args, std::vector<Tensor>& outputs, Device device) {
  std::vector<std::unique_ptr<backend::DeviceBuffer>> keep;
  std::vector<const backend::DeviceBuffer*> in;
  std::vector<backend::DeviceBuffer*> out;
  for (size_t i = 0; i < args.count; ++i) in.push_back(&device_memory(*args.tensor(i).impl(), device, keep));
  for (const auto& c : e.captured) in.push_back(&device_memory(*c, device, keep));
  for (const TensorType& t : e.out_types) {
    outputs.push_back(make_tensor(t, device));
    out.push_back(outputs.back().impl()->storage->on_device.get());
  }
  if (e.update_buffers.empty())
    for (size_t input : e.update_input)
      e.update_buffers.push_back(std::make_shared<Storage>(update_target(e, args, input).storage->nbytes, device));
  for (const auto& u : e.update_buffers) out.push_back(u->on_device.get());
  e.exe->run_on_device(in.data(), out.data());
}

// Per output: the donated argument whose storage it is computed into (JitOptions::donate), or -1.
// Where the compiled code allows it (backend::Executable::in_place), and nothing else holds the
// storage: no other tensor shares it, and no other argument or captured input is that tensor.
std::vector<int> donated_storage_for_outputs(const Entry& e, const CallArgs& args) {
  std::vector<int> from(e.out_types.size(), -1);
  for (const auto& [input, slot] : e.exe->in_place()) {
    if (size_t(input) >= args.count || size_t(slot) >= from.size()) continue;
    const TensorImpl* t = args.tensor(size_t(input)).impl().get();
    bool alone = !t->traced() && t->storage && t->storage.use_count() == 1 && !t->storage->on_device && !t->borrowed &&
                 t->type == e.out_types[size_t(slot)];
    for (size_t j = 0; j < args.count && alone; ++j) alone = j == size_t(input) || args.tensor(j).impl().get() != t;
    for (const auto& c : e.captured) alone &= c.get() != t;
    if (alone) from[size_t(slot)] = input;
  }
  return from;
}

// reuse_donated: results may be computed into donated arguments' storage (not when the arguments
// are read again after the run: a guard that fails re-traces with them, check_trace runs eagerly).
// Returns the bytes so reused.
int64_t run_entry(Entry& e, const CallArgs& args, std::vector<Tensor>& outputs, Device device, bool reuse_donated = false) {
  if (device != Device::CPU) {
    run_entry_on_device(e, args, outputs, device);
    return 0;
  }
  constexpr size_t kInline = 32;
  const size_t n_in = args.count + e.captured.size(), n_out = e.out_types.size() + e.update_input.size();
  const void* in_inline[kInline];
  void* out_inline[kInline];
  std::vector<const void*> in_heap;
  std::vector<void*> out_heap;
  const void** in = in_inline;
  void** out = out_inline;
  if (n_in > kInline) in_heap.resize(n_in), in = in_heap.data();
  if (n_out > kInline) out_heap.resize(n_out), out = out_heap.data();
  std::vector<Tensor> keep;  // GPU tensors' values, copied down for the call
  for (size_t i = 0; i < args.count; ++i) in[i] = host_memory(*args.tensor(i).impl(), keep);
  for (size_t j = 0; j < e.captured.size(); ++j) in[args.count + j] = host_memory(*e.captured[j], keep);
  outputs.reserve(e.out_types.size());
  // Dynamic sizes: this call's values of the symbols, and the outputs' shapes at them.
  std::vector<int64_t> symbols;
  if (e.dynamic)
    for (const SymbolicSizes::Source& src : e.dynamic->sources)
      symbols.push_back(args.tensor(size_t(src.input)).impl()->type.shape[size_t(src.dim)]);
  const std::vector<int> donated = reuse_donated && !e.dynamic ? donated_storage_for_outputs(e, args) : std::vector<int>{};
  int64_t reused = 0;
  for (size_t k = 0; k < e.out_types.size(); ++k) {
    if (!donated.empty() && donated[k] >= 0) {
      const std::shared_ptr<Storage>& storage = args.tensor(size_t(donated[k])).impl()->storage;
      outputs.push_back(alias_tensor(storage, e.out_types[k]));
      reused += int64_t(storage->nbytes);
    } else {
      outputs.push_back(make_tensor(e.dynamic ? TensorType{e.out_types[k].dtype, e.dynamic->shape_at(e.graph.outputs[k], symbols)}
                                              : e.out_types[k]));
    }
    out[k] = outputs.back().impl()->data();
  }
  if (e.update_buffers.empty() || e.dynamic) {  // (an updated argument's size may change with the call)
    e.update_buffers.clear();
    for (size_t input : e.update_input)
      e.update_buffers.push_back(std::make_shared<Storage>(update_target(e, args, input).storage->nbytes));
  }
  for (size_t k = 0; k < e.update_buffers.size(); ++k) out[e.out_types.size() + k] = e.update_buffers[k]->data;
  if (e.dynamic) e.exe->run_sized(in, out, symbols);
  else e.exe->run(in, out);
  return reused;
}

// The new values of updated tensors become theirs: a tensor's storage and the buffer its new value
// was computed into trade their bytes (double buffering: no copy, and the next call computes into
// the old bytes; every handle of the tensor sees the new value, and data() alternates between two
// addresses). Copied only where the two differ in size or device. Returns the bytes copied.
int64_t apply_updates(const Entry& e, const CallArgs& args) {
  int64_t copied = 0;
  for (size_t k = 0; k < e.update_buffers.size(); ++k) {
    Storage& target = *update_target(e, args, e.update_input[k]).storage;
    Storage& computed = *e.update_buffers[k];
    if (target.nbytes != computed.nbytes || target.device() != computed.device()) {
      copy_storage(target, computed);
      copied += int64_t(target.nbytes);
    } else if (target.on_device) {
      std::swap(target.on_device, computed.on_device);
    } else {
      std::swap(target.data, computed.data);
    }
  }
  return copied;
}

}  // namespace

namespace {

// Do the values the version read while it was traced read the same in this call? Else the index
// of the first that differs.
std::optional<size_t> failed_guard(const Entry& e, const std::vector<Tensor>& outputs) {
  for (size_t k = 0; k < e.guards.size(); ++k) {
    const Tensor& o = outputs[e.num_outputs() + k];
    const Tensor host = o.to(Device::CPU);  // o itself on the CPU
    const std::vector<uint8_t>& want = e.guards[k];
    if (want.size() != host.impl()->storage->nbytes || (!want.empty() && std::memcmp(want.data(), host.impl()->data(), want.size()) != 0))
      return k;
  }
  return std::nullopt;
}

void wait_ready(Entry& e) {
  std::unique_lock g(e.mu);
  if (!e.ready) e.cv.wait(g, [&] { return e.ready; });
  if (e.error) std::rethrow_exception(e.error);
}

// One graph break of a call with fullgraph = false.
struct Break {
  std::string what;      // item, operator bool, to_vector, data
  std::string value;     // the value read: its type and the op that made it
  size_t nodes = 0;      // nodes of the segment computed for it (after optimization)
  std::string schedule;  // that segment's schedule summary
};

// fullgraph = false: the function runs at every call with symbolic tracers; each value read
// computes the graph so far up to that value (a compiled segment, cached by its graph like every
// pipeline), and what the function returns and assigns is the last segment. `breaks` gets why.
std::vector<Tensor> run_in_segments(JitCore::State& s, const CallArgs& args, Tracer trace, std::vector<Break>* breaks,
                                    std::shared_ptr<Entry>* entry, bool run_last) {
  auto on_read = [&](TraceState& ts) {
    ts.on_read = [&s, &args, breaks, &ts](TensorImpl& im, const char* what) {
      Graph g = ts.graph;
      g.outputs = {im.value};
      g.updates.clear();
      ConstEvaluator eval = evaluate_node;
      Graph segment = optimize(g, &eval);
      backend::Compiled c = backend::compile(segment, s.backend_opt);
      std::vector<Tensor> keep;
      std::vector<const void*> in;
      for (size_t i = 0; i < args.count; ++i) in.push_back(host_memory(*args.tensor(i).impl(), keep));
      for (const auto& captured : ts.captured) in.push_back(host_memory(*captured, keep));
      Tensor out = make_tensor(im.type);
      void* out_ptr = out.impl()->data();
      c.executable->run(in.data(), &out_ptr);
      im.storage = out.impl()->storage;
      ++s.graph_breaks;
      breaks->push_back(Break{what, im.type.str() + " (" + op_name(ts.graph.node(im.value).op) + ")",
                              segment.nodes.size(), c.executable->summary()});
      log().debug("jit '{}': graph break {} at {} of {}", s.opt.name, breaks->size(), what, breaks->back().value);
    };
  };
  *entry = std::make_shared<Entry>();
  build_entry(s, **entry, args, trace, on_read);
  std::vector<Tensor> outputs;
  if (!run_last) return outputs;
  Entry& e = **entry;
  run_entry(e, args, outputs, Device::CPU);
  s.update_bytes_copied += apply_updates(e, args);
  outputs.resize(e.num_outputs());
  return outputs;
}

}  // namespace

namespace {

// JitOptions::donate: each position names one of the call's tensor arguments, once.
void check_donate(const JitCore::State& s, const CallArgs& args) {
  for (size_t k = 0; k < s.opt.donate.size(); ++k) {
    const int i = s.opt.donate[k];
    if (i < 0 || size_t(i) >= args.count)
      throw ValueError("jit '" + s.opt.name + "': donate names argument " + std::to_string(i) + ", but the call has " +
                       std::to_string(args.count) + " tensor arguments (positions count a std::vector<Tensor>'s tensors one by one)");
    for (size_t j = 0; j < k; ++j)
      if (s.opt.donate[j] == i) throw ValueError("jit '" + s.opt.name + "': donate names argument " + std::to_string(i) + " twice");
  }
}

// A donated argument the function also captures (reads as a tensor of its own) would leave the
// compiled function without its storage at the next call.
void check_donated_not_captured(const JitCore::State& s, const Entry& e, const CallArgs& args) {
  for (int i : s.opt.donate)
    for (const auto& c : e.captured)
      if (c.get() == args.tensor(size_t(i)).impl().get())
        throw ValueError("jit '" + s.opt.name + "': argument " + std::to_string(i) + " is donated (JitOptions::donate), but the "
                         "function also captures that tensor and reads it at every call: pass it as an argument only, or do "
                         "not donate it");
}

// Donated arguments give their storage up when the call is done, whether a result took it or not
// (a result that did holds it now). Tracers (a jitted function called inside another trace) have none.
void consume_donated(const JitCore::State& s, const CallArgs& args) {
  for (int i : s.opt.donate) {
    TensorImpl& t = *args.tensor(size_t(i)).impl();
    if (t.traced()) continue;
    t.storage.reset();
    t.borrowed = false;
    t.uniform.reset();
    t.donated_to = s.opt.name;
  }
}

std::vector<Tensor> call_entry(JitCore::State& s, const CallArgs& args, Tracer trace, const std::vector<int>** tree);

}  // namespace

std::vector<Tensor> JitCore::call(const CallArgs& args, Tracer trace, const std::vector<int>** tree) {
  if (s_->opt.donate.empty()) return call_entry(*s_, args, trace, tree);
  check_donate(*s_, args);
  std::vector<Tensor> out = call_entry(*s_, args, trace, tree);
  consume_donated(*s_, args);
  return out;
}

namespace {

std::vector<Tensor> call_entry(JitCore::State& s, const CallArgs& args, Tracer trace, const std::vector<int>** tree) {
  if (!s.opt.fullgraph) {
    thread_local std::shared_ptr<Entry> last;  // keeps the result structure alive for the caller
    std::vector<Break> breaks;
    std::vector<Tensor> out = run_in_segments(s, args, trace, &breaks, &last, true);
    *tree = &last->tree;
    return out;
  }
  // With dynamic_dims, the version for every size is looked up first (its key leaves them out),
  // then one of these exact sizes (where one pipeline could not serve every size).
  const DynamicDims* dyn = s.dynamic();
  uint64_t h = Signature::hash_of(args, s.opt.name, dyn);
  const uint64_t h_exact = dyn ? Signature::hash_of(args, s.opt.name) : h;
  std::shared_ptr<Entry> e;
  bool built_here = false;
  bool exact_only = false;  // a version for every size was found not to serve these sizes
  for (;;) {
    auto find = [&] {
      std::shared_ptr<Entry> found = exact_only ? nullptr : s.find_locked(h, args);
      if (!found && dyn) found = s.find_locked(h_exact, args);
      return found;
    };
    {
      std::shared_lock lk(s.mu);
      e = find();
    }
    if (e) e->last_used.store(s.clock.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (!e) {
      std::unique_lock lk(s.mu);
      e = find();
      if (!e) {
        e = std::make_shared<Entry>();
        // A pipeline for every size is tried once; sizes it does not serve compile on their own.
        const bool every_size = dyn && s.dynamic_impossible.empty() && !exact_only;
        e->fixed_sizes = dyn && !every_size;
        e->key = Signature::of(args, every_size ? h : h_exact, every_size ? dyn : nullptr);
        e->last_used = ++s.clock;
        if (!s.last_built) log().debug("jit '{}': first call, tracing", s.opt.name);
        s.on_retrace(*e);
        s.entries.emplace(e->key.hash, e);
        s.evict_beyond_bound();
        built_here = true;
      }
    }
    if (built_here) break;
    wait_ready(*e);
    if (e->serves(args)) break;
    exact_only = true;
  }
  if (built_here) {
    const uint64_t keyed = e->key.hash;
    try {
      build_entry(s, *e, args, trace);
      check_donated_not_captured(s, *e, args);
    } catch (...) {
      s.forget(keyed, e);
      throw;
    }
    {
      std::unique_lock lk(s.mu);
      s.last_built = e;
      if (e->rekeyed) {  // built for these sizes only (one pipeline could not serve every size)
        auto [lo, hi] = s.entries.equal_range(keyed);
        for (auto it = lo; it != hi; ++it)
          if (it->second == e) {
            s.entries.erase(it);
            break;
          }
        e->key = e->sizes_key;
        s.entries.emplace(e->key.hash, e);
      }
    }
    *tree = &e->tree;
    if (s.opt.trace_mode == TraceMode::Concrete) return std::move(e->first_outputs);
  } else {
    ++s.hits;
    log().debug("jit '{}': cache hit", s.opt.name);
    check_captured_alive(*e, s.opt.name);
    check_donated_not_captured(s, *e, args);
  }

  std::vector<Tensor> outputs;
  for (;;) {  // the versions of this signature, until one's guards hold (no guards: the first)
    {
      std::unique_lock<std::mutex> one_at_a_time;
      if (!e->update_input.empty()) one_at_a_time = std::unique_lock(e->run_mu);
      outputs.clear();
      const bool reuse = !s.opt.donate.empty() && e->guards.empty() && !(built_here && s.opt.check_trace);
      s.donated_bytes_reused += run_entry(*e, args, outputs, s.opt.device, reuse);
    }
    const std::optional<size_t> failed = e->guards.empty() ? std::nullopt : failed_guard(*e, outputs);
    if (!failed) break;
    ++s.guard_failures;
    std::shared_ptr<Entry> next;
    {
      std::unique_lock lk(s.mu);
      if (!e->next) {
        // No version read these values: trace one more (in concrete mode the call itself).
        e->next = std::make_shared<Entry>();
        e->next->key = e->key;
        next = e->next;
        s.on_retrace(*next, "value read " + std::to_string(*failed + 1) + " of " + std::to_string(e->guards.size()) +
                                " while tracing differs from every version's");
        lk.unlock();
        try {
          build_entry(s, *next, args, trace);
        } catch (...) {
          std::unique_lock relk(s.mu);
          e->next = nullptr;
          throw;
        }
        *tree = &next->tree;
        return std::move(next->first_outputs);
      }
      next = e->next;
    }
    wait_ready(*next);
    e = next;
  }
  *tree = &e->tree;
  const std::vector<std::shared_ptr<Storage>>& updates = e->update_buffers;
  if (built_here && s.opt.check_trace) {
    // Run the function eagerly on the same inputs, compare, and put updated tensors back as they were.
    std::vector<std::shared_ptr<Storage>> saved;
    for (size_t input : e->update_input) saved.push_back(copy_of(*update_target(*e, args, input).storage));
    std::vector<Tensor> eager_args;
    for (size_t i = 0; i < args.count; ++i) eager_args.push_back(args.tensor(i));
    std::vector<int> eager_tree;
    std::vector<Tensor> expected = trace(eager_args, &eager_tree);
    std::string bad;
    for (size_t k = 0; k < expected.size() && bad.empty(); ++k)
      bad = compare(outputs[k], expected[k], s.opt.check_tolerance, "output " + std::to_string(k));
    for (size_t k = 0; k < updates.size(); ++k) {
      TensorImpl& t = update_target(*e, args, e->update_input[k]);
      if (bad.empty()) {
        Tensor compiled = alias_tensor(updates[k], t.type), eager = alias_tensor(t.storage, t.type);
        bad = compare(compiled, eager, s.opt.check_tolerance, "update " + std::to_string(k));
      }
      copy_storage(*t.storage, *saved[k]);
    }
    if (!bad.empty()) {
      s.forget(h, e);  // a retry must not find the unchecked entry
      throw CompileError("jit '" + s.opt.name + "' (check_trace): the compiled function differs from eager execution: " + bad);
    }
    log().debug("jit '{}': check_trace passed", s.opt.name);
  }
  s.update_bytes_copied += apply_updates(*e, args);
  outputs.resize(e->num_outputs());
  return outputs;
}

}  // namespace

Graph JitCore::graph(const CallArgs& args, Tracer trace) {
  std::shared_ptr<Entry> e;
  {
    std::shared_lock lk(s_->mu);
    e = s_->find_locked(Signature::hash_of(args, s_->opt.name, s_->dynamic()), args);
    if (!e) e = s_->find_locked(Signature::hash_of(args, s_->opt.name), args);
  }
  if (e) {  // waited for outside the cache lock, which its builder takes when it is done
    std::unique_lock g(e->mu);
    e->cv.wait(g, [&] { return e->ready; });
    if (!e->error) return e->graph;
  }
  return trace_and_optimize(s_->opt.name, false, args, trace, nullptr, s_->opt.memory_budget_mb).graph;
}

std::string JitCore::explain(const CallArgs& args, Tracer trace) {
  if (!s_->opt.fullgraph) {
    std::vector<Break> breaks;
    std::shared_ptr<Entry> last;
    run_in_segments(*s_, args, trace, &breaks, &last, false);
    std::string out = "jit '" + s_->opt.name + "' (fullgraph = false): " + std::to_string(breaks.size() + 1) +
                      " segments; the function runs at every call and each value read ends a segment\n";
    for (size_t k = 0; k < breaks.size(); ++k)
      out += "segment " + std::to_string(k + 1) + ": " + std::to_string(breaks[k].nodes) + " nodes, ends at " +
             breaks[k].what + " of " + breaks[k].value + "; schedule " + breaks[k].schedule + "\n";
    out += "segment " + std::to_string(breaks.size() + 1) + " (results and updates): " +
           std::to_string(last->graph.nodes.size()) + " nodes; schedule " + last->exe->summary() + "\n\n";
    return out + last->exe->explain();
  }
  {  // the version these arguments run, when there is one (a pipeline for every size included)
    std::shared_ptr<Entry> e;
    {
      std::shared_lock lk(s_->mu);
      e = s_->find_locked(Signature::hash_of(args, s_->opt.name, s_->dynamic()), args);
      if (!e) e = s_->find_locked(Signature::hash_of(args, s_->opt.name), args);
    }
    if (e) {
      std::unique_lock g(e->mu);
      e->cv.wait(g, [&] { return e->ready; });
      if (!e->error) return (e->dynamic ? "one pipeline for every size of the dynamic dimensions:\n" + e->dynamic->str() + "\n\n" : "") +
                            e->exe->explain();
    }
  }
  Traced tr = trace_and_optimize(s_->opt.name, false, args, trace, nullptr, s_->opt.memory_budget_mb);
  backend::Compiled c = backend::compile(tr.graph, s_->options_for(tr.graph));
  return c.executable->explain();
}

std::string JitCore::device_code(const CallArgs& args, Tracer trace) {
  Traced tr = trace_and_optimize(s_->opt.name, false, args, trace, nullptr, s_->opt.memory_budget_mb);
  return backend::compile(tr.graph, s_->options_for(tr.graph)).executable->device_code();
}

Graph trace_graph(const std::string& name, const CallArgs& args, Tracer trace) {
  TraceScope scope(name, false);
  std::vector<int> tree;
  std::vector<Tensor> outs = scope.run(args, trace, &tree);
  Graph g = scope.finish(outs);
  outs.clear();
  scope.check_no_escaped_tracers();
  return g;
}

TracedFunction trace_function(const std::string& name, const CallArgs& args, Tracer trace) {
  Traced tr = trace_and_optimize(name, false, args, trace);
  TracedFunction f;
  f.graph = std::move(tr.graph);
  f.num_args = tr.num_args;
  for (size_t i = 0; i < args.count; ++i) f.inputs.push_back(args.tensor(i));
  for (const auto& c : tr.captured) f.inputs.push_back(alias_tensor(c->storage, c->type));
  return f;
}

bool tracing_active() { return current_trace() != nullptr; }

void check_host_code_allowed() {
  const TraceState* ts = current_trace();
  if (ts && !ts->on_read)
    throw ValueError("exclude_from_trace inside '" + ts->fn_name + "', which is traced once and then runs compiled: the "
                     "host code would run only while tracing. Jit the function with JitOptions{.fullgraph = false} to "
                     "run it at every call.");
}

std::string default_name(const std::type_info& fn_type) {
  int status = 0;
  char* d = abi::__cxa_demangle(fn_type.name(), nullptr, nullptr, &status);
  std::string s = (status == 0 && d) ? d : fn_type.name();
  std::free(d);
  // "main::{lambda(hjit::Tensor const&)#1}" -> "main::lambda#1"
  size_t open = s.find("{lambda(");
  if (open != std::string::npos) {
    size_t hash = s.find(")#", open);
    size_t close = s.find('}', hash == std::string::npos ? open : hash);
    if (hash != std::string::npos && close != std::string::npos)
      s = s.substr(0, open) + "lambda" + s.substr(hash + 1, close - hash - 1);
  }
  return s;
}

}  // namespace hjit::detail

namespace hjit {

MemoryStats memory_stats() {
  const AllocatorCounts a = allocator_counts();
  MemoryStats m;
  m.current_bytes = a.in_use, m.peak_bytes = a.peak, m.cached_bytes = a.cached;
  m.allocations = a.allocations, m.system_allocations = a.system_allocations;
  for (const auto& e : backend::live_executables()) m.pipelines.push_back(PipelineMemory{e->name(), e->temporary_bytes()});
  std::sort(m.pipelines.begin(), m.pipelines.end(), [](const PipelineMemory& a, const PipelineMemory& b) { return a.name < b.name; });
  return m;
}

void reset_peak_memory() { reset_allocator_peak(); }

CacheStats cache_stats() {
  const backend::CacheCounts c = backend::cache_counts();
  CacheStats s;
  s.memory_hits = c.memory_hits, s.disk_hits = c.disk_hits, s.misses = c.misses, s.disk_rejected = c.disk_rejected;
  s.disk_writes = c.disk_writes, s.disk_evictions = c.disk_evictions, s.disk_entries = c.disk_entries;
  s.disk_bytes = c.disk_bytes, s.directory = c.directory;
  return s;
}

}  // namespace hjit
