#include "graph/shape_inference.h"

#include <algorithm>

#include "graph/threefry.h"

namespace hjit {
namespace {

std::string name_of(const InferArgs& a) { return op_name(a.op); }

std::string types_str(const InferArgs& a) {
  std::string s;
  for (size_t i = 0; i < a.in.size(); ++i) s += (i ? " and " : "") + a.in[i]->str();
  return s;
}

void require_same_dtype(const InferArgs& a) {
  for (const TensorType* t : a.in)
    if (t->dtype != a.in[0]->dtype)
      throw DTypeError(name_of(a) + ": operands must have one dtype, got " + types_str(a) +
                       " (the op API promotes; a graph must convert explicitly)");
}

Shape broadcast_all(const InferArgs& a, size_t first) {
  Shape out = a.in[first]->shape;
  for (size_t i = first + 1; i < a.in.size(); ++i)
    if (!broadcast_shapes(out, a.in[i]->shape, &out))
      throw ShapeError(name_of(a) + ": shapes " + types_str(a) + " cannot be broadcast together");
  return out;
}

void check_shape(const std::string& op, const Shape& s) {
  for (int64_t d : s)
    if (d < 0) throw ShapeError(op + ": negative dimension in shape " + shape_str(s));
}

int64_t checked_axis(const InferArgs& a, int64_t axis, int rank) {
  if (axis < 0 || axis >= std::max(rank, 1) || (rank == 0 && axis != 0))
    throw ShapeError(name_of(a) + ": axis " + std::to_string(axis) + " is out of range for " +
                     a.in[0]->str());
  return axis;
}

}  // namespace

bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    r[i] = da == 1 ? db : da;
  }
  *out = std::move(r);
  return true;
}

TensorType infer_source(const InferArgs& a) {
  check_shape(name_of(a), a.declared->shape);
  return *a.declared;
}

TensorType infer_iota(const InferArgs& a) {
  TensorType t = infer_source(a);
  int64_t axis = a.attrs.i("axis");
  if (axis < 0 || axis >= t.rank())
    throw ShapeError("iota: axis " + std::to_string(axis) + " is out of range for " + t.str());
  if (t.dtype == DType::Bool) throw DTypeError("iota: cannot count in bool");
  return t;
}

TensorType infer_unary(const InferArgs& a) { return *a.in[0]; }

TensorType infer_cast(const InferArgs& a) { return TensorType{a.attrs.dtype("dtype"), a.in[0]->shape}; }

TensorType infer_binary(const InferArgs& a) {
  require_same_dtype(a);
  return TensorType{a.in[0]->dtype, broadcast_all(a, 0)};
}

TensorType infer_compare(const InferArgs& a) {
  require_same_dtype(a);
  return TensorType{DType::Bool, broadcast_all(a, 0)};
}

TensorType infer_where(const InferArgs& a) {
  if (a.in[0]->dtype != DType::Bool)
    throw DTypeError("where: the condition must be bool, got " + a.in[0]->str());
  if (a.in[1]->dtype != a.in[2]->dtype)
    throw DTypeError("where: both branches must have one dtype, got " + a.in[1]->str() + " and " +
                     a.in[2]->str());
  return TensorType{a.in[1]->dtype, broadcast_all(a, 0)};
}

TensorType infer_reduce(const InferArgs& a) {
  const TensorType& x = *a.in[0];
  const std::vector<int64_t>& axes = a.attrs.ints("axes");
  bool keepdims = a.attrs.i("keepdims") != 0;
  std::vector<bool> reduced(size_t(x.rank()), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= x.rank() || (i > 0 && axes[i] <= axes[i - 1]))
      throw ShapeError(name_of(a) + ": axes must be distinct, sorted and in range for " + x.str() +
                       ", got " + shape_str(axes));
    reduced[size_t(axes[i])] = true;
    if (x.shape[size_t(axes[i])] == 0 && a.op != OpKind::ReduceSum)
      throw ShapeError(name_of(a) + ": cannot reduce " + x.str() + " over axis " +
                       std::to_string(axes[i]) + " of size 0 (there is no identity for it)");
  }
  TensorType out{x.dtype, {}};
  if (a.op == OpKind::ReduceSum && (x.dtype == DType::Bool || is_integral(x.dtype)))
    out.dtype = DType::I64;  // PyTorch sums integers in i64
  for (int d = 0; d < x.rank(); ++d) {
    if (!reduced[size_t(d)]) out.shape.push_back(x.shape[size_t(d)]);
    else if (keepdims) out.shape.push_back(1);
  }
  return out;
}

