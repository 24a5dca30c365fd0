#include "frontend/jit/run_version.h"

#include "frontend/device.h"
#include "frontend/jit/donation.h"

namespace hjit::detail {
namespace {

// A function compiled for a GPU: operands in the device's memory (CPU tensors copied up for the
// call), results and updates left there.
void run_on_device(Version& v, const CallArgs& args, std::vector<Tensor>& outputs, Device device) {
  std::vector<std::unique_ptr<backend::DeviceBuffer>> keep;
  std::vector<const backend::DeviceBuffer*> in;
  std::vector<backend::DeviceBuffer*> out;
  for (size_t i = 0; i < args.count; ++i) in.push_back(&device_memory(*args.tensor(i).impl(), device, keep));
  for (const auto& c : v.captured) in.push_back(&device_memory(*c, device, keep));
  for (const TensorType& t : v.out_types) {
    outputs.push_back(make_tensor(t, device));
    out.push_back(outputs.back().impl()->storage->on_device.get());
  }
  if (v.update_buffers.empty())
    for (size_t input : v.update_input)
      v.update_buffers.push_back(std::make_shared<Storage>(update_target(v, args, input).storage->nbytes, device));
  for (const auto& u : v.update_buffers) out.push_back(u->on_device.get());
  v.exe->run_on_device(in.data(), out.data());
}

}  // namespace

TensorImpl& update_target(const Version& v, const CallArgs& args, size_t input) {
  if (input >= args.count) return *v.captured[input - args.count];
  TensorImpl& t = *args.tensor(input).impl();
  if (t.borrowed && t.storage) {
    t.storage = copy_of(*t.storage);
    t.borrowed = false;
  }
  return t;
}

void check_captured_alive(const Version& v, const std::string& fn) {
  for (size_t j = 0; j < v.captured.size(); ++j)
    if (v.captured[j].use_count() == 1)
      throw ValueError("jit '" + fn + "': the tensor " + v.captured[j]->type.str() + " the function captured (input " +
                       std::to_string(v.num_args + j) + ") is no longer held by anything but the compiled function: it "
                       "was rebound (w = w - lr * g) or destroyed after the function was traced, and the compiled code "
                       "would keep reading its old value. Update captured tensors in place (w.assign(w - lr * g)).");
}

namespace {
// Jitted::into: the first result goes straight into the caller's tensor when it has the result's
// type and no captured tensor shares its storage (the call would read what it overwrites).
bool writes_into(const Version& v, const CallArgs& args) {
  if (!args.into || v.out_types.empty() || v.dynamic) return false;
  const TensorImpl& o = *args.into->impl();
  if (o.type != v.out_types[0] || !o.storage) return false;
  for (const auto& c : v.captured)
    if (c->storage == o.storage) return false;
  return true;
}
}  // namespace

int64_t run_version(Version& v, const CallArgs& args, std::vector<Tensor>& outputs, Device device, bool reuse_donated) {
  if (device != Device::CPU) {
    run_on_device(v, args, outputs, device);
    return 0;
  }
  constexpr size_t kInline = 32;
  const size_t n_in = args.count + v.captured.size(), n_out = v.out_types.size() + v.update_input.size();
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
  for (size_t j = 0; j < v.captured.size(); ++j) in[args.count + j] = host_memory(*v.captured[j], keep);
  outputs.reserve(v.out_types.size());
  // Dynamic sizes: this call's values of the symbols, and the outputs' shapes at them.
  std::vector<int64_t> symbols;
  if (v.dynamic)
    for (const SymbolicSizes::Source& src : v.dynamic->sources)
      symbols.push_back(args.tensor(size_t(src.input)).impl()->type.shape[size_t(src.dim)]);
  const std::vector<int> donated = reuse_donated && !v.dynamic ? donated_storage_for_outputs(v, args) : std::vector<int>{};
  int64_t reused = 0;
  const bool into = writes_into(v, args);
  for (size_t k = 0; k < v.out_types.size(); ++k) {
    if (k == 0 && into) {
      outputs.push_back(*args.into);
    } else if (!donated.empty() && donated[k] >= 0) {
      const std::shared_ptr<Storage>& storage = args.tensor(size_t(donated[k])).impl()->storage;
      outputs.push_back(alias_tensor(storage, v.out_types[k]));
      reused += int64_t(storage->nbytes);
    } else {
      outputs.push_back(make_tensor(v.dynamic ? TensorType{v.out_types[k].dtype, v.dynamic->shape_at(v.graph.outputs[k], symbols)}
                                              : v.out_types[k]));
    }
    out[k] = outputs.back().impl()->data();
  }
  // (Calls of a version with updates run one at a time; an updated argument's size may change with
  // the call under dynamic sizes.)
  if (!v.update_input.empty() && (v.update_buffers.empty() || v.dynamic)) {
    v.update_buffers.clear();
    for (size_t input : v.update_input)
      v.update_buffers.push_back(std::make_shared<Storage>(update_target(v, args, input).storage->nbytes));
  }
  for (size_t k = 0; k < v.update_buffers.size(); ++k) out[v.out_types.size() + k] = v.update_buffers[k]->data;
  if (v.dynamic) v.exe->run_sized(in, out, symbols);
  else v.exe->run(in, out);
  return reused;
}

int64_t apply_updates(const Version& v, const CallArgs& args) {
  int64_t copied = 0;
  for (size_t k = 0; k < v.update_buffers.size(); ++k) {
    Storage& target = *update_target(v, args, v.update_input[k]).storage;
    Storage& computed = *v.update_buffers[k];
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

}  // namespace hjit::detail
