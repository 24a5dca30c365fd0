#include "frontend/tensor/dispatch.h"

#include "frontend/tensor/device.h"
#include "frontend/eager/kernel.h"
#include "frontend/tensor/eager_compiled.h"
#include "frontend/tracing/trace.h"
#include "graph/op_def.h"

namespace hjit::detail {

Tensor run_eager(OpKind op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  const Device device = device_for(inputs, op_name(op));
  if (device != Device::CPU) return run_on_device(op, inputs, attrs, device);
  std::vector<const TensorType*> types;
  types.reserve(inputs.size());
  for (const Tensor& t : inputs) types.push_back(&t.impl()->type);
  Tensor out = make_tensor(infer_type(op, types, attrs));
  // A collective exchanges even nothing: every rank must take part (send's result is always empty).
  if (out.impl()->type.numel() == 0 && !has_trait(op, Collective)) return out;
  if (run_compiled_eager(op, inputs, attrs, out)) return out;
  std::vector<eager::In> in;
  in.reserve(inputs.size());
  for (const Tensor& t : inputs) in.push_back(eager::In{t.impl()->data(), &t.impl()->type});
  eager::kernel_for(op)(eager::KernelArgs{op, attrs, std::move(in), eager::Out{out.impl()->data(), &out.impl()->type}});
  return out;
}

namespace {
Tensor run_source(OpKind op, const TensorType& type, const Attrs& attrs) {
  Tensor out = make_tensor(infer_type(op, {}, attrs, &type));
  if (type.numel() > 0) eager::kernel_for(op)(eager::KernelArgs{op, attrs, {}, eager::Out{out.impl()->data(), &out.impl()->type}});
  return out;
}
}  // namespace

Tensor apply_source(OpKind op, TensorType type, Attrs attrs) {
  TraceState* ts = current_trace();
  if (!ts) return run_source(op, type, attrs);
  Node n;
  n.op = op;
  n.type = type;
  n.attrs = attrs;
  int id = ts->graph.add(std::move(n));
  return make_tracer(*ts, id, ts->concrete ? run_source(op, type, attrs).impl()->storage : nullptr);
}

Tensor apply(OpKind op, const std::vector<Tensor>& inputs, Attrs attrs) {
  TraceState* ts = current_trace();
  bool record = false;
  for (const Tensor& t : inputs) {
    const TensorImpl& im = impl_of(t, op_name(op));
    check_not_donated(im, op_name(op));
    if (im.traced()) {
      if (!ts || !is_active_trace(im.trace_id))
        throw ValueError(std::string(op_name(op)) + ": a traced tensor " + im.type.str() +
                         " was used after its trace ended: a traced value escaped its function (into a global, or "
                         "a variable captured by reference). Return it from the traced function instead.");
      record = true;
    } else if (ts && im.born_in_trace != ts->id) {
      record = true;  // a captured tensor: it becomes an input of the graph
    }
  }
  // Inside a trace a collective is always recorded: it exchanges at every call, not once while tracing.
  if (ts && has_trait(op, Collective)) record = true;
  if (!record) return run_eager(op, inputs, attrs);
  std::vector<int> ids;
  ids.reserve(inputs.size());
  for (const Tensor& t : inputs) ids.push_back(value_in_trace(*ts, t));
  int id = ts->graph.add_op(op, std::move(ids), attrs);
  std::shared_ptr<Storage> concrete;
  if (ts->concrete) {
    std::vector<Tensor> values;
    for (const Tensor& t : inputs) values.push_back(alias_tensor(t.impl()->storage, t.impl()->type));
    concrete = run_eager(op, values, attrs).impl()->storage;
  }
  return make_tracer(*ts, id, std::move(concrete));
}

}  // namespace hjit::detail
