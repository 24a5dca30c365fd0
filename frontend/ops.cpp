// The op API: argument normalization, type promotion and the composite ops, all on top of
// detail::apply (one primitive node each).
#include <algorithm>
#include <cmath>
#include <numeric>

#include <hjit/ops.h>

#include "frontend/dispatch.h"
#include "graph/op_def.h"

namespace hjit {

using detail::apply;

namespace {

int kind_rank(DTypeKind k) { return k == DTypeKind::Bool ? 0 : k == DTypeKind::Float ? 2 : 1; }

// The dtype of `t op scalar`: the scalar only widens the tensor's kind, to the default dtype of its own.
DType weak_result(DType t, Scalar s) {
  if (kind_rank(s.kind) <= kind_rank(dtype_info(t).kind)) return t;
  return s.kind == DTypeKind::Float ? DType::F32 : DType::I64;
}

DType scalar_dtype(Scalar s) {
  return s.kind == DTypeKind::Float ? DType::F32 : s.kind == DTypeKind::Bool ? DType::Bool : DType::I64;
}

Tensor cast_to(const Tensor& x, DType d) { return x.dtype() == d ? x : apply(OpKind::Cast, {x}, Attrs{{"dtype", d}}); }

DType promote(OpKind op, DType a, DType b) {
  try {
    DType t = promote_types(a, b);
    return has_trait(op, FloatOnly) && !is_floating(t) ? DType::F32 : t;
  } catch (const DTypeError& e) {
    throw DTypeError(std::string(op_name(op)) + ": " + e.what());
  }
}

Tensor binary(OpKind op, const Tensor& a, const Tensor& b) {
  DType t = promote(op, a.dtype(), b.dtype());
  return apply(op, {cast_to(a, t), cast_to(b, t)});
}

Tensor binary(OpKind op, const Tensor& a, Scalar s, bool scalar_first) {
  DType t = weak_result(a.dtype(), s);
  if (has_trait(op, FloatOnly) && !is_floating(t)) t = DType::F32;
  Tensor x = cast_to(a, t), c = Tensor::scalar(s.value, t);
  return scalar_first ? apply(op, {c, x}) : apply(op, {x, c});
}

Tensor float_unary(OpKind op, const Tensor& x) {
  return apply(op, {is_floating(x.dtype()) ? x : cast_to(x, DType::F32)});
}

int norm_axis(int axis, int rank, const char* op) {
  int r = std::max(rank, 1);
  if (axis < -r || axis >= r)
    throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for a tensor of rank " +
                     std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

// Sorted, distinct, non-negative axes; {} means all.
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

Tensor reduce(OpKind op, const Tensor& x, const std::vector<int>& axes, bool keepdims, const char* name) {
  return apply(op, {x}, Attrs{{"axes", norm_axes(axes, x.ndim(), name)}, {"keepdims", int64_t(keepdims)}});
}

}  // namespace

// ---- arithmetic
Tensor add(const Tensor& a, const Tensor& b) { return binary(OpKind::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(OpKind::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(OpKind::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(OpKind::Div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(OpKind::Pow, a, b); }
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

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  DType t = promote(OpKind::Where, a.dtype(), b.dtype());
  return apply(OpKind::Where, {cast_to(cond, DType::Bool), cast_to(a, t), cast_to(b, t)});
}
Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  DType t = weak_result(a.dtype(), b);
  return where(cond, cast_to(a, t), Tensor::scalar(b.value, t));
}
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  DType t = weak_result(b.dtype(), a);
  return where(cond, Tensor::scalar(a.value, t), cast_to(b, t));
}
Tensor where(const Tensor& cond, Scalar a, Scalar b) {
  DType t = promote_types(scalar_dtype(a), scalar_dtype(b));
  return where(cond, Tensor::scalar(a.value, t), Tensor::scalar(b.value, t));
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  Tensor y = x;
  if (lo) y = maximum(y, *lo);
  if (hi) y = minimum(y, *hi);
  return y;
}

Tensor add(const Tensor& a, Scalar b) { return binary(OpKind::Add, a, b, false); }
Tensor add(Scalar a, const Tensor& b) { return binary(OpKind::Add, b, a, true); }
Tensor sub(const Tensor& a, Scalar b) { return binary(OpKind::Sub, a, b, false); }
Tensor sub(Scalar a, const Tensor& b) { return binary(OpKind::Sub, b, a, true); }
Tensor mul(const Tensor& a, Scalar b) { return binary(OpKind::Mul, a, b, false); }
Tensor mul(Scalar a, const Tensor& b) { return binary(OpKind::Mul, b, a, true); }
Tensor div(const Tensor& a, Scalar b) { return binary(OpKind::Div, a, b, false); }
Tensor div(Scalar a, const Tensor& b) { return binary(OpKind::Div, b, a, true); }
Tensor pow(const Tensor& a, Scalar b) { return binary(OpKind::Pow, a, b, false); }
Tensor pow(Scalar a, const Tensor& b) { return binary(OpKind::Pow, b, a, true); }
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
Tensor neg(const Tensor& x) { return apply(OpKind::Neg, {x}); }
Tensor abs(const Tensor& x) { return apply(OpKind::Abs, {x}); }
Tensor sign(const Tensor& x) { return apply(OpKind::Sign, {x}); }
Tensor relu(const Tensor& x) { return apply(OpKind::Relu, {x}); }
// Rounding an integer is the identity, as in PyTorch.
Tensor floor(const Tensor& x) { return is_integral(x.dtype()) ? x : apply(OpKind::Floor, {x}); }
Tensor ceil(const Tensor& x) { return is_integral(x.dtype()) ? x : apply(OpKind::Ceil, {x}); }
Tensor round(const Tensor& x) { return is_integral(x.dtype()) ? x : apply(OpKind::Round, {x}); }
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
Tensor astype(const Tensor& x, DType dtype) { return cast_to(x, dtype); }

Tensor gelu(const Tensor& x, bool tanh_approximation) {
  Tensor v = is_floating(x.dtype()) ? x : cast_to(x, DType::F32);
  if (tanh_approximation) {
    const double k = std::sqrt(2.0 / M_PI);
    return 0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v)));
  }
  return 0.5 * v * (1.0 + erf(v * M_SQRT1_2));
}

