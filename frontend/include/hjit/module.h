// Saved functions: hjit::save traces a function and writes its graph, the values of the tensors it
// captured (its parameters) and its signature to one file; Module::load reads it back in a program
// that does not have the function's source, and runs it compiled (MegEngine's dump,
// torch.jit.save/load).
//
//   hjit::save("block.hjit", block, x);               // traced with x's dtype and shape
//   hjit::Module m = hjit::Module::load("block.hjit");
//   Tensor y = m(x);                                   // compiled on the first call (or found in
//                                                      // the compile cache), then straight to code
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <hjit/detail/tracing.h>

namespace hjit {

struct SaveOptions {
  // Bake the captured tensors' current values into the graph as constants (MegEngine's
  // capture_as_const). A function that assigns to a captured tensor cannot be frozen.
  bool freeze_parameters = false;
};

// Checked by Module::load (ValueError for a bad one).
struct ModuleOptions {
  int opt_level = 2;            // as JitOptions
  std::string autoscheduler{};  // as JitOptions
  std::string tuning_db{};      // as JitOptions: the best schedule hjit-tune --module found
  // Dimensions whose size may differ from the traced one at every call, as {tensor, axis} pairs
  // (the tensor's index among the module's flattened arguments; axis < 0 counts from the end):
  // one pipeline serves every size (a batch of 1 or 64), as JitOptions::dynamic_dims does. Found
  // when the module is made, by tracing again at other sizes (traced sizes must be 2 or more),
  // and saved with it; a function whose graph changes otherwise with the size (C++ that branches
  // on it) is a ValueError saying why. Sizes below the smallest the pipeline's schedule serves,
  // and every size of a graph with an op the backend compiles for fixed sizes only, compile a
  // pipeline of their own (HJIT_LOG=debug says which). CPU only.
  std::vector<std::pair<int, int>> dynamic_dims{};
  // Where one pipeline cannot serve every size of dynamic_dims: false, a DynamicDimsError saying
  // why; true, the module of the traced sizes (made from the same trace, the reason logged at
  // debug level): how hjit::onnx::load reads a model's symbolic dimensions.
  bool fixed_sizes_otherwise = false;
  int threads = 0;  // as JitOptions: the threads a call's parallel loops use (0: the default)
};

// What a module call returns: its outputs, in the order the function returned them flattened
// (a std::pair<Tensor, std::vector<Tensor>> becomes 1 + n tensors). Converts to a Tensor when
// there is exactly one.
class ModuleResult : public std::vector<Tensor> {
 public:
  using std::vector<Tensor>::vector;
  operator Tensor() const;  // ValueError unless there is exactly one output
};

// The host code of a module that runs in segments between graph breaks: a model that reads values
// it computes as sizes (a shape, a count, an output size that depends on values: NonZero, NMS), so
// that no one graph computes it. hjit::onnx::load makes these; Module::from_program wraps one.
// Every call runs `run` as a function jitted with JitOptions::fullgraph = false: the graph up to
// each value read is computed (compiled and cached by its graph, small ones eagerly) and the host
// code goes on with the value.
struct ModuleProgram {
  std::string kind;   // the loader that rebuilds it from `bytes` (register_module_program); "" : it
                      // cannot be saved
  std::string bytes;  // what the loader reads (the parameters' values are saved beside them)
  std::string why;    // why it runs in segments: the first value read, for errors and logs
  std::vector<Tensor> parameters;       // what `run` reads besides its arguments (saved, restored)
  std::vector<TensorType> input_types;  // the arguments it was made for (a dimension of -1: any size)
  std::function<std::vector<Tensor>(const std::vector<Tensor>& args)> run;
};
// Rebuilds a program from its bytes (the parameters then get the saved values): a ValueError for
// bytes it does not accept.
using ModuleProgramLoader = std::function<ModuleProgram(const std::string& bytes)>;
// Module::load finds programs of `kind` through this (hjit::onnx registers "onnx").
void register_module_program(const std::string& kind, ModuleProgramLoader loader);

class Module {
 public:
  // A module in segments whose calls run the program (see ModuleProgram); options as Module::load's
  // (dynamic_dims aside: every size is served, each segment compiled for the sizes it meets).
  static Module from_program(const std::string& name, ModuleProgram program, const ModuleOptions& options = {});
  // Whether it runs in segments between graph breaks, and the read that makes it ("" : one graph).
  bool segmented() const;
  const std::string& why_segmented() const;

