#include "frontend/compiled/function.h"

#include "frontend/tensor/device.h"
#include "graph/passes/in_place.h"
#include "halide_backend/devices.h"
#include "support/log.h"

namespace hjit::detail {
namespace {

backend::Options backend_options(const Graph& g, const FunctionRequest& r) {
  backend::Options o;
  o.name = r.name;
  o.device = r.device;
  o.cuda_capability = r.cuda_capability;
  o.schedule = r.schedule;
  o.dynamic = r.dynamic;
  // (Graph outputs only: an update's value trades storage with its tensor anyway.)
  if (!r.donate.empty() && backend::device_kind(r.device).computes_in_place())
    for (const auto& [input, slot] : in_place_outputs(g, r.donate))
      if (size_t(slot) < g.outputs.size()) o.in_place.emplace_back(input, slot);
  return o;
}

}  // namespace

std::shared_ptr<CompiledFunction> CompiledFunction::compile(Graph graph, FunctionRequest request) {
  const backend::Compiled c = backend::compile(graph, backend_options(graph, request));
  auto f = std::make_shared<CompiledFunction>(std::move(graph), std::move(request), c.executable);
  f->cache_hit_ = c.cache_hit;
  f->loaded_ = c.loaded;
  f->compile_ms_ = c.ms;
  return f;
}

std::vector<std::string> CompiledFunction::write_library(Graph graph, FunctionRequest request,
                                                         const backend::ExportRequest& library) {
  backend::check_exportable(graph, library);
  const backend::Options options = backend_options(graph, request);
  if (!backend::is_host_target(library.target, options)) return backend::export_library(graph, options, nullptr, library);
  const std::shared_ptr<CompiledFunction> f = compile(std::move(graph), std::move(request));
  return backend::export_library(f->graph(), options, f->code(), library);
}

CompiledFunction::CompiledFunction(Graph graph, FunctionRequest request, std::shared_ptr<const backend::Executable> code)
    : graph_(std::move(graph)), request_(std::move(request)), code_(std::move(code)),
      on_host_(backend::device_kind(request_.device).host()), input_sizes_(graph_, request_.dynamic.get()) {
  for (int o : graph_.outputs) out_types_.push_back(graph_.type(o));
  for (const Update& u : graph_.updates) update_input_.push_back(size_t(graph_.node(u.target).attrs.i("index")));
}

std::unique_lock<std::mutex> CompiledFunction::lock_for_call() {
  if (update_input_.empty()) return {};
  return std::unique_lock(call_mu_);
}

std::vector<int64_t> CompiledFunction::symbols_of(std::span<TensorImpl* const> inputs) const {
  std::vector<int64_t> symbols;
  if (request_.dynamic)
    for (const SymbolicSizes::Source& src : request_.dynamic->sources)
      symbols.push_back(inputs[size_t(src.input)]->type.shape[size_t(src.dim)]);
  return symbols;
}

std::vector<int> CompiledFunction::donated_storage_for_outputs(std::span<TensorImpl* const> inputs) const {
  std::vector<int> from(out_types_.size(), -1);
  for (const auto& [input, slot] : code_->in_place()) {
    if (size_t(input) >= inputs.size() || size_t(slot) >= from.size()) continue;
    const TensorImpl* t = inputs[size_t(input)];
    bool alone = !t->traced() && t->storage && t->storage.use_count() == 1 && !t->storage->on_device && !t->borrowed &&
                 t->type == out_types_[size_t(slot)];
    for (size_t j = 0; j < inputs.size() && alone; ++j) alone = j == size_t(input) || inputs[j] != t;
    if (alone) from[size_t(slot)] = input;
  }
  return from;
}

int64_t CompiledFunction::run(std::span<TensorImpl* const> inputs, std::vector<Tensor>& outputs, const RunOptions& options) {
  if (inputs.size() != graph_.inputs.size())
    throw InternalError("hjit: '" + graph_.name + "' bound to " + std::to_string(inputs.size()) + " tensors for " +
                        std::to_string(graph_.inputs.size()) + " inputs");
  const std::vector<int64_t> symbols = symbols_of(inputs);
  check_sizes(inputs, symbols);
  if (!on_host_) {
    run_on_device(inputs, outputs);
    return 0;
  }
  return run_on_host(inputs, outputs, symbols, options);
}

void CompiledFunction::check_sizes(std::span<TensorImpl* const> inputs, const std::vector<int64_t>& symbols) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!input_sizes_.agrees(i, inputs[i]->type, symbols)) {
      std::vector<TensorType> types;
      for (const TensorImpl* t : inputs) types.push_back(t->type);
      input_sizes_.raise(graph_, request_.dynamic.get(), types, symbols, "hjit: '" + graph_.name + "'");
    }
}

