// The backend as the rest of hjit sees it: compile a Graph, run it on raw buffers. No Halide type
// appears here, so the frontend compiles without Halide.h.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <hjit/graph.h>

#include "graph/symbolic_sizes.h"
#include "halide_backend/schedule_request.h"

namespace hjit::backend {

struct Options {
  std::string name;           // for logs and explain()
  Device device = Device::CPU;
  // How it is scheduled, and the tuning database to look it up in first: made by
  // schedule_request() where the option entered hjit (schedule_request.h).
  ScheduleRequest schedule;
  int cuda_capability = 80;   // Device::CUDA: the compute capability code is generated for
  // Sizes that vary between calls (jit's dynamic_dims): one pipeline for every size, called with
  // Executable::run_sized; schedule must be one of ScheduleRequest::at_every_size(). Kept in
  // memory only.
  std::shared_ptr<const SymbolicSizes> dynamic;
  // (input, output slot) pairs the caller may call the pipeline with one buffer for (a donated
  // argument, graph/passes/in_place.h): the output's loops then never compute an element twice.
  // Honored by a single pipeline on the CPU only; Executable::in_place() says which were.
  std::vector<std::pair<int, int>> in_place;
};

// Bytes in a GPU's memory: a tensor's storage on Device::CUDA or Device::OpenCL. Allocated from
// the device's runtime, the one every compiled pipeline of that device shares, so that a pipeline
// reads what another wrote without a copy through the host.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual Device device() const = 0;
  virtual size_t bytes() const = 0;
  virtual void upload(const void* host) = 0;        // bytes() bytes from host memory
  virtual void download(void* host) const = 0;      // bytes() bytes to host memory
  virtual void copy_from(const DeviceBuffer& src) = 0;  // same device and size; on the device
  virtual void sync() const = 0;                        // waits for the work that writes it
};

// (Device memory, and whether this process can run code on a device: its kind's allocate() and
// usable(), halide_backend/devices.h.)

// Host-device traffic, counted for hjit::device_stats().
struct TransferCounts {
  int64_t uploads = 0, downloads = 0, upload_bytes = 0, download_bytes = 0, allocations = 0;
};
TransferCounts transfer_counts();

class Executable {
 public:
  virtual ~Executable() = default;
  // inputs: one pointer per graph input (Graph::inputs order); outputs: one per graph output, then
  // one per update (Graph::updates order). Shapes and dtypes are those of the graph; buffers are
  // dense row-major. Outputs with no elements may be null. Safe to call from several threads.
  // GPU pipelines copy host inputs to the device and outputs back, per call.
  virtual void run(const void* const* inputs, void* const* outputs) const = 0;
  // A pipeline compiled with Options::dynamic, at the sizes those symbol values give (SymbolicSizes
  // order); other pipelines ignore `symbols`.
  virtual void run_sized(const void* const* inputs, void* const* outputs, const std::vector<int64_t>& symbols) const {
    run(inputs, outputs);
  }
  // Dynamic sizes: the smallest value of each symbol run_sized serves (its schedule's splits).
  virtual int64_t min_dynamic_size() const { return 0; }
  // GPU pipelines: inputs and outputs in the memory of the pipeline's device, nothing copied
  // through the host. Outputs with no elements may be null.
  virtual void run_on_device(const DeviceBuffer* const* inputs, DeviceBuffer* const* outputs) const;
  // The schedule chosen and the lowered Halide statement.
  virtual std::string explain() const = 0;
  // One line naming the schedule: "built-in", "unfused", "Adams2019", or the fallback and why.
  virtual std::string summary() const = 0;
  // The GPU kernels' device code (PTX for CUDA); empty for CPU code. A pipeline compiled in parts
  // gives one PTX module after another.
  virtual std::string device_code() const { return {}; }
  // The compiled function's name (a pipeline's symbol), for memory_stats().
  virtual std::string name() const = 0;
  // The most memory one call has taken besides its inputs and outputs (Halide's temporaries, the
  // values between parts or steps), at once; 0 before the first call.
  virtual int64_t temporary_bytes() const { return 0; }
  // The (input, output slot) pairs of Options::in_place this code may be called with one buffer for.
  virtual std::vector<std::pair<int, int>> in_place() const { return {}; }
};

struct Compiled {
  std::shared_ptr<const Executable> executable;
  bool cache_hit = false;  // an identical graph was compiled before with these options
  double ms = 0;           // time spent here
  bool loaded = false;     // read from the disk cache whole: nothing of it compiled here
};

// Compiles (or finds in the process-wide cache, keyed by the graph's text and the options). With
// a tuning database, a graph the database knows is compiled with its best measured schedule
// (tuned_store.h; no search, and no compile when the disk cache has it); a tuned schedule that no
// longer applies falls back to the request's own choice, with a warning. Throws CompileError when
// Halide rejects the pipeline, ValueError for a missing, corrupt or foreign tuning database.
Compiled compile(const Graph& graph, const Options& options);

// The most bytes a run of graph compiled under options is estimated to hold at once beyond its
// inputs, before compiling it (JitOptions::memory_budget_mb plans by it): graph/passes/peak_memory.h's
// model for each pipeline, with the parts compile() cuts a big graph into (a value between parts is
// stored from the part that computes it to the last that reads it) and control flow's bodies
// estimated the same way.
int64_t estimate_peak_bytes(const Graph& graph, const Options& options);

// The compile cache's counters (hjit::cache_stats()).
struct CacheCounts {
  int64_t memory_hits = 0, memory_entries = 0;
  int64_t disk_hits = 0, misses = 0, disk_rejected = 0, disk_writes = 0, disk_evictions = 0;
  int64_t disk_entries = 0, disk_bytes = 0;
  std::string directory;
  int64_t shared_hits = 0, shared_rejected = 0, shared_writes = 0;
  std::string shared;
};
CacheCounts cache_counts();

// The compiled pipelines alive in this process (for memory_stats()).
std::vector<std::shared_ptr<const Executable>> live_executables();

// The Halide target string code for `device` is compiled for (part of every cache key).
std::string target_name(Device device);

// The schedule's text form that `how` (Unfused, BuiltIn or Auto) decides for g (schedule_value.h:
// its header names the scheduler and its parameters). nullopt, with the reason in *why, when the
// scheduler declines.
std::optional<std::string> decide_schedule(const Graph& g, Device device, const ScheduleChoice& how, std::string* why);

// What compile() does first with a schedule Given from a file: parses the schedule of that text
// form, applies it to g and has Halide lower the result in a child process. Throws ValueError when
// the schedule does not parse or apply, CompileError when Halide rejects it or the child does not
// come back (Halide's compiler crashed, or did not finish in two minutes).
void check_schedule(const Graph& g, Device device, const std::string& schedule_text);

}  // namespace hjit::backend