  // Reads and checks a saved module. A missing, truncated, corrupt or foreign file, or one of
  // another format version, is a ValueError saying what is wrong.
  static Module load(const std::string& path, ModuleOptions options = {});
  void save(const std::string& path) const;

  // Runs the module on tensors of the saved signature (ShapeError / DTypeError otherwise).
  // Tensor and std::vector<Tensor> arguments, in the order of the saved function's. Safe to call
  // from several threads; calls of a module that updates its parameters run one at a time.
  // Inside a traced function (jit, grad, export_library, hjit-tune) the module's graph is recorded
  // into the trace, its parameters captured as any tensor the function reads.
  template <class... Args>
  ModuleResult operator()(const Args&... args) const {
    std::vector<Tensor> flat;
    (flatten(flat, args), ...);
    return call(flat);
  }
  ModuleResult call(const std::vector<Tensor>& args) const;

  // The captured tensors (handles sharing the module's storage), read at every call: assign() to
  // them changes what the module computes, and a function that assigned to them updates them at
  // every call.
  std::vector<Tensor> parameters() const;
  // The same module with the parameters' current values baked in as constants.
  Module freeze() const;

  const std::string& name() const;
  // The module's graph; a module in segments has none (ValueError).
  const Graph& graph() const;
  std::vector<TensorType> input_types() const;   // of the arguments (parameters excluded), as traced
  // {tensor, axis} of every dimension whose size may change from call to call (dynamic_dims).
  std::vector<std::pair<int, int>> dynamic_dims() const;
  std::vector<TensorType> output_types() const;  // a module in segments: ValueError (values size them)
  std::string str() const;  // signature, parameters and graph

  struct Impl;

 private:
  explicit Module(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  static void flatten(std::vector<Tensor>& out, const Tensor& t) { out.push_back(t); }
  static void flatten(std::vector<Tensor>& out, const std::vector<Tensor>& ts) { out.insert(out.end(), ts.begin(), ts.end()); }
  std::shared_ptr<Impl> impl_;
  friend Module detail_make_module(const std::string&, const detail::CallArgs&, detail::Tracer, const SaveOptions&,
                                   const ModuleOptions&);
};

Module detail_make_module(const std::string& name, const detail::CallArgs& args, detail::Tracer trace,
                          const SaveOptions& save_options, const ModuleOptions& options);
void detail_save(const std::string& path, const std::string& name, const detail::CallArgs& args, detail::Tracer trace,
                 const SaveOptions& options);

// Traces fn with the example arguments into a module in memory: what save writes, without the
// file (how importers such as hjit::onnx::load build theirs). Throws what tracing throws, and
// ValueError for bad options.
template <class Fn, class... Args>
Module make_module(const std::string& name, const ModuleOptions& options, const SaveOptions& save_options, Fn&& fn,
                   const Args&... example_args) {
  auto use = [&](const std::string&, const detail::CallArgs& call, detail::Tracer tracer) {
    return detail_make_module(name, call, tracer, save_options, options);
  };
  return detail::traced_once(fn, use, example_args...);
}

// Traces fn with the example arguments' dtypes and shapes (static arguments are traced with their
// values) and writes the module. Throws what tracing throws, and ValueError when the file cannot
// be written.
template <class Fn, class... Args>
void save(const std::string& path, const SaveOptions& options, Fn&& fn, const Args&... example_args) {
  auto use = [&](const std::string& name, const detail::CallArgs& call, detail::Tracer tracer) {
    detail_save(path, name, call, tracer, options);
  };
  detail::traced_once(fn, use, example_args...);
}
template <class Fn, class... Args>
  requires(!std::is_same_v<std::decay_t<Fn>, SaveOptions>)
void save(const std::string& path, Fn&& fn, const Args&... example_args) {
  save(path, SaveOptions{}, std::forward<Fn>(fn), example_args...);
}

namespace detail {
// A module's result inside a traced function (a module called by a function that is jitted,
// exported or saved) flattens as the tensors it holds.
template <>
struct Result<ModuleResult> {
  static void flatten(const ModuleResult& r, std::vector<Tensor>& out, std::vector<int>* tree) {
    Result<std::vector<Tensor>>::flatten(r, out, tree);
  }
  static ModuleResult unflatten(std::vector<Tensor>& in, size_t& pos, const std::vector<int>& tree, size_t& t) {
    std::vector<Tensor> v = Result<std::vector<Tensor>>::unflatten(in, pos, tree, t);
    return ModuleResult(v.begin(), v.end());
  }
};
}  // namespace detail

}  // namespace hjit
