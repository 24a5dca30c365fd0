// A compiled pipeline, ready to call: the function, and halide_buffer_t templates for its
// arguments, so that a call only fills in host pointers (no allocation, no Halide::Buffer, no
// global ImageParam state). The code comes from a shared object (the disk cache's, see
// shared_object.h) or, where no linker is installed, from Halide's in-process JIT.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <HalideRuntime.h>

#include "halide_backend/backend.h"
#include "halide_backend/devices.h"

namespace hjit::backend {

// An argument of a compiled function: where its host pointer comes from, and its buffer.
struct ArgSpec {
  enum class From : uint8_t { Input, Constant, Output };
  From from = From::Input;
  int index = 0;  // into the call's inputs, the constants, or the call's outputs
  halide_type_t type{};
  std::vector<halide_dimension_t> dims;  // Halide order (innermost first), dense
  // A pipeline of dynamic sizes: the row-major shape as forms of the symbols, from which a call's
  // dims are made (empty: dims as they are).
  std::vector<Affine> sizes;
};

// Everything about a compiled function except its code: what the disk cache stores beside it.
struct PipelineInfo {
  std::string function;   // the symbol: <function>_argv is called
  std::string summary;    // one line naming the schedule
  std::string schedule;   // the schedule's text form
  // GPU pipelines: the device code (PTX for CUDA) its kernels were compiled to; empty on the CPU.
  std::string device_code;
  Device device = Device::CPU;  // where its kernels run (GPU pipelines load that device's runtime)
  int64_t min_dynamic_size = 0;  // dynamic sizes: the smallest value of each symbol it serves
  std::vector<ArgSpec> args;
  std::vector<std::shared_ptr<const std::vector<uint8_t>>> constants;  // hidden inputs' bytes
  bool computes_nothing() const;
  bool on_gpu() const { return !device_kind(device).host(); }
};

// What a pipeline was built from: enough to lower it again with its schedule (info().schedule), for
// explain()'s statement and for an exported library's object code.
struct PipelineSource {
  Graph graph;
  std::string target;  // the Target's string (codegen/target.h)
  std::shared_ptr<const SymbolicSizes> dynamic;
};

using ArgvFunction = int (*)(void**);

class HalideExecutable final : public Executable {
 public:
  // code: keeps the function alive (a loaded shared object, a JIT module); jit_context: the
  // user_context the in-process JIT needs, or null for code that calls the global runtime hooks.
  HalideExecutable(PipelineInfo info, ArgvFunction fn, std::shared_ptr<void> code, std::shared_ptr<void> jit_context);
  void run(const void* const* inputs, void* const* outputs) const override;
  void run_sized(const void* const* inputs, void* const* outputs, const std::vector<int64_t>& symbols) const override;
  void run_on_device(const DeviceBuffer* const* inputs, DeviceBuffer* const* outputs) const override;
  std::string explain() const override;
  std::string summary() const override { return info_.summary; }
  int64_t min_dynamic_size() const override { return info_.min_dynamic_size; }
  std::string device_code() const override { return info_.device_code; }
  std::string name() const override { return info_.function; }
  int64_t temporary_bytes() const override { return peak_temporaries_.load(); }
  void set_summary(std::string s) { info_.summary = std::move(s); }
  // What it was built from, and how explain() gets Halide's lowered statement from that: lowering
  // again, on demand (keeping it would cost every compile the printing and every cache entry the
  // text).
  void set_source(std::shared_ptr<const PipelineSource> source, std::function<std::string(const PipelineSource&)> statement) {
    source_ = std::move(source), statement_ = std::move(statement);
  }
  const PipelineSource* source() const { return source_.get(); }
  const PipelineInfo& info() const { return info_; }
  std::vector<std::pair<int, int>> in_place() const override { return in_place_; }
  void set_in_place(std::vector<std::pair<int, int>> pairs) { in_place_ = std::move(pairs); }
 private:
  template <class Fill, class After>
  void call(Fill fill, After after, const std::vector<int64_t>* symbols = nullptr) const;
  PipelineInfo info_;
  ArgvFunction fn_;
  std::shared_ptr<void> code_, jit_context_;
  std::shared_ptr<const PipelineSource> source_;
  std::function<std::string(const PipelineSource&)> statement_;
  std::vector<std::pair<int, int>> in_place_;
  mutable std::atomic<int64_t> peak_temporaries_{0};  // the most one call has allocated at once
};

// Installs hjit's handlers (errors into the call's context, temporaries from hjit's allocator,
// parallel loops on OpenMP) in the Halide runtime of a loaded shared object; `find` looks up the
// runtime's functions in it. Throws CompileError when it has none.
void install_runtime_hooks(const std::function<void*(const char*)>& find);

// Calls a runtime function with a user context that collects the runtime's error messages.
int call_runtime(const std::function<int(void* user_context)>& f, std::string* error);

}  // namespace hjit::backend