// ---- reductions
Tensor sum(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce(OpKind::ReduceSum, x, axes, keepdims, "sum");
}
Tensor max(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce(OpKind::ReduceMax, x, axes, keepdims, "max");
}
Tensor min(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce(OpKind::ReduceMin, x, axes, keepdims, "min");
}

Tensor mean(const Tensor& x, std::vector<int> axes, bool keepdims) {
  if (!is_floating(x.dtype()))
    throw DTypeError(std::string("mean: needs a floating point tensor, got ") + dtype_name(x.dtype()) + shape_str(x.shape()) +
                     "; convert it first, e.g. hjit::mean(x.astype(hjit::DType::F32))");
  std::vector<int64_t> ax = norm_axes(axes, x.ndim(), "mean");
  int64_t count = 1;
  for (int64_t a : ax) count *= x.shape()[size_t(a)];
  // 16-bit floats are summed and divided in f32 (their sum may not fit), then stored narrow.
  bool narrow = x.dtype() == DType::F16 || x.dtype() == DType::BF16;
  Tensor v = narrow ? cast_to(x, DType::F32) : x;
  Tensor s = apply(OpKind::ReduceSum, {v}, Attrs{{"axes", ax}, {"keepdims", int64_t(keepdims)}});
  Tensor m = div(s, double(count));
  return narrow ? cast_to(m, x.dtype()) : m;
}

Tensor argmax(const Tensor& x, int axis, bool keepdims) {
  return apply(OpKind::ArgMax, {x}, Attrs{{"axis", int64_t(norm_axis(axis, x.ndim(), "argmax"))}, {"keepdims", int64_t(keepdims)}});
}
Tensor argmin(const Tensor& x, int axis, bool keepdims) {
  return apply(OpKind::ArgMin, {x}, Attrs{{"axis", int64_t(norm_axis(axis, x.ndim(), "argmin"))}, {"keepdims", int64_t(keepdims)}});
}

// ---- linear algebra
Tensor matmul(const Tensor& a, const Tensor& b) {
  if (a.ndim() == 0 || b.ndim() == 0)
    throw ShapeError("matmul: both operands need at least one dimension, got " + shape_str(a.shape()) + " @ " +
                     shape_str(b.shape()));
  DType t = promote(OpKind::Matmul, a.dtype(), b.dtype());
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
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      throw ShapeError("reshape: cannot reshape " + std::string(dtype_name(x.dtype())) + shape_str(x.shape()) + " (" +
                       std::to_string(x.numel()) + " elements) to " + shape_str(shape));
    shape[size_t(infer)] = x.numel() / known;
  }
  if (shape == x.shape()) return x;
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
  if (shape == x.shape()) return x;
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

