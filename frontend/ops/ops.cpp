// The op API: argument normalization and type promotion, then one primitive node each (or a few,
// for the compositions PyTorch also composes). The layers are in nn_ops.cpp.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <hjit/ops.h>

#include "frontend/ops/autocast_rules.h"
#include "frontend/ops/op_support.h"
#include "frontend/tensor/tensor_impl.h"
#include "graph/shape_inference.h"

namespace hjit {

using detail::apply;
using detail::autocast_f32;
using detail::autocast_low;
using detail::cast_to;
using detail::norm_axes;
using detail::norm_axis;
using detail::operand_of;
using detail::result_dtype;
using detail::same_value;
using detail::weak_scalar;

namespace {

Tensor binary(OpKind op, const Tensor& a, const Tensor& b) {
  DType t = result_dtype(op, {operand_of(a), operand_of(b)});
  return apply(op, {cast_to(a, t), cast_to(b, t)});
}

Tensor binary(OpKind op, const Tensor& a, Scalar s, bool scalar_first) {
  DType t = result_dtype(op, {operand_of(a), operand_of(s)});
  Tensor x = cast_to(a, t), c = weak_scalar(s, t);
  return scalar_first ? apply(op, {c, x}) : apply(op, {x, c});
}

Tensor float_unary(OpKind op, const Tensor& x) { return apply(op, {detail::floating(x)}); }

Tensor reduce(OpKind op, const Tensor& x, const std::vector<int>& axes, bool keepdims, const char* name) {
  return apply(op, {x}, Attrs{{"axes", norm_axes(axes, x.ndim(), name)}, {"keepdims", int64_t(keepdims)}});
}

void reject_bool(const Tensor& x, const char* op, const char* instead) {
  if (x.dtype() == DType::Bool)
    throw DTypeError(std::string(op) + " of bool tensors is not supported (as in PyTorch); use " + instead);
}

// PyTorch refuses a subtraction with a bool operand, whatever the other one is.
void reject_bool_sub(bool any_bool) {
  if (any_bool)
    throw DTypeError("sub: subtraction with a bool operand is not supported (as in PyTorch); use logical_xor (a != b) "
                     "for two bools, or convert the bool with astype first");
}

}  // namespace

// ---- arithmetic
Tensor add(const Tensor& a, const Tensor& b) { return binary(OpKind::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) {
  reject_bool_sub(a.dtype() == DType::Bool || b.dtype() == DType::Bool);
  return binary(OpKind::Sub, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) { return binary(OpKind::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(OpKind::Div, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(OpKind::Max, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(OpKind::Min, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(OpKind::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(OpKind::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(OpKind::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(OpKind::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(OpKind::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(OpKind::Ge, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return apply(OpKind::And, {cast_to(a, DType::Bool), cast_to(b, DType::Bool)});
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return apply(OpKind::Or, {cast_to(a, DType::Bool), cast_to(b, DType::Bool)});
}
Tensor logical_not(const Tensor& a) { return apply(OpKind::Not, {cast_to(a, DType::Bool)}); }

// pow: integers stay integers (3^20 in i64 is exact); a scalar exponent takes PyTorch's shortcuts
// (x * x for 2; sqrt for 0.5, rsqrt for -0.5 and 1 / x for -1 except in f16, as PyTorch's kernels
// do), so that pow(-0.0, 0.5) is -0.0 and pow(-inf, 0.5) NaN in f32 as there.
Tensor pow(const Tensor& a, const Tensor& b) { return binary(OpKind::Pow, a, b); }
Tensor pow(const Tensor& a, Scalar b) {
  const DType t = result_dtype(OpKind::Pow, {operand_of(a), operand_of(b)});
  if (t == DType::Bool) return binary(OpKind::Pow, a, b, false);  // the op table's DTypeError
  const double e = b.value;
  if (!is_floating(t) && e < 0)
    throw ValueError("pow: integers to negative integer powers are not allowed (as in PyTorch); got " +
                     std::string(dtype_name(t)) + shape_str(a.shape()) + " to the power " + std::to_string(int64_t(e)));
  Tensor x = cast_to(a, t);
  if (e == 0) return detail::make_full(x.shape(), 1.0, t);
  if (e == 1) return x;
  return detail::in_f32(x, [&](const Tensor& v) -> Tensor {
    if (e == 2) return v * v;
    if (e == 3) return v * v * v;
    if (is_floating(t) && t != DType::F16) {
      if (e == 0.5) return sqrt(v);
      if (e == -0.5) return rsqrt(v);
      if (e == -1) return 1.0 / v;
      if (e == -2) return 1.0 / (v * v);
    }
    return apply(OpKind::Pow, {v, weak_scalar(b, v.dtype())});
  });
}
Tensor pow(Scalar a, const Tensor& b) { return binary(OpKind::Pow, b, a, true); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  DType t = result_dtype(OpKind::Where, {operand_of(a), operand_of(b)});
  return apply(OpKind::Where, {cast_to(cond, DType::Bool), cast_to(a, t), cast_to(b, t)});
}
Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  DType t = result_dtype(OpKind::Where, {operand_of(a), operand_of(b)});
  return where(cond, cast_to(a, t), weak_scalar(b, t));
}
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  DType t = result_dtype(OpKind::Where, {operand_of(a), operand_of(b)});
  return where(cond, weak_scalar(a, t), cast_to(b, t));
}
Tensor where(const Tensor& cond, Scalar a, Scalar b) {
  DType t = result_dtype(OpKind::Where, {operand_of(a), operand_of(b)});
  return where(cond, weak_scalar(a, t), weak_scalar(b, t));
}

// PyTorch's clamp: max with lo, then min with hi (so hi wins when lo > hi), NaN stays NaN, and the
// gradient is 1 wherever x is inside [lo, hi], bounds included (wheres, not maximum/minimum).
Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  std::vector<Operand> ops{operand_of(x)};
  if (lo) ops.push_back(operand_of(*lo));
  if (hi) ops.push_back(operand_of(*hi));
  const DType t = result_dtype(OpKind::Where, ops);
  Tensor y = cast_to(x, t);
  if (lo) y = where(y < weak_scalar(*lo, t), weak_scalar(*lo, t), y);
  if (hi) y = where(y > weak_scalar(*hi, t), weak_scalar(*hi, t), y);
  return y;
}

Tensor add(const Tensor& a, Scalar b) { return binary(OpKind::Add, a, b, false); }
Tensor add(Scalar a, const Tensor& b) { return binary(OpKind::Add, b, a, true); }
Tensor sub(const Tensor& a, Scalar b) {
  reject_bool_sub(a.dtype() == DType::Bool || b.kind == DTypeKind::Bool);
  return binary(OpKind::Sub, a, b, false);
}
Tensor sub(Scalar a, const Tensor& b) {
  reject_bool_sub(b.dtype() == DType::Bool || a.kind == DTypeKind::Bool);
  return binary(OpKind::Sub, b, a, true);
}
Tensor mul(const Tensor& a, Scalar b) { return binary(OpKind::Mul, a, b, false); }
Tensor mul(Scalar a, const Tensor& b) { return binary(OpKind::Mul, b, a, true); }
Tensor div(const Tensor& a, Scalar b) { return binary(OpKind::Div, a, b, false); }
Tensor div(Scalar a, const Tensor& b) { return binary(OpKind::Div, b, a, true); }
Tensor maximum(const Tensor& a, Scalar b) { return binary(OpKind::Max, a, b, false); }
Tensor minimum(const Tensor& a, Scalar b) { return binary(OpKind::Min, a, b, false); }

Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, Scalar b) { return binary(OpKind::Lt, a, b, false); }
Tensor operator<=(const Tensor& a, Scalar b) { return binary(OpKind::Le, a, b, false); }
Tensor operator>(const Tensor& a, Scalar b) { return binary(OpKind::Gt, a, b, false); }
Tensor operator>=(const Tensor& a, Scalar b) { return binary(OpKind::Ge, a, b, false); }
Tensor operator==(const Tensor& a, Scalar b) { return binary(OpKind::Eq, a, b, false); }
Tensor operator!=(const Tensor& a, Scalar b) { return binary(OpKind::Ne, a, b, false); }

// ---- elementwise functions
Tensor neg(const Tensor& x) {
  reject_bool(x, "negation", "logical_not");
  return apply(OpKind::Neg, {x});
}
Tensor abs(const Tensor& x) { return apply(OpKind::Abs, {x}); }
Tensor sign(const Tensor& x) { return x.dtype() == DType::Bool ? same_value(x) : apply(OpKind::Sign, {x}); }
Tensor relu(const Tensor& x) { return apply(OpKind::Relu, {x}); }
// Rounding an integer is the identity, as in PyTorch.
Tensor floor(const Tensor& x) { return is_integral(x.dtype()) ? same_value(x) : apply(OpKind::Floor, {x}); }
Tensor ceil(const Tensor& x) { return is_integral(x.dtype()) ? same_value(x) : apply(OpKind::Ceil, {x}); }
Tensor round(const Tensor& x) { return is_integral(x.dtype()) ? same_value(x) : apply(OpKind::Round, {x}); }
Tensor exp(const Tensor& x) { return float_unary(OpKind::Exp, x); }
Tensor log(const Tensor& x) { return float_unary(OpKind::Log, x); }
Tensor log1p(const Tensor& x) { return float_unary(OpKind::Log1p, x); }
Tensor sqrt(const Tensor& x) { return float_unary(OpKind::Sqrt, x); }
Tensor rsqrt(const Tensor& x) { return float_unary(OpKind::Rsqrt, x); }
Tensor sin(const Tensor& x) { return float_unary(OpKind::Sin, x); }
Tensor cos(const Tensor& x) { return float_unary(OpKind::Cos, x); }
Tensor tanh(const Tensor& x) { return float_unary(OpKind::Tanh, x); }
Tensor sigmoid(const Tensor& x) { return float_unary(OpKind::Sigmoid, x); }
Tensor erf(const Tensor& x) { return float_unary(OpKind::Erf, x); }
Tensor hardswish(const Tensor& x) { return float_unary(OpKind::Hardswish, x); }
Tensor atan(const Tensor& x) { return float_unary(OpKind::Atan, x); }
Tensor asin(const Tensor& x) { return float_unary(OpKind::Asin, x); }
Tensor acos(const Tensor& x) { return float_unary(OpKind::Acos, x); }
Tensor astype(const Tensor& x, DType dtype) { return cast_to(x, dtype); }

// ---- reductions
Tensor sum(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce(OpKind::ReduceSum, autocast_f32(x), axes, keepdims, "sum");
}
Tensor max(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce(OpKind::ReduceMax, x, axes, keepdims, "max");
}
Tensor min(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce(OpKind::ReduceMin, x, axes, keepdims, "min");
}

Tensor mean(const Tensor& x_in, std::vector<int> axes, bool keepdims) {
  const Tensor x = autocast_f32(x_in);
  if (!is_floating(x.dtype()))
    throw DTypeError(std::string("mean: needs a floating point tensor, got ") + dtype_name(x.dtype()) + shape_str(x.shape()) +
                     "; convert it first, e.g. hjit::mean(x.astype(hjit::DType::F32))");
  std::vector<int64_t> ax = norm_axes(axes, x.ndim(), "mean");
  // 16-bit floats are summed and divided in f32 (their sum may not fit), then stored narrow. The
  // count is numel's, not a number: a mean over a dynamic axis stays dynamic.
  return detail::in_f32(x, [&](const Tensor& v) {
    return div(apply(OpKind::ReduceSum, {v}, Attrs{{"axes", ax}, {"keepdims", int64_t(keepdims)}}),
               apply(OpKind::Numel, {v}, Attrs{{"axes", ax}, {"dtype", v.dtype()}}));
  });
}

Tensor numel(const Tensor& x, std::vector<int> axes, DType dtype) {
  return apply(OpKind::Numel, {x}, Attrs{{"axes", norm_axes(axes, x.ndim(), "numel")}, {"dtype", dtype}});
}

Tensor argmax(const Tensor& x, int axis, bool keepdims) {
  return apply(OpKind::ArgMax, {x}, Attrs{{"axis", int64_t(norm_axis(axis, x.ndim(), "argmax"))}, {"keepdims", int64_t(keepdims)}});
}
Tensor argmin(const Tensor& x, int axis, bool keepdims) {
  return apply(OpKind::ArgMin, {x}, Attrs{{"axis", int64_t(norm_axis(axis, x.ndim(), "argmin"))}, {"keepdims", int64_t(keepdims)}});
}

Tensor cumsum(const Tensor& x, int axis) {
  if (x.ndim() == 0) return cumsum(x.reshape({1}), 0).reshape({});
  Tensor v = x.dtype() == DType::Bool ? astype(x, DType::I64) : autocast_f32(x);
  return apply(OpKind::CumSum, {v}, Attrs{{"axis", int64_t(norm_axis(axis, x.ndim(), "cumsum"))}});
}

// ---- linear algebra
Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = autocast_low(a_in), b = autocast_low(b_in);
  if (a.ndim() == 0 || b.ndim() == 0)
    throw ShapeError("matmul: both operands need at least one dimension, got " + shape_str(a.shape()) + " @ " +
                     shape_str(b.shape()));
  DType t = result_dtype(OpKind::Matmul, {operand_of(a), operand_of(b)});
  Tensor x = cast_to(a, t), y = cast_to(b, t);
  bool squeeze_rows = x.ndim() == 1, squeeze_cols = y.ndim() == 1;
  if (squeeze_rows) x = unsqueeze(x, 0);
  if (squeeze_cols) y = unsqueeze(y, 1);
  while (x.ndim() < y.ndim()) x = unsqueeze(x, 0);
  while (y.ndim() < x.ndim()) y = unsqueeze(y, 0);
  Tensor r = apply(OpKind::Matmul, {x, y});
  if (squeeze_cols) r = squeeze(r, {-1});
  if (squeeze_rows) r = squeeze(r, {-2 + int(squeeze_cols)});
  return r;
}

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  if (weight.ndim() != 2 || x.ndim() == 0 || x.shape().back() != weight.shape()[1])
    throw ShapeError("linear: takes x [..., in] and weight [out, in], given " + shape_str(x.shape()) + " and " + shape_str(weight.shape()));
  if (bias && bias->shape() != Shape{weight.shape()[0]})
    throw ShapeError("linear: bias must have shape [" + std::to_string(weight.shape()[0]) + "], given " + shape_str(bias->shape()));
  // Converted before the transpose (matmul's own conversion would come after it): a product of a
  // few rows then still reads the weight along its rows (schedules' lanes_along_k).
  const Tensor y = matmul(x, transpose(autocast_low(weight)));
  return bias ? y + autocast_low(*bias) : y;
}

// ---- shape
Tensor reshape(const Tensor& x, Shape shape) {
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw ValueError("reshape: only one dimension can be -1, got " + shape_str(shape));
      infer = int(i);
    } else if (shape[i] < 0) {
      throw ShapeError("reshape: negative dimension in " + shape_str(shape));
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      throw ShapeError("reshape: the shape " + shape_str(shape) + " has more elements than an int64 counts");
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      throw ShapeError("reshape: cannot reshape " + std::string(dtype_name(x.dtype())) + shape_str(x.shape()) + " (" +
                       std::to_string(x.numel()) + " elements) to " + shape_str(shape));
    shape[size_t(infer)] = x.numel() / known;
  }
  if (shape == x.shape()) return same_value(x);
  return apply(OpKind::Reshape, {x}, Attrs{{"shape", shape}});
}

Tensor transpose(const Tensor& x, std::vector<int> perm) {
  std::vector<int64_t> p;
  if (perm.empty())
    for (int d = x.ndim() - 1; d >= 0; --d) p.push_back(d);
  else
    for (int a : perm) p.push_back(a < 0 && x.ndim() > 0 ? a + x.ndim() : a);
  return apply(OpKind::Transpose, {x}, Attrs{{"perm", p}});
}

Tensor broadcast_to(const Tensor& x, Shape shape) {
  if (shape == x.shape()) return same_value(x);
  return apply(OpKind::BroadcastTo, {x}, Attrs{{"shape", std::move(shape)}});
}

Tensor unsqueeze(const Tensor& x, int axis) {
  int r = x.ndim();
  if (axis < -r - 1 || axis > r)
    throw ShapeError("unsqueeze: axis " + std::to_string(axis) + " is out of range for a tensor of rank " + std::to_string(r));
  if (axis < 0) axis += r + 1;
  Shape s = x.shape();
  s.insert(s.begin() + axis, 1);
  return reshape(x, s);
}

Tensor squeeze(const Tensor& x, std::vector<int> axes) {
  Shape s;
  std::vector<int64_t> ax = axes.empty() ? std::vector<int64_t>{} : norm_axes(axes, x.ndim(), "squeeze");
  for (int64_t a : ax)
    if (x.shape()[size_t(a)] != 1)
      throw ShapeError("squeeze: axis " + std::to_string(a) + " of " + shape_str(x.shape()) + " has size " +
                       std::to_string(x.shape()[size_t(a)]) + ", not 1");
  for (int d = 0; d < x.ndim(); ++d) {
    bool drop = ax.empty() ? x.shape()[size_t(d)] == 1 : std::binary_search(ax.begin(), ax.end(), int64_t(d));
    if (!drop) s.push_back(x.shape()[size_t(d)]);
  }
  return reshape(x, s);
}

namespace {

// The normalized [start:stop:step] of one axis of x (Python's rules), as the slice ops' attributes.
Attrs slice_attrs(const Tensor& x, int axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step,
                  const char* op) {
  if (x.ndim() == 0) throw ShapeError(std::string(op) + ": cannot slice a 0-d tensor");
  if (step <= 0) throw ValueError(std::string(op) + ": step must be positive, got " + std::to_string(step));
  int ax = norm_axis(axis, x.ndim(), op);
  const int64_t n = x.shape()[size_t(ax)];
  auto clip = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t(0), n); };
  int64_t b = start ? clip(*start) : 0, e = stop ? clip(*stop) : n;
  e = std::max(b, e);
  std::vector<int64_t> starts(size_t(x.ndim()), 0), stops(x.shape()), steps(size_t(x.ndim()), 1);
  starts[size_t(ax)] = b, stops[size_t(ax)] = e, steps[size_t(ax)] = step;
  return Attrs{{"starts", starts}, {"stops", stops}, {"steps", steps}};
}

}  // namespace

Tensor slice(const Tensor& x, int axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  return apply(OpKind::Slice, {x}, slice_attrs(x, axis, start, stop, step, "slice"));
}

Tensor flip(const Tensor& x, const std::vector<int>& axes) {
  if (axes.empty()) return x;
  return apply(OpKind::Flip, {x}, Attrs{{"axes", norm_axes(axes, x.ndim(), "flip")}});
}

Tensor slice_update(const Tensor& x, const Tensor& value, int axis, std::optional<int64_t> start, std::optional<int64_t> stop,
                    int64_t step) {
  Attrs attrs = slice_attrs(x, axis, start, stop, step, "slice_update");
  Shape region = x.shape();
  const auto &starts = attrs.ints("starts"), &stops = attrs.ints("stops"), &steps = attrs.ints("steps");
  for (size_t d = 0; d < region.size(); ++d) region[d] = (stops[d] - starts[d] + steps[d] - 1) / steps[d];
  Shape fits;
  if (!broadcast_shapes(value.shape(), region, &fits) || fits != region)
    throw ShapeError("slice_update: a value of shape " + shape_str(value.shape()) + " does not fit the slice " +
                     shape_str(region) + " of " + shape_str(x.shape()));
  return apply(OpKind::SliceUpdate, {x, broadcast_to(cast_to(value, x.dtype()), region)}, std::move(attrs));
}

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) throw ValueError("concat: needs at least one tensor");
  std::vector<Operand> ops;
  for (const Tensor& x : xs) ops.push_back(operand_of(x));
  const DType t = result_dtype(OpKind::Concat, ops);
  std::vector<Tensor> ys;
  for (const Tensor& x : xs) ys.push_back(cast_to(x, t));
  if (ys.size() == 1) return ys[0];
  int64_t ax = xs[0].ndim() == 0 ? axis : norm_axis(axis, xs[0].ndim(), "concat");
  return apply(OpKind::Concat, ys, Attrs{{"axis", ax}});
}

Tensor stack(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) throw ValueError("stack: needs at least one tensor");
  for (const Tensor& x : xs)
    if (x.shape() != xs[0].shape())
      throw ShapeError("stack: all tensors need one shape, got " + shape_str(xs[0].shape()) + " and " + shape_str(x.shape()));
  int r = xs[0].ndim();
  if (axis < -r - 1 || axis > r)
    throw ShapeError("stack: axis " + std::to_string(axis) + " is out of range for tensors of rank " + std::to_string(r));
  std::vector<Tensor> ys;
  for (const Tensor& x : xs) ys.push_back(unsqueeze(x, axis));
  return ys.size() == 1 ? ys[0] : concat(ys, axis < 0 ? axis + r + 1 : axis);
}

// Negative widths crop, as PyTorch's F.pad: a slice first, then the padding that remains.
Tensor pad(const Tensor& x, std::vector<std::pair<int64_t, int64_t>> widths, double value) {
  if (int(widths.size()) != x.ndim())
    throw ShapeError("pad: needs one (before, after) pair per axis of " + shape_str(x.shape()) + ", got " +
                     std::to_string(widths.size()));
  Tensor y = x;
  std::vector<int64_t> lo, hi;
  for (size_t d = 0; d < widths.size(); ++d) {
    auto [l, h] = widths[d];
    const int64_t n = x.shape()[d];
    if (l < 0 || h < 0) {
      if (-std::min<int64_t>(l, 0) - std::min<int64_t>(h, 0) > n)
        throw ShapeError("pad: the widths (" + std::to_string(l) + ", " + std::to_string(h) + ") crop more than the " +
                         std::to_string(n) + " elements of axis " + std::to_string(d) + " of " + shape_str(x.shape()));
      y = slice(y, int(d), std::max<int64_t>(-l, 0), n - std::max<int64_t>(-h, 0));
    }
    lo.push_back(std::max<int64_t>(l, 0)), hi.push_back(std::max<int64_t>(h, 0));
  }
  return apply(OpKind::Pad, {y}, Attrs{{"lo", lo}, {"hi", hi}, {"value", value}});
}

// Counts along `axis` of a tensor of `shape`: a node of the graph while tracing.
Tensor iota(Shape shape, int axis, DType dtype) {
  if (dtype == DType::Bool) throw DTypeError("iota: cannot count in bool");
  int ax = norm_axis(axis, int(shape.size()), "iota");
  if (shape.empty()) throw ShapeError("iota: needs at least one dimension");
  return detail::apply_source(OpKind::Iota, TensorType{dtype, std::move(shape)}, Attrs{{"axis", int64_t(ax)}});
}

Tensor detail::clamped_indices(const Tensor& indices, int64_t extent) {
  const Tensor i = indices.astype(DType::I64);
  return clamp(where(i < int64_t(0), i + extent, i), Scalar(int64_t(0)), Scalar(std::max<int64_t>(extent - 1, 0)));
}

Tensor take(const Tensor& x, const Tensor& indices, int axis, IndexMode mode) {
  if (x.ndim() == 0) throw ShapeError("take: cannot take from a 0-d tensor");
  const int ax = norm_axis(axis, x.ndim(), "take");
  const Tensor& idx = mode == IndexMode::Clamp && is_integral(indices.dtype()) ? detail::clamped_indices(indices, x.dim(ax)) : indices;
  return apply(OpKind::Take, {x, idx}, Attrs{{"axis", int64_t(ax)}});
}

Tensor check_index(const Tensor& indices, int64_t lo, int64_t hi, const std::string& what) {
  return apply(OpKind::CheckIndex, {indices}, Attrs{{"lo", lo}, {"hi", hi}, {"what", what}});
}

}  // namespace hjit
