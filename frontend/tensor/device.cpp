#include "frontend/tensor/device.h"

#include <cstring>

#include <hjit/device.h>

#include "frontend/compiled/function.h"
#include "frontend/ops/op_support.h"
#include "frontend/tracing/trace.h"
#include "graph/op_def.h"
#include "halide_backend/devices.h"
#include "support/log.h"

namespace hjit {

namespace detail {

Device device_for(const std::vector<Tensor>& operands, const char* what) {
  Device d = Device::CPU;
  for (const Tensor& t : operands) {
    const Device here = t.impl()->device();
    if (here == Device::CPU || here == d) continue;
    if (d != Device::CPU)
      throw DeviceError(std::string(what) + ": operands on " + device_name(d) + " and on " + device_name(here) +
                        "; move them to one device with .to(Device) first");
    d = here;
  }
  return d;
}

const backend::DeviceBuffer& device_memory(const TensorImpl& t, Device device,
                                           std::vector<std::unique_ptr<backend::DeviceBuffer>>& keep) {
  const Device here = t.device();
  if (here == device) return *t.storage->on_device;
  if (here != Device::CPU)
    throw DeviceError(std::string("hjit: a tensor ") + t.type.str() + " on " + device_name(here) + " used by code for " +
                      device_name(device) + "; move it with .to(Device) first");
  log().debug("device: a CPU tensor {} copied to {} for one call", t.type.str(), device_name(device));
  keep.push_back(backend::device_kind(device).allocate(t.storage->nbytes));
  keep.back()->upload(t.storage->data);
  return *keep.back();
}

const void* host_memory(const TensorImpl& t, std::vector<Tensor>& keep) {
  if (t.device() == Device::CPU) return t.data();
  keep.push_back(Tensor(std::make_shared<TensorImpl>(t)).to(Device::CPU));
  return keep.back().impl()->data();
}

std::shared_ptr<Storage> copy_of(const Storage& s) {
  auto copy = std::make_shared<Storage>(s.nbytes, s.device());
  copy_storage(*copy, s);
  return copy;
}

void copy_storage(Storage& dst, const Storage& src) {
  if (&dst == &src || src.nbytes == 0) return;
  if (dst.nbytes != src.nbytes)
    throw InternalError("hjit: copying " + std::to_string(src.nbytes) + " bytes into storage of " + std::to_string(dst.nbytes));
  const Device to = dst.device(), from = src.device();
  if (to == Device::CPU && from == Device::CPU) std::memmove(dst.data, src.data, src.nbytes);
  else if (to == Device::CPU) src.on_device->download(dst.data);
  else if (from == Device::CPU) dst.on_device->upload(src.data);
  else if (to == from) dst.on_device->copy_from(*src.on_device);
  else {
    Storage host(src.nbytes);  // between two GPUs: through the host
    copy_storage(host, src);
    copy_storage(dst, host);
  }
}

Graph single_op_graph(OpKind op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  Graph g;
  g.name = std::string("eager_") + op_name(op);
  std::vector<int> ids;
  for (const Tensor& t : inputs) ids.push_back(g.add_parameter(t.impl()->type));
  g.outputs.push_back(g.add_op(op, std::move(ids), attrs));
  return g;
}

FunctionRequest single_op_request(const Graph& g, Device device) {
  FunctionRequest r;
  r.name = g.name;
  r.device = device;
  r.schedule = backend::schedule_request(g.name, {.opt_level = 1, .tuning_db_from_environment = false, .device = device});
  return r;
}

Tensor run_on_device(OpKind op, const std::vector<Tensor>& inputs, const Attrs& attrs, Device device) {
  Graph g = single_op_graph(op, inputs, attrs);
  const TensorType type = g.type(g.outputs[0]);
  if (type.numel() == 0) return make_tensor(type, device);
  FunctionRequest request = single_op_request(g, device);
  const std::shared_ptr<CompiledFunction> f = CompiledFunction::compile(std::move(g), std::move(request));
  CallInputs in;
  for (const Tensor& t : inputs) in.push(t.impl().get());
  std::vector<Tensor> out;
  f->run(in.view(), out);
  return out.at(0);
}

}  // namespace detail

Device Tensor::device() const { return detail::impl_of(*this, "device").device(); }

Tensor Tensor::to(Device device) const {
  const detail::TensorImpl& im = detail::impl_of(*this, "to");
  // Inside a traced function values have no place: where they live is the compiled function's
  // device (JitOptions::device).
  if (im.traced() || detail::current_trace()) return detail::same_value(*this);
  if (im.device() == device) return *this;
  Tensor t = detail::make_tensor(im.type, device);
  detail::copy_storage(*t.impl()->storage, *im.storage);
  t.impl()->uniform = im.uniform;
  return t;
}

bool device_available(Device device, std::string* why) { return backend::device_kind(device).usable(why); }

DeviceStats device_stats() {
  const backend::TransferCounts c = backend::transfer_counts();
  DeviceStats s;
  s.uploads = c.uploads, s.downloads = c.downloads, s.upload_bytes = c.upload_bytes, s.download_bytes = c.download_bytes;
  s.allocations = c.allocations;
  return s;
}

}  // namespace hjit