TensorType infer_numel(const InferArgs& a) {
  const TensorType& x = *a.in[0];
  const std::vector<int64_t>& axes = a.attrs.ints("axes");
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= x.rank() || (i > 0 && axes[i] <= axes[i - 1]))
      throw ShapeError(name_of(a) + ": axes must be distinct, sorted and in range for " + x.str() + ", got " + shape_str(axes));
  const DType t = a.attrs.dtype("dtype");
  if (t == DType::Bool) throw DTypeError(name_of(a) + ": cannot count in bool");
  return TensorType{t, {}};
}

TensorType infer_arg_reduce(const InferArgs& a) {
  const TensorType& x = *a.in[0];
  int64_t axis = checked_axis(a, a.attrs.i("axis"), x.rank());
  if (x.rank() > 0 && x.shape[size_t(axis)] == 0)
    throw ShapeError(name_of(a) + ": cannot take " + name_of(a) + " of " + x.str() + " over axis " +
                     std::to_string(axis) + " of size 0");
  if (x.dtype == DType::Bool) throw DTypeError(name_of(a) + ": expects numeric operands, got " + x.str());
  TensorType out{DType::I64, {}};
  for (int d = 0; d < x.rank(); ++d)
    if (d != axis) out.shape.push_back(x.shape[size_t(d)]);
    else if (a.attrs.i("keepdims")) out.shape.push_back(1);
  return out;
}

TensorType infer_matmul(const InferArgs& a) {
  const TensorType &x = *a.in[0], &y = *a.in[1];
  require_same_dtype(a);
  if (x.dtype == DType::Bool) throw DTypeError("matmul: expects numeric operands, got " + types_str(a));
  if (x.rank() < 2 || x.rank() != y.rank())
    throw ShapeError("matmul: the graph op takes operands of one rank >= 2, got " + types_str(a));
  int r = x.rank();
  if (x.shape[size_t(r - 1)] != y.shape[size_t(r - 2)])
    throw ShapeError("matmul: contraction sizes differ: " + x.str() + " @ " + y.str() + " (" +
                     std::to_string(x.shape[size_t(r - 1)]) + " vs " +
                     std::to_string(y.shape[size_t(r - 2)]) + ")");
  Shape bx(x.shape.begin(), x.shape.end() - 2), by(y.shape.begin(), y.shape.end() - 2), out;
  if (!broadcast_shapes(bx, by, &out))
    throw ShapeError("matmul: batch dimensions of " + types_str(a) + " cannot be broadcast together");
  out.push_back(x.shape[size_t(r - 2)]);
  out.push_back(y.shape[size_t(r - 1)]);
  return TensorType{x.dtype, out};
}

TensorType infer_int_matmul(const InferArgs& a) {
  const TensorType &x = *a.in[0], &y = *a.in[1];
  if (x.dtype != DType::U8 || y.dtype != DType::I8)
    throw DTypeError("int_matmul: the graph op takes u8 @ i8 (hjit::int_matmul converts other 8-bit pairs), got " + types_str(a));
  if (x.rank() < 2 || y.rank() != x.rank() + 1)
    throw ShapeError("int_matmul: takes [.., M, 4K] @ [.., K, N, 4], got " + types_str(a));
  const size_t r = size_t(x.rank());
  if (y.shape[r] != 4 || x.shape[r - 1] != 4 * y.shape[r - 2])
    throw ShapeError("int_matmul: contraction sizes differ: " + x.str() + " @ " + y.str() + " (the right operand packed [.., K, N, 4] for a left one of [.., M, 4K])");
  Shape bx(x.shape.begin(), x.shape.end() - 2), by(y.shape.begin(), y.shape.end() - 3), out;
  if (!broadcast_shapes(bx, by, &out))
    throw ShapeError("int_matmul: batch dimensions of " + types_str(a) + " cannot be broadcast together");
  out.push_back(x.shape[r - 2]);
  out.push_back(y.shape[r - 1]);
  return TensorType{DType::I32, out};
}