namespace {

// Where the first output may go straight into the caller's tensor: it has the output's type, and
// no input shares its storage (the call would read what it overwrites).
bool writes_into(const Tensor* into, const TensorType& type, std::span<TensorImpl* const> inputs) {
  if (!into) return false;
  const TensorImpl& o = *into->impl();
  if (o.type != type || !o.storage || o.storage->on_device) return false;
  for (const TensorImpl* in : inputs)
    if (in->storage == o.storage) return false;
  return true;
}

// An input whose storage is borrowed from another tensor (same_value) gets its own before its
// value is replaced, as assign() does.
TensorImpl& writable(TensorImpl& t) {
  if (t.borrowed && t.storage) {
    t.storage = copy_of(*t.storage);
    t.borrowed = false;
  }
  return t;
}

}  // namespace

int64_t CompiledFunction::run_on_host(std::span<TensorImpl* const> inputs, std::vector<Tensor>& outputs,
                                      const std::vector<int64_t>& symbols, const RunOptions& options) {
  constexpr size_t kInline = 32;
  const size_t n_in = inputs.size(), n_out = out_types_.size() + update_input_.size();
  const void* in_inline[kInline];
  void* out_inline[kInline];
  std::vector<const void*> in_heap;
  std::vector<void*> out_heap;
  const void** in = in_inline;
  void** out = out_inline;
  if (n_in > kInline) in_heap.resize(n_in), in = in_heap.data();
  if (n_out > kInline) out_heap.resize(n_out), out = out_heap.data();
  std::vector<Tensor> keep;  // GPU tensors' values, copied down for the call
  for (size_t i = 0; i < n_in; ++i) in[i] = host_memory(*inputs[i], keep);
  const bool dynamic = request_.dynamic != nullptr;
  const std::vector<int> donated = options.reuse_donated && !dynamic ? donated_storage_for_outputs(inputs) : std::vector<int>{};
  int64_t reused = 0;
  const bool into = !dynamic && !out_types_.empty() && writes_into(options.into, out_types_[0], inputs);
  const size_t first = outputs.size();
  outputs.reserve(first + out_types_.size());
  for (size_t k = 0; k < out_types_.size(); ++k) {
    if (k == 0 && into) {
      outputs.push_back(*options.into);
    } else if (!donated.empty() && donated[k] >= 0) {
      const std::shared_ptr<Storage>& storage = inputs[size_t(donated[k])]->storage;
      outputs.push_back(alias_tensor(storage, out_types_[k]));
      reused += int64_t(storage->nbytes);
    } else {
      outputs.push_back(make_tensor(dynamic ? TensorType{out_types_[k].dtype, request_.dynamic->shape_at(graph_.outputs[k], symbols)}
                                            : out_types_[k]));
    }
    out[k] = outputs.back().impl()->data();
  }
  // (An updated input's size may change with the call under dynamic sizes.)
  if (!update_input_.empty() && (update_buffers_.empty() || dynamic)) {
    update_buffers_.clear();
    for (size_t input : update_input_) update_buffers_.push_back(std::make_shared<Storage>(writable(*inputs[input]).storage->nbytes));
  }
  for (size_t k = 0; k < update_buffers_.size(); ++k) out[out_types_.size() + k] = update_buffers_[k]->data;
  if (dynamic) code_->run_sized(in, out, symbols);
  else code_->run(in, out);
  return reused;
}

void CompiledFunction::run_on_device(std::span<TensorImpl* const> inputs, std::vector<Tensor>& outputs) {
  const Device device = request_.device;
  std::vector<std::unique_ptr<backend::DeviceBuffer>> keep;
  std::vector<const backend::DeviceBuffer*> in;
  std::vector<backend::DeviceBuffer*> out;
  for (const TensorImpl* t : inputs) in.push_back(&device_memory(*t, device, keep));
  for (const TensorType& t : out_types_) {
    outputs.push_back(make_tensor(t, device));
    out.push_back(outputs.back().impl()->storage->on_device.get());
  }
  if (update_buffers_.empty())
    for (size_t input : update_input_)
      update_buffers_.push_back(std::make_shared<Storage>(writable(*inputs[input]).storage->nbytes, device));
  for (const auto& u : update_buffers_) out.push_back(u->on_device.get());
  code_->run_on_device(in.data(), out.data());
}

int64_t CompiledFunction::apply_updates(std::span<TensorImpl* const> inputs) {
  int64_t copied = 0;
  for (size_t k = 0; k < update_buffers_.size(); ++k) {
    Storage& target = *writable(*inputs[update_input_[k]]).storage;
    Storage& computed = *update_buffers_[k];
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

Tensor CompiledFunction::updated_value(size_t k, const TensorType& type) const { return alias_tensor(update_buffers_.at(k), type); }

}  // namespace hjit::detail