Tensor slice(const Tensor& x, int axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  if (x.ndim() == 0) throw ShapeError("slice: cannot slice a 0-d tensor");
  if (step <= 0) throw ValueError("slice: step must be positive, got " + std::to_string(step));
  int ax = norm_axis(axis, x.ndim(), "slice");
  const int64_t n = x.shape()[size_t(ax)];
  auto clip = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t(0), n); };
  int64_t b = start ? clip(*start) : 0, e = stop ? clip(*stop) : n;
  e = std::max(b, e);
  std::vector<int64_t> starts(size_t(x.ndim()), 0), stops(x.shape()), steps(size_t(x.ndim()), 1);
  starts[size_t(ax)] = b, stops[size_t(ax)] = e, steps[size_t(ax)] = step;
  return apply(OpKind::Slice, {x}, Attrs{{"starts", starts}, {"stops", stops}, {"steps", steps}});
}

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) throw ValueError("concat: needs at least one tensor");
  DType t = xs[0].dtype();
  for (const Tensor& x : xs) t = promote(OpKind::Concat, t, x.dtype());
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

Tensor pad(const Tensor& x, std::vector<std::pair<int64_t, int64_t>> widths, double value) {
  if (int(widths.size()) != x.ndim())
    throw ShapeError("pad: needs one (before, after) pair per axis of " + shape_str(x.shape()) + ", got " +
                     std::to_string(widths.size()));
  std::vector<int64_t> lo, hi;
  for (auto [l, h] : widths) lo.push_back(l), hi.push_back(h);
  return apply(OpKind::Pad, {x}, Attrs{{"lo", lo}, {"hi", hi}, {"value", value}});
}

// ---- neural network functions
Tensor softmax(const Tensor& x, int axis) {
  Tensor v = is_floating(x.dtype()) ? x : cast_to(x, DType::F32);
  Tensor e = exp(v - max(v, {axis}, true));
  return e / sum(e, {axis}, true);
}

Tensor log_softmax(const Tensor& x, int axis) {
  Tensor v = is_floating(x.dtype()) ? x : cast_to(x, DType::F32);
  Tensor shifted = v - max(v, {axis}, true);
  return shifted - log(sum(exp(shifted), {axis}, true));
}

Tensor layer_norm(const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double eps) {
  if (x.ndim() == 0) throw ShapeError("layer_norm: needs at least one dimension");
  const int64_t n = x.shape().back();
  for (const auto* p : {&weight, &bias})
    if (*p && (*p)->shape() != Shape{n})
      throw ShapeError("layer_norm: weight and bias must have shape [" + std::to_string(n) + "] for input " +
                       shape_str(x.shape()) + ", got " + shape_str((*p)->shape()));
  Tensor v = is_floating(x.dtype()) ? x : cast_to(x, DType::F32);
  Tensor centered = v - mean(v, {-1}, true);
  Tensor y = centered * rsqrt(mean(centered * centered, {-1}, true) + eps);
  if (weight) y = y * *weight;
  if (bias) y = y + *bias;
  return y;
}

}  // namespace hjit

// ---- layers and the rest of issue 3's ops
namespace hjit {

namespace {

Tensor floating(const Tensor& x) { return is_floating(x.dtype()) ? x : astype(x, DType::F32); }

// A per-channel vector [C] shaped to broadcast against x's axis 1 ([1, C, 1, ...]).
Tensor per_channel(const Tensor& v, const Tensor& x, const char* what) {
  if (x.ndim() < 2) throw ShapeError(std::string("batch_norm: needs [N, C, ...], got ") + shape_str(x.shape()));
  if (v.shape() != Shape{x.shape()[1]})
    throw ShapeError(std::string("batch_norm: ") + what + " must have shape [" + std::to_string(x.shape()[1]) + "] for input " +
                     shape_str(x.shape()) + ", got " + shape_str(v.shape()));
  Shape s(size_t(x.ndim()), 1);
  s[1] = x.shape()[1];
  return v.reshape(s);
}

std::vector<int> all_but_channels(int rank) {
  std::vector<int> axes{0};
  for (int d = 2; d < rank; ++d) axes.push_back(d);
  return axes;
}

Tensor normalize(const Tensor& x, const Tensor& mean, const Tensor& var, const std::optional<Tensor>& weight,
                 const std::optional<Tensor>& bias, double eps) {
  Tensor y = (x - mean) * rsqrt(var + eps);
  if (weight) y = y * per_channel(*weight, x, "weight");
  if (bias) y = y + per_channel(*bias, x, "bias");
  return y;
}

Attrs window_attrs(Pair kernel, Pair stride, Pair padding) {
  if (stride[0] == 0 && stride[1] == 0) stride = kernel;
  return Attrs{{"kernel", std::vector<int64_t>(kernel.begin(), kernel.end())},
               {"stride", std::vector<int64_t>(stride.begin(), stride.end())},
               {"padding", std::vector<int64_t>(padding.begin(), padding.end())}};
}

}  // namespace

Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& weight, double eps) {
  if (x.ndim() == 0) throw ShapeError("rms_norm: needs at least one dimension");
  if (weight && weight->shape() != Shape{x.shape().back()})
    throw ShapeError("rms_norm: weight must have shape [" + std::to_string(x.shape().back()) + "] for input " +
                     shape_str(x.shape()) + ", got " + shape_str(weight->shape()));
  Tensor v = floating(x);
  Tensor y = v * rsqrt(mean(v * v, {-1}, true) + eps);
  return weight ? y * *weight : y;
}

