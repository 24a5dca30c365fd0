// The compiled function: what every door of hjit gets for a graph (a jit version, a Module, a
// compiled eager op, a graph-break segment, an eager op on a GPU, a tuning candidate, an exported
// library), made by the one call into the backend's compile. It owns what a call does with it
// once: binding tensors to the pipeline's buffers (host or device memory, dynamic sizes), results
// computed into a caller's tensor or a donated argument's storage, running, and the new values of
// assign()ed tensors made theirs. export_library writes the same object out.
//
//   auto f = CompiledFunction::compile(graph, request);   // built, or found in the cache
//   std::vector<Tensor> out;
//   {
//     auto lock = f->lock_for_call();                    // calls that update tensors: one at a time
//     f->run(inputs, out);                               // inputs: one per graph input
//     f->apply_updates(inputs);                          // assign()ed values become the tensors'
//   }
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <hjit/graph.h>
#include <hjit/tensor.h>

#include "frontend/tensor/tensor_impl.h"
#include "graph/input_sizes.h"
#include "graph/symbolic_sizes.h"
#include "halide_backend/backend.h"
#include "halide_backend/export/export.h"

namespace hjit::detail {

// What a compiled function is asked to be, made once where an API's options entered hjit and
// checked there (backend::schedule_request).
struct FunctionRequest {
  std::string name;  // for logs, explain() and the pipeline's symbol
  Device device = Device::CPU;
  int cuda_capability = 80;
  backend::ScheduleRequest schedule;
  // One pipeline for every size of these symbols (JitOptions/ModuleOptions::dynamic_dims).
  std::shared_ptr<const SymbolicSizes> dynamic;
  // Graph inputs whose storage a result may be computed into (JitOptions::donate): the backend
  // keeps such an output's loops from computing an element twice (CPU pipelines only).
  std::vector<int> donate;
};

// Where the outputs of a call go besides fresh tensors.
struct RunOptions {
  const Tensor* into = nullptr;  // the first output, computed into this tensor's storage where it
                                 // has the output's type and no input shares it (Jitted::into)
  bool reuse_donated = false;    // outputs computed into donated inputs' storage where the code
                                 // allows it and nothing else holds that storage
};

class CompiledFunction {
 public:
  // The one door to the backend's compile: the graph compiled as requested (or found in the compile
  // cache). Throws what backend::compile throws.
  static std::shared_ptr<CompiledFunction> compile(Graph graph, FunctionRequest request);
  // Export (hjit::export_library): the function written out as a static library and a C header.
  // For this machine's target it is the function compile() makes here, its pipelines written out
  // as they run (the same schedules, fitted parameters and extern stages, hence the same bits); for
  // another target, cut and scheduled as compile() would for it (backend/export/export.h).
  static std::vector<std::string> write_library(Graph graph, FunctionRequest request, const backend::ExportRequest& library);
  // A function around code compiled elsewhere (the unit tests' stubs).
  CompiledFunction(Graph graph, FunctionRequest request, std::shared_ptr<const backend::Executable> code);

  const Graph& graph() const { return graph_; }
  const FunctionRequest& request() const { return request_; }
  const backend::Executable& executable() const { return *code_; }
  const std::shared_ptr<const backend::Executable>& code() const { return code_; }
  bool found_compiled() const { return cache_hit_; }  // the compile cache had it
  bool loaded() const { return loaded_; }  // read from the disk cache (compiled by an earlier process)
  double compile_ms() const { return compile_ms_; }

  // The graph's outputs' types (at the traced sizes), and per update the input it writes.
  const std::vector<TensorType>& output_types() const { return out_types_; }
  const std::vector<size_t>& update_inputs() const { return update_input_; }
  // What run() checks its inputs' types against.
  const InputSizes& input_sizes() const { return input_sizes_; }

  // Held around run() and apply_updates() by callers of a function that updates tensors, so that
  // its update buffers serve one call at a time; a no-op lock otherwise.
  std::unique_lock<std::mutex> lock_for_call();

  // Runs the code on `inputs` (one per graph input), after checking their types against what the
  // pipeline was compiled for (graph/input_sizes.h: a disagreement is the error eager raises for
  // them, and no native code runs): the results into `outputs` (appended: one per
  // graph output), the updates' new values into the function's update buffers. On the CPU, inputs
  // on a GPU are copied down for the call; a function for a GPU reads its inputs in the device's
  // memory (CPU tensors copied up) and leaves its results there. Returns the bytes of donated
  // storage reused.
  int64_t run(std::span<TensorImpl* const> inputs, std::vector<Tensor>& outputs, const RunOptions& options = {});
  // After run(): each update's new value becomes its input tensor's: the tensor's storage and the
  // buffer trade bytes (double buffering: no copy, every handle of the tensor sees the new value);
  // copied where they differ in size or device. An input borrowing another tensor's storage gets
  // its own first. Returns the bytes copied.
  int64_t apply_updates(std::span<TensorImpl* const> inputs);
  // After run(): update k's new value, not yet applied.
  Tensor updated_value(size_t k, const TensorType& type) const;

 private:
  std::vector<int64_t> symbols_of(std::span<TensorImpl* const> inputs) const;
  void check_sizes(std::span<TensorImpl* const> inputs, const std::vector<int64_t>& symbols) const;
  int64_t run_on_host(std::span<TensorImpl* const> inputs, std::vector<Tensor>& outputs, const std::vector<int64_t>& symbols,
                      const RunOptions& options);
  void run_on_device(std::span<TensorImpl* const> inputs, std::vector<Tensor>& outputs);
  std::vector<int> donated_storage_for_outputs(std::span<TensorImpl* const> inputs) const;

  Graph graph_;
  FunctionRequest request_;
  std::shared_ptr<const backend::Executable> code_;
  bool cache_hit_ = false, loaded_ = false;
  double compile_ms_ = 0;
  bool on_host_ = true;  // the device's code runs on the host, on host memory (asked once)
  InputSizes input_sizes_;
  std::vector<TensorType> out_types_;
  std::vector<size_t> update_input_;
  // New values of updated inputs are computed into these (allocated on the first call, reused
  // after), then trade storage with the tensors'.
  std::vector<std::shared_ptr<Storage>> update_buffers_;
  std::mutex call_mu_;
};

// The inputs of one call, bound without allocating for up to kInline of them: a call's arguments,
// then the tensors the function captured (or a module's parameters).
class CallInputs {
 public:
  static constexpr size_t kInline = 32;
  void push(TensorImpl* t) {
    if (count_ < kInline) inline_[count_] = t;
    else more_.push_back(t);
    ++count_;
    if (count_ == kInline + 1) more_.insert(more_.begin(), inline_, inline_ + kInline);
  }
  std::span<TensorImpl* const> view() const {
    return count_ <= kInline ? std::span<TensorImpl* const>(inline_, count_) : std::span<TensorImpl* const>(more_);
  }
  size_t size() const { return count_; }

 private:
  TensorImpl* inline_[kInline];
  std::vector<TensorImpl*> more_;
  size_t count_ = 0;
};

}  // namespace hjit::detail
