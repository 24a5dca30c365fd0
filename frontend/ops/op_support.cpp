#include "frontend/ops/op_support.h"

#include <algorithm>

#include "frontend/tensor/tensor_impl.h"
#include "frontend/tracing/trace.h"

namespace hjit::detail {

Operand operand_of(const Tensor& t) {
  return Operand{t.dtype(), t.ndim() == 0 ? OperandCategory::ZeroDim : OperandCategory::Dimensioned};
}

Operand operand_of(Scalar s) {
  const DType t = s.kind == DTypeKind::Float ? DType::F32 : s.kind == DTypeKind::Bool ? DType::Bool : DType::I64;
  return Operand{t, OperandCategory::Weak};
}

DType result_dtype(OpKind op, const std::vector<Operand>& operands) {
  try {
    DType t = result_type(operands);
    return has_trait(op, FloatOnly) && !is_floating(t) ? DType::F32 : t;
  } catch (const DTypeError& e) {
    throw DTypeError(std::string(op_name(op)) + ": " + e.what());
  }
}

Tensor weak_scalar(Scalar s, DType t) { return make_full({}, s.value, t); }

Tensor same_value(const Tensor& x) {
  const TensorImpl& im = impl_of(x, "same_value");
  TraceState* ts = current_trace();
  // While tracing, a tracer or a captured tensor: a fresh tracer of its value in this trace.
  if (ts && (im.traced() || im.born_in_trace != ts->id))
    return make_tracer(*ts, value_in_trace(*ts, x), ts->concrete ? im.storage : nullptr);
  auto copy = std::make_shared<TensorImpl>(im);
  copy->borrowed = true;
  return Tensor(std::move(copy));
}

Tensor cast_to(const Tensor& x, DType d) { return x.dtype() == d ? same_value(x) : apply(OpKind::Cast, {x}, Attrs{{"dtype", d}}); }

Tensor floating(const Tensor& x) { return is_floating(x.dtype()) ? x : cast_to(x, DType::F32); }

int norm_axis(int axis, int rank, const char* op) {
  int r = std::max(rank, 1);
  if (axis < -r || axis >= r)
    throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for a tensor of rank " +
                     std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

std::vector<int64_t> norm_axes(const std::vector<int>& axes, int rank, const char* op) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int a : axes) {
    if (rank == 0) throw ShapeError(std::string(op) + ": a 0-d tensor has no axis " + std::to_string(a));
    out.push_back(norm_axis(a, rank, op));
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw ValueError(std::string(op) + ": an axis is repeated in " + shape_str(Shape(axes.begin(), axes.end())));
  return out;
}

}  // namespace hjit::detail