Tensor silu(const Tensor& x) {
  Tensor v = floating(x);
  return v * sigmoid(v);
}

Tensor cumsum(const Tensor& x, int axis) {
  if (x.ndim() == 0) return cumsum(x.reshape({1}), 0).reshape({});
  Tensor v = x.dtype() == DType::Bool ? astype(x, DType::I64) : x;
  return apply(OpKind::CumSum, {v}, Attrs{{"axis", int64_t(norm_axis(axis, x.ndim(), "cumsum"))}});
}

Tensor take(const Tensor& x, const Tensor& indices, int axis) {
  if (x.ndim() == 0) throw ShapeError("take: cannot take from a 0-d tensor");
  return apply(OpKind::Take, {x, indices}, Attrs{{"axis", int64_t(norm_axis(axis, x.ndim(), "take"))}});
}

Tensor embedding(const Tensor& table, const Tensor& ids) {
  if (table.ndim() != 2) throw ShapeError("embedding: the table must be [num_embeddings, dim], got " + shape_str(table.shape()));
  return take(table, ids, 0);
}

Tensor iota(Shape shape, int axis, DType dtype) {
  if (dtype == DType::Bool) throw DTypeError("iota: cannot count in bool");
  int ax = norm_axis(axis, int(shape.size()), "iota");
  if (shape.empty()) throw ShapeError("iota: needs at least one dimension");
  return detail::apply_source(OpKind::Iota, TensorType{dtype, std::move(shape)}, Attrs{{"axis", int64_t(ax)}});
}

namespace {
Tensor triangle(const Tensor& x, int64_t k, bool lower, const char* name) {
  if (x.ndim() < 2) throw ShapeError(std::string(name) + ": needs at least two dimensions, got " + shape_str(x.shape()));
  const int64_t rows = x.dim(-2), cols = x.dim(-1);
  Tensor diff = iota({rows, cols}, 1, DType::I64) - iota({rows, cols}, 0, DType::I64);  // column - row
  Tensor keep = lower ? diff <= k : diff >= k;
  return where(keep, x, Tensor::zeros({}, x.dtype()));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t k) { return triangle(x, k, true, "tril"); }
Tensor triu(const Tensor& x, int64_t k) { return triangle(x, k, false, "triu"); }

Tensor conv2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, Pair stride, Pair padding,
              Pair dilation, int64_t groups) {
  DType t = promote(OpKind::Conv2d, x.dtype(), weight.dtype());
  Attrs attrs{{"stride", std::vector<int64_t>(stride.begin(), stride.end())},
              {"padding", std::vector<int64_t>(padding.begin(), padding.end())},
              {"dilation", std::vector<int64_t>(dilation.begin(), dilation.end())},
              {"groups", groups}};
  Tensor y = apply(OpKind::Conv2d, {cast_to(x, t), cast_to(weight, t)}, std::move(attrs));
  if (!bias) return y;
  if (bias->shape() != Shape{y.shape()[1]})
    throw ShapeError("conv2d: bias must have shape [" + std::to_string(y.shape()[1]) + "], got " + shape_str(bias->shape()));
  return y + bias->reshape({1, y.shape()[1], 1, 1});
}

Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding) {
  return apply(OpKind::MaxPool2d, {x}, window_attrs(kernel, stride, padding));
}

Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding, bool count_include_pad) {
  Attrs attrs = window_attrs(kernel, stride, padding);
  attrs.set("count_include_pad", int64_t(count_include_pad));
  return apply(OpKind::AvgPool2d, {floating(x)}, std::move(attrs));
}

Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size) {
  if (output_size != Pair{1, 1})
    throw ValueError("adaptive_avg_pool2d: only the global average (output size (1, 1)) is supported, got (" +
                     std::to_string(output_size[0]) + ", " + std::to_string(output_size[1]) + ")");
  if (x.ndim() < 3) throw ShapeError("adaptive_avg_pool2d: takes [N, C, H, W] or [C, H, W], got " + shape_str(x.shape()));
  return mean(floating(x), {-2, -1}, true);
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  Tensor v = floating(x);
  return normalize(v, per_channel(running_mean, v, "running_mean"), per_channel(running_var, v, "running_var"), weight, bias, eps);
}