TensorType infer_reshape(const InferArgs& a) {
  const Shape& s = a.attrs.ints("shape");
  check_shape("reshape", s);
  if (shape_numel(s) != a.in[0]->numel())
    throw ShapeError("reshape: cannot reshape " + a.in[0]->str() + " (" +
                     std::to_string(a.in[0]->numel()) + " elements) to " + shape_str(s) + " (" +
                     std::to_string(shape_numel(s)) + " elements)");
  return TensorType{a.in[0]->dtype, s};
}

TensorType infer_transpose(const InferArgs& a) {
  const TensorType& x = *a.in[0];
  const std::vector<int64_t>& perm = a.attrs.ints("perm");
  std::vector<bool> seen(size_t(x.rank()), false);
  bool ok = int(perm.size()) == x.rank();
  for (int64_t p : perm) {
    if (!ok || p < 0 || p >= x.rank() || seen[size_t(p)]) { ok = false; break; }
    seen[size_t(p)] = true;
  }
  if (!ok)
    throw ShapeError("transpose: " + shape_str(perm) + " is not a permutation of the axes of " + x.str());
  TensorType out{x.dtype, {}};
  for (int64_t p : perm) out.shape.push_back(x.shape[size_t(p)]);
  return out;
}

TensorType infer_broadcast_to(const InferArgs& a) {
  const TensorType& x = *a.in[0];
  const Shape& s = a.attrs.ints("shape");
  check_shape("broadcast_to", s);
  Shape out;
  if (s.size() < x.shape.size() || !broadcast_shapes(x.shape, s, &out) || out != s)
    throw ShapeError("broadcast_to: cannot broadcast " + x.str() + " to " + shape_str(s));
  return TensorType{x.dtype, s};
}

TensorType infer_slice(const InferArgs& a) {
  const TensorType& x = *a.in[0];
  if (a.op == OpKind::SliceUpdate) require_same_dtype(a);
  const auto &starts = a.attrs.ints("starts"), &stops = a.attrs.ints("stops"), &steps = a.attrs.ints("steps");
  if (int(starts.size()) != x.rank() || stops.size() != starts.size() || steps.size() != starts.size())
    throw ShapeError("slice: starts, stops and steps need one entry per axis of " + x.str());
  TensorType out{x.dtype, {}};
  for (size_t d = 0; d < starts.size(); ++d) {
    int64_t n = x.shape[d];
    if (steps[d] < 1 || starts[d] < 0 || starts[d] > n || stops[d] < starts[d] || stops[d] > n)
      throw ShapeError("slice: bad normalized range [" + std::to_string(starts[d]) + ":" +
                       std::to_string(stops[d]) + ":" + std::to_string(steps[d]) + "] for axis " +
                       std::to_string(d) + " of " + x.str());
    out.shape.push_back((stops[d] - starts[d] + steps[d] - 1) / steps[d]);
  }
  return out;
}

// slice_update(x, v): v must have the slice's shape; the result is x's.
TensorType infer_slice_update(const InferArgs& a) {
  TensorType slice = infer_slice(a);
  if (a.in[1]->shape != slice.shape)
    throw ShapeError("slice_update: the value " + a.in[1]->str() + " does not fill the slice " + slice.str() + " of " +
                     a.in[0]->str());
  return *a.in[0];
}

TensorType infer_check_index(const InferArgs& a) {
  if (!is_integral(a.in[0]->dtype))
    throw DTypeError("check_index: indices must be integers, got " + a.in[0]->str());
  if (a.attrs.i("lo") > a.attrs.i("hi"))
    throw ValueError("check_index: the range [" + std::to_string(a.attrs.i("lo")) + ", " + std::to_string(a.attrs.i("hi")) +
                     ") is empty");
  a.attrs.s("what");
  return *a.in[0];
}

