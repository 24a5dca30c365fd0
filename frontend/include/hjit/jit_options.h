// What jit() is asked to do (JitOptions), what it reports (JitStats), and the process-wide compile
// cache's counters.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <hjit/graph.h>

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
  // Threads a call's parallel loops use, the caller's included: 0, the process's default
  // (hjit::set_num_threads, HJIT_THREADS, else the CPUs it may run on); never more than that. The
  // compiled code and its results are the same whatever it is (docs/threads.md).
  int threads = 0;
};

struct JitStats {
  int64_t traces = 0;       // times the function was traced
  int64_t compiles = 0;     // pipelines compiled by this process (a trace may find its pipeline already compiled)
  int64_t loaded = 0;       // pipelines read from the disk cache instead (compiled by an earlier process)
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

}  // namespace hjit