Tensor batch_norm_training(const Tensor& x, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                           const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double momentum, double eps) {
  Tensor v = floating(x);
  if (momentum < 0 || momentum > 1) throw ValueError("batch_norm_training: momentum must be in [0, 1], got " + std::to_string(momentum));
  BatchNormResult r = batch_norm_stats(v, weight, bias, eps);
  if (running_mean || running_var) {
    const int64_t n = v.numel() / std::max<int64_t>(1, v.shape()[1]);
    if (n < 2) throw ValueError("batch_norm_training: needs more than one value per channel, got " + shape_str(v.shape()));
    if (running_mean) {
      per_channel(*running_mean, v, "running_mean");
      Tensor rm = *running_mean;
      rm.assign((1 - momentum) * rm + momentum * r.mean);
    }
    if (running_var) {
      per_channel(*running_var, v, "running_var");
      Tensor rv = *running_var;
      rv.assign((1 - momentum) * rv + momentum * (r.var * (double(n) / double(n - 1))));
    }
  }
  return r.y;
}

BatchNormResult batch_norm_stats(const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                                 double eps) {
  Tensor v = floating(x);
  if (v.ndim() < 2) throw ShapeError("batch_norm: needs [N, C, ...], got " + shape_str(v.shape()));
  std::vector<int> axes = all_but_channels(v.ndim());
  Tensor m = mean(v, axes, true);
  Tensor centered = v - m;
  Tensor var = mean(centered * centered, axes, true);
  Tensor y = centered * rsqrt(var + eps);
  if (weight) y = y * per_channel(*weight, v, "weight");
  if (bias) y = y + per_channel(*bias, v, "bias");
  const int64_t c = v.shape()[1];
  return BatchNormResult{y, m.reshape({c}), var.reshape({c})};
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  if (logits.ndim() != 2 || labels.ndim() != 1 || labels.shape()[0] != logits.shape()[0])
    throw ShapeError("cross_entropy: takes logits [N, C] and labels [N], got " + shape_str(logits.shape()) + " and " +
                     shape_str(labels.shape()));
  if (labels.dtype() != DType::I32 && labels.dtype() != DType::I64)
    throw DTypeError(std::string("cross_entropy: labels must be i32 or i64, got ") + dtype_name(labels.dtype()));
  const int64_t n = logits.shape()[0], c = logits.shape()[1];
  if (!labels.is_traced()) {
    for (int64_t l : labels.to_vector<int64_t>())
      if (l < 0 || l >= c)
        throw IndexError("cross_entropy: label " + std::to_string(l) + " is out of range for " + std::to_string(c) + " classes");
  }
  // The label's log-probability, picked by comparing each class index with the row's label.
  Tensor picked = where(iota({n, c}, 1, labels.dtype()) == unsqueeze(labels, 1), log_softmax(logits, -1), 0.0);
  return -mean(sum(picked, {1}));
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    std::optional<double> scale) {
  DType t = promote(OpKind::Attention, promote(OpKind::Attention, q.dtype(), k.dtype()), v.dtype());
  if (q.ndim() < 2) throw ShapeError("scaled_dot_product_attention: q must be [..., S, D], got " + shape_str(q.shape()));
  const double s = scale ? *scale : 1.0 / std::sqrt(double(q.shape().back()));
  return apply(OpKind::Attention, {cast_to(q, t), cast_to(k, t), cast_to(v, t)},
               Attrs{{"causal", int64_t(causal)}, {"scale", s}});
}

}  // namespace hjit