TensorType infer_random_bits(const InferArgs& a) {
  if (a.in[0]->dtype != DType::U32 || a.in[0]->shape != Shape{2})
    throw DTypeError("random_bits: a key is u32[2] (hjit::random::key(seed), or a row of hjit::random::split(key)), got " +
                     a.in[0]->str());
  const Shape& s = a.attrs.ints("shape");
  check_shape("random_bits", s);
  if (shape_numel(s) > threefry::kMaxElements)
    throw ValueError("random_bits: " + std::to_string(shape_numel(s)) + " draws from one key is more than 2^32; split "
                     "the key and draw in parts");
  return TensorType{DType::U32, s};
}

TensorType infer_concat(const InferArgs& a) {
  require_same_dtype(a);
  const TensorType& x = *a.in[0];
  int64_t axis = checked_axis(a, a.attrs.i("axis"), x.rank());
  if (x.rank() == 0) throw ShapeError("concatenate: cannot concatenate 0-d tensors; stack them");
  TensorType out = x;
  out.shape[size_t(axis)] = 0;
  for (const TensorType* t : a.in) {
    bool ok = t->rank() == x.rank();
    for (int d = 0; ok && d < x.rank(); ++d)
      ok = d == axis || t->shape[size_t(d)] == x.shape[size_t(d)];
    if (!ok)
      throw ShapeError("concatenate: shapes " + types_str(a) + " differ outside axis " + std::to_string(axis));
    out.shape[size_t(axis)] += t->shape[size_t(axis)];
  }
  return out;
}

TensorType infer_pad(const InferArgs& a) {
  const TensorType& x = *a.in[0];
  const auto &lo = a.attrs.ints("lo"), &hi = a.attrs.ints("hi");
  if (int(lo.size()) != x.rank() || hi.size() != lo.size())
    throw ShapeError("pad: lo and hi need one entry per axis of " + x.str());
  TensorType out = x;
  for (size_t d = 0; d < lo.size(); ++d) {
    if (lo[d] < 0 || hi[d] < 0) throw ValueError("pad: paddings must be >= 0, got " + shape_str(lo) + " " + shape_str(hi));
    out.shape[d] += lo[d] + hi[d];
  }
  return out;
}

}  // namespace hjit

namespace hjit {
namespace {

// Two positive (or, for padding, non-negative) integers per spatial dimension.
std::vector<int64_t> pair_attr(const InferArgs& a, const char* name, int64_t min) {
  const std::vector<int64_t>& v = a.attrs.ints(name);
  if (v.size() != 2 || v[0] < min || v[1] < min)
    throw ValueError(std::string(op_name(a.op)) + ": " + name + " must be two integers >= " + std::to_string(min) +
                     ", got " + shape_str(v));
  return v;
}

}  // namespace

std::vector<std::array<int, 4>> reshape_groups(const Shape& in, const Shape& out) {
  std::vector<std::array<int, 4>> groups;
  int i = int(in.size()) - 1, j = int(out.size()) - 1;
  while (i >= 0 || j >= 0) {
    if (j >= 0 && out[size_t(j)] == 1) { groups.push_back({-1, -1, j, j}), --j; continue; }
    if (i >= 0 && in[size_t(i)] == 1) { groups.push_back({i, i, -1, -1}), --i; continue; }
    int i0 = i, j0 = j;
    int64_t pi = in[size_t(i0)], po = out[size_t(j0)];
    while (pi != po) {
      if (pi < po) pi *= in[size_t(--i0)];
      else po *= out[size_t(--j0)];
    }
    groups.push_back({i0, i, j0, j});
    i = i0 - 1, j = j0 - 1;
  }
  return groups;
}

bool shared_matrix(const Shape& s) {
  return s.size() >= 2 && std::all_of(s.begin(), s.end() - 2, [](int64_t d) { return d == 1; });
}

int64_t window_output_size(int64_t n, int64_t k, int64_t stride, int64_t pad, int64_t dilation) {
  int64_t span = n + 2 * pad - dilation * (k - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

TensorType infer_conv2d(const InferArgs& a) {
  const TensorType &x = *a.in[0], &w = *a.in[1];
  if (x.dtype != w.dtype) throw DTypeError("conv2d: input and weight dtypes differ: " + x.str() + " and " + w.str());
  if (x.rank() != 4 || w.rank() != 4)
    throw ShapeError("conv2d: takes an NCHW input and an OIHW weight, got " + x.str() + " and " + w.str());
  auto stride = pair_attr(a, "stride", 1), pad = pair_attr(a, "padding", 0), dil = pair_attr(a, "dilation", 1);
  const int64_t groups = a.attrs.i("groups"), cin = x.shape[1], cout = w.shape[0];
  // Channels last (an image library's or TensorFlow's layout) is a mistake worth naming as such.
  if (groups >= 1 && cin != w.shape[1] * groups && x.shape[3] == w.shape[1] * groups)
    throw ShapeError("conv2d: the input " + x.str() + " looks channels-last (NHWC): its last dimension matches the weight " + w.str() +
                     "'s input channels; conv2d takes NCHW, so pass transpose(x, {0, 3, 1, 2})");
  if (groups < 1 || cin % groups != 0 || cout % groups != 0)
    throw ValueError("conv2d: groups=" + std::to_string(groups) + " must divide the input channels (" + std::to_string(cin) +
                     ") and the output channels (" + std::to_string(cout) + ")");
  if (w.shape[1] != cin / groups)
    throw ShapeError("conv2d: weight " + w.str() + " needs " + std::to_string(cin / groups) + " input channels per group for input " +
                     x.str() + " with groups=" + std::to_string(groups));
  TensorType out{x.dtype, {x.shape[0], cout, 0, 0}};
  for (int d = 0; d < 2; ++d) {
    out.shape[size_t(2 + d)] = window_output_size(x.shape[size_t(2 + d)], w.shape[size_t(2 + d)], stride[size_t(d)], pad[size_t(d)], dil[size_t(d)]);
    if (out.shape[size_t(2 + d)] < 1 && x.shape[size_t(2 + d)] > 0)
      throw ShapeError("conv2d: the kernel " + w.str() + " (dilation " + shape_str(dil) + ") is larger than the padded input " + x.str());
  }
  return out;
}

TensorType infer_int_conv2d(const InferArgs& a) {
  if (a.in.size() != 2 && a.in.size() != 3)
    throw ValueError("int_conv2d: takes an input, a weight and perhaps per-channel offsets, got " + std::to_string(a.in.size()) + " operands");
  const TensorType &x = *a.in[0], &w = *a.in[1];
  if (x.dtype != DType::U8 || w.dtype != DType::I8)
    throw DTypeError("int_conv2d: the graph op takes u8 and i8 (hjit::int_conv2d converts other 8-bit pairs), got " + types_str(a));
  if (x.rank() != 5 || w.rank() != 6 || x.shape[4] != 4 || w.shape[5] != 4 || x.shape[1] != w.shape[1])
    throw ShapeError("int_conv2d: takes [N, C, H, W, 4] and [O/B, C, KH, KW, B, 4] (channels in fours, outputs in blocks), got " +
                     types_str(a));
  auto stride = pair_attr(a, "stride", 1), dil = pair_attr(a, "dilation", 1);
  TensorType out{DType::I32, {x.shape[0], w.shape[0] * w.shape[4], 0, 0}};
  for (int d = 0; d < 2; ++d) {
    out.shape[size_t(2 + d)] = window_output_size(x.shape[size_t(2 + d)], w.shape[size_t(2 + d)], stride[size_t(d)], 0, dil[size_t(d)]);
    if (out.shape[size_t(2 + d)] < 1 && x.shape[size_t(2 + d)] > 0)
      throw ShapeError("int_conv2d: the kernel " + w.str() + " (dilation " + shape_str(dil) + ") is larger than the input " + x.str());
  }
  if (a.in.size() == 3 && (a.in[2]->dtype != DType::I32 || a.in[2]->shape != Shape{out.shape[1]}))
    throw ShapeError("int_conv2d: the offsets are i32 [" + std::to_string(out.shape[1]) + "], one per output channel, got " + a.in[2]->str());
  return out;
}

TensorType infer_int_depthwise2d(const InferArgs& a) {
  if (a.in.size() != 2 && a.in.size() != 3)
    throw ValueError("int_depthwise2d: takes an input, a weight and perhaps per-channel offsets, got " + std::to_string(a.in.size()) +
                     " operands");
  const TensorType &x = *a.in[0], &w = *a.in[1];
  if (x.dtype != DType::U8 || w.dtype != DType::I8)
    throw DTypeError("int_depthwise2d: the graph op takes u8 and i8 (hjit::int_conv2d converts other 8-bit pairs), got " + types_str(a));
  if (x.rank() != 4 || w.rank() != 6 || w.shape[1] != 1 || w.shape[5] != 4 || w.shape[0] * w.shape[4] != x.shape[1])
    throw ShapeError("int_depthwise2d: takes [N, C, H, W] and [C/B, 1, R, KW, B, 4] (a kernel's rows in fours, channels in blocks), got " +
                     types_str(a));
  auto stride = pair_attr(a, "stride", 1), dil = pair_attr(a, "dilation", 1), kernel = pair_attr(a, "kernel", 1);
  if (kernel[0] < 1 || kernel[1] != w.shape[3] || (kernel[0] + 3) / 4 != w.shape[2])
    throw ShapeError("int_depthwise2d: the kernel " + shape_str(kernel) + " does not match the weight " + w.str() + " (KW columns, KH rows in fours)");
  TensorType out{DType::I32, {x.shape[0], x.shape[1], 0, 0}};
  for (int d = 0; d < 2; ++d) {
    out.shape[size_t(2 + d)] = window_output_size(x.shape[size_t(2 + d)], kernel[size_t(d)], stride[size_t(d)], 0, dil[size_t(d)]);
    if (out.shape[size_t(2 + d)] < 1 && x.shape[size_t(2 + d)] > 0)
      throw ShapeError("int_depthwise2d: the kernel " + shape_str(kernel) + " (dilation " + shape_str(dil) + ") is larger than the input " + x.str());
  }
  if (a.in.size() == 3 && (a.in[2]->dtype != DType::I32 || a.in[2]->shape != Shape{out.shape[1]}))
    throw ShapeError("int_depthwise2d: the offsets are i32 [" + std::to_string(out.shape[1]) + "], one per channel, got " + a.in[2]->str());
  return out;
}

TensorType infer_pool2d(const InferArgs& a) {
  const TensorType& x = *a.in[0];
  const std::string name = op_name(a.op);
  if (x.rank() < 3) throw ShapeError(name + ": takes [N, C, H, W] or [C, H, W], got " + x.str());
  auto kernel = pair_attr(a, "kernel", 1), stride = pair_attr(a, "stride", 1), pad = pair_attr(a, "padding", 0);
  TensorType out = x;
  for (int d = 0; d < 2; ++d) {
    if (pad[size_t(d)] * 2 > kernel[size_t(d)])
      throw ValueError(name + ": padding " + shape_str(pad) + " must be at most half the kernel " + shape_str(kernel));
    int64_t& o = out.shape[size_t(x.rank() - 2 + d)];
    o = window_output_size(o, kernel[size_t(d)], stride[size_t(d)], pad[size_t(d)], 1);
    if (o < 1 && x.numel() > 0)
      throw ShapeError(name + ": the kernel " + shape_str(kernel) + " is larger than the padded input " + x.str());
  }
  return out;
}

TensorType infer_cumsum(const InferArgs& a) {
  const TensorType& x = *a.in[0];
  const int64_t axis = a.attrs.i("axis");
  if (axis < 0 || axis >= x.rank())
    throw ShapeError("cumsum: axis " + std::to_string(axis) + " is out of range for " + x.str());
  return TensorType{is_integral(x.dtype) ? DType::I64 : x.dtype, x.shape};  // PyTorch sums integers in i64
}

TensorType infer_argsort(const InferArgs& a) {
  const TensorType& x = *a.in[0];
  if (x.rank() == 0) throw ShapeError("argsort: takes a tensor of rank 1 or more, got " + x.str());
  checked_axis(a, a.attrs.i("axis"), x.rank());
  return TensorType{DType::I64, x.shape};
}

TensorType infer_take(const InferArgs& a) {
  const TensorType &x = *a.in[0], &idx = *a.in[1];
  const int64_t axis = a.attrs.i("axis");
  if (idx.dtype != DType::I32 && idx.dtype != DType::I64)
    throw DTypeError("take: indices must be i32 or i64, got " + idx.str());
  if (axis < 0 || axis >= x.rank()) throw ShapeError("take: axis " + std::to_string(axis) + " is out of range for " + x.str());
  if (x.shape[size_t(axis)] == 0 && idx.numel() > 0)
    throw IndexError("take: cannot take from axis " + std::to_string(axis) + " of " + x.str() + ", which has size 0");
  TensorType out{x.dtype, {}};
  out.shape.insert(out.shape.end(), x.shape.begin(), x.shape.begin() + axis);
  out.shape.insert(out.shape.end(), idx.shape.begin(), idx.shape.end());
  out.shape.insert(out.shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  return out;
}

TensorType infer_attention(const InferArgs& a) {
  const TensorType &q = *a.in[0], &k = *a.in[1], &v = *a.in[2];
  if (q.dtype != k.dtype || q.dtype != v.dtype)
    throw DTypeError("attention: q, k and v need one dtype, got " + q.str() + ", " + k.str() + ", " + v.str());
  const int r = q.rank();
  bool ok = r >= 2 && k.rank() == r && v.rank() == r;
  for (int d = 0; ok && d < r - 2; ++d) ok = q.shape[size_t(d)] == k.shape[size_t(d)] && q.shape[size_t(d)] == v.shape[size_t(d)];
  if (!ok || q.shape[size_t(r - 1)] != k.shape[size_t(r - 1)] || k.shape[size_t(r - 2)] != v.shape[size_t(r - 2)])
    throw ShapeError("attention: q [..., S, D], k [..., T, D] and v [..., T, Dv] must agree, got " + q.str() + ", " + k.str() +
                     ", " + v.str());
  if (k.shape[size_t(r - 2)] == 0 && q.numel() > 0)
    throw ShapeError("attention: there are no keys to attend to in " + k.str());
  TensorType out = q;
  out.shape[size_t(r - 1)] = v.shape[size_t(r - 1)];
  return out;
}

}  // namespace hjit

namespace hjit {

TensorType infer_flip(const InferArgs& a) {
  const TensorType& x = *a.in[0];
  const auto& axes = a.attrs.ints("axes");
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= x.rank() || (i > 0 && axes[i] <= axes[i - 1]))
      throw ShapeError("flip: axes must be distinct, sorted and in range for " + x.str() + ", got " + shape_str(axes));
  return x;
}

// conv2d_weight_grad(x, g): the gradient of conv2d(x, w) with respect to w, given the gradient g
// of its output; attrs as the convolution's plus the kernel size (KH, KW).
TensorType infer_conv2d_weight_grad(const InferArgs& a) {
  const TensorType &x = *a.in[0], &g = *a.in[1];
  const auto& k = a.attrs.ints("kernel");
  const int64_t groups = a.attrs.i("groups");
  if (x.rank() != 4 || g.rank() != 4 || k.size() != 2 || groups < 1 || x.shape[1] % groups != 0 || g.shape[1] % groups != 0)
    throw ShapeError("conv2d_weight_grad: bad operands " + x.str() + " and " + g.str());
  Node probe;  // the forward convolution must produce g's shape
  std::vector<const TensorType*> fwd_in{&x};
  TensorType w{x.dtype, {g.shape[1], x.shape[1] / groups, k[0], k[1]}};
  fwd_in.push_back(&w);
  Attrs fwd{{"stride", a.attrs.get("stride")}, {"padding", a.attrs.get("padding")}, {"dilation", a.attrs.get("dilation")},
            {"groups", groups}};
  TensorType out = infer_conv2d(InferArgs{OpKind::Conv2d, fwd_in, fwd, nullptr});
  if (out.shape != g.shape || x.dtype != g.dtype)
    throw ShapeError("conv2d_weight_grad: the gradient " + g.str() + " does not match the convolution output " + out.str());
  return w;
}

TensorType infer_max_pool2d_grad(const InferArgs& a) {
  const TensorType &x = *a.in[0], &g = *a.in[1];
  std::vector<const TensorType*> fwd_in{&x};
  TensorType out = infer_pool2d(InferArgs{OpKind::MaxPool2d, fwd_in, a.attrs, nullptr});
  if (out.shape != g.shape || x.dtype != g.dtype)
    throw ShapeError("max_pool2d_grad: the gradient " + g.str() + " does not match the pooled output " + out.str());
  return x;
}

}  // namespace hjit
