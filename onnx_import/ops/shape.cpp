// ONNX ops that move, select or make data: shapes, slices, gathers, padding, constants.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "onnx_import/ops/ops.h"
#include "onnx_import/tensor_proto.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

int64_t rank_of(const Tensor& t) { return int64_t(t.shape().size()); }

Tensor i64s(const std::vector<int64_t>& v) { return Tensor::from_vector<int64_t>(v, Shape{int64_t(v.size())}); }

// The elements of `axis` at these positions (constant indices): how reversed slices, reflect and
// edge padding are written.
Tensor pick(const Tensor& x, int axis, const std::vector<int64_t>& at) { return take(x, i64s(at), axis); }

V Constant(const NodeContext& n) {
  if (n.has_attr("value")) return {n.attr_tensor("value")};
  if (n.has_attr("value_float")) return {Tensor::scalar(n.attr_float("value_float", 0), DType::F32)};
  if (n.has_attr("value_int")) return {Tensor::scalar(double(n.attr_int("value_int", 0)), DType::I64)};
  if (n.has_attr("value_floats")) {
    std::vector<float> v;
    for (double d : n.attr_floats("value_floats")) v.push_back(float(d));
    return {Tensor::from_vector<float>(v, Shape{int64_t(v.size())})};
  }
  if (n.has_attr("value_ints")) return {i64s(n.attr_ints("value_ints"))};
  n.fail("has no value hjit reads (sparse and string constants are not numbers hjit computes with)");
}

V ConstantOfShape(const NodeContext& n) {
  std::vector<int64_t> shape = n.input_ints(0);
  Tensor value = n.has_attr("value") ? n.attr_tensor("value") : Tensor::scalar(0, DType::F32);
  if (value.numel() != 1) n.fail("its value must hold one element");
  return {broadcast_to(reshape(value, {}), Shape(shape.begin(), shape.end()))};
}

V ShapeOp(const NodeContext& n) {
  const Shape& s = n.input(0).shape();
  const int64_t r = int64_t(s.size());
  int64_t start = n.attr_int("start", 0), end = n.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r), end = std::clamp<int64_t>(end, 0, r);
  return {i64s(std::vector<int64_t>(s.begin() + start, s.begin() + std::max(start, end)))};
}

V Size(const NodeContext& n) { return {Tensor::scalar(double(n.input(0).numel()), DType::I64)}; }

// ONNX's Reshape: 0 copies the input's dimension (unless allowzero), one -1 is inferred.
V Reshape(const NodeContext& n) {
  const Tensor& x = n.input(0);
  std::vector<int64_t> shape = n.opset() < 5 ? n.attr_ints("shape") : n.input_ints(1);
  if (n.attr_int("allowzero", 0) == 0)
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] == 0) {
        if (i >= x.shape().size()) n.fail("shape entry " + std::to_string(i) + " is 0 but the input has rank " + std::to_string(x.shape().size()));
        shape[i] = x.shape()[i];
      }
  return {reshape(x, Shape(shape.begin(), shape.end()))};
}

V Flatten(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t r = rank_of(x);
  int64_t axis = n.attr_int("axis", 1);
  if (axis < -r || axis > r) n.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < r; ++d) (d < axis ? outer : inner) *= x.shape()[size_t(d)];
  return {reshape(x, {outer, inner})};
}

V Transpose(const NodeContext& n) {
  const Tensor& x = n.input(0);
  std::vector<int64_t> perm = n.attr_ints("perm");
  std::vector<int> p;
  for (int64_t v : perm) p.push_back(n.axis(v, rank_of(x)));
  if (p.empty())
    for (int64_t d = rank_of(x) - 1; d >= 0; --d) p.push_back(int(d));
  return {transpose(x, p)};
}

std::vector<int64_t> axes_of(const NodeContext& n, size_t input, bool* given) {
  if (n.opset() < 13) {
    *given = n.has_attr("axes");
    return n.attr_ints("axes");
  }
  *given = n.has_input(input);
  return *given ? n.input_ints(input) : std::vector<int64_t>{};
}

V Squeeze(const NodeContext& n) {
  const Tensor& x = n.input(0);
  bool given = false;
  std::vector<int> axes;
  for (int64_t a : axes_of(n, 1, &given)) {
    const int ax = n.axis(a, rank_of(x));
    if (x.shape()[size_t(ax)] != 1) n.fail("cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(x.shape()[size_t(ax)]));
    axes.push_back(ax);
  }
  if (given && axes.empty()) return {x + scalar_like(x, 0)};
  return {squeeze(x, axes)};
}

V Unsqueeze(const NodeContext& n) {
  Tensor x = n.input(0);
  bool given = false;
  const int64_t out_rank = rank_of(x) + int64_t(axes_of(n, 1, &given).size());
  std::vector<int> axes;
  for (int64_t a : axes_of(n, 1, &given)) axes.push_back(n.axis(a, out_rank));
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) n.fail("names an axis twice");
  for (int a : axes) x = unsqueeze(x, a);
  return {x};
}

V Concat(const NodeContext& n) {
  std::vector<Tensor> xs;
  for (size_t k = 0; k < n.num_inputs(); ++k) xs.push_back(n.input(k));
  return {concat(xs, n.axis(n.attr_int("axis"), rank_of(xs[0])))};
}

V Split(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int axis = n.axis(n.attr_int("axis", 0), rank_of(x));
  const int64_t extent = x.shape()[size_t(axis)];
  std::vector<int64_t> sizes = n.opset() < 13 ? n.attr_ints("split") : (n.has_input(1) ? n.input_ints(1) : std::vector<int64_t>{});
  const int64_t parts = int64_t(n.num_outputs());
  if (sizes.empty()) {
    if (extent % parts != 0) n.fail("cannot split an axis of " + std::to_string(extent) + " into " + std::to_string(parts) + " equal parts");
    sizes.assign(size_t(parts), extent / parts);
  }
  for (int64_t size : sizes)
    if (size < 0) n.fail("has split size " + std::to_string(size) + ": each part has 0 or more elements");
  if (int64_t(sizes.size()) != parts || std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != extent)
    n.fail("its split sizes do not add up to the axis' " + std::to_string(extent) + " in " + std::to_string(parts) + " outputs");
  V out;
  int64_t at = 0;
  for (int64_t s : sizes) out.push_back(slice(x, axis, at, at + s)), at += s;
  return out;
}

// numpy's slicing of one axis, steps of either sign.
Tensor slice_axis(const NodeContext& n, const Tensor& x, int axis, int64_t start, int64_t end, int64_t step) {
  const int64_t d = x.shape()[size_t(axis)];
  if (step == 0) n.fail("a slice's step must not be 0");
  if (step > 0) {
    start = start < 0 ? std::max<int64_t>(start + d, 0) : std::min(start, d);
    end = end < 0 ? std::max<int64_t>(end + d, 0) : std::min(end, d);
    return slice(x, axis, start, std::max(start, end), step);
  }
  start = start < 0 ? std::max<int64_t>(start + d, -1) : std::min(start, d - 1);
  end = end < 0 ? std::max<int64_t>(end + d, -1) : std::min(end, d - 1);
  std::vector<int64_t> at;
  for (int64_t i = start; i > end; i += step) at.push_back(i);
  return pick(x, axis, at);
}

V Slice(const NodeContext& n) {
  Tensor x = n.input(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.opset() < 10) {
    starts = n.attr_ints("starts"), ends = n.attr_ints("ends"), axes = n.attr_ints("axes");
  } else {
    starts = n.input_ints(1), ends = n.input_ints(2);
    if (n.has_input(3)) axes = n.input_ints(3);
    if (n.has_input(4)) steps = n.input_ints(4);
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    n.fail("starts, ends, axes and steps differ in length");
  for (size_t i = 0; i < starts.size(); ++i) x = slice_axis(n, x, n.axis(axes[i], rank_of(x)), starts[i], ends[i], steps[i]);
  return {x + scalar_like(x, 0)};
}

V Gather(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const Tensor& idx = n.input(1);
  return {take(x, idx, n.axis(n.attr_int("axis", 0), rank_of(x)))};
}

// numpy's broadcast of two shapes (Expand broadcasts both ways).
Shape broadcast_shapes(const NodeContext& n, const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1) n.fail("cannot broadcast " + shape_str(a) + " with " + shape_str(b));
    out[i] = x == 1 ? y : x;
  }
  return out;
}

V Expand(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const std::vector<int64_t> s = n.input_ints(1);
  return {broadcast_to(x, broadcast_shapes(n, x.shape(), Shape(s.begin(), s.end())))};
}

V Tile(const NodeContext& n) {
  Tensor x = n.input(0);
  const std::vector<int64_t> reps = n.input_ints(1);
  if (int64_t(reps.size()) != rank_of(x)) n.fail("has " + std::to_string(reps.size()) + " repeats for a tensor of rank " + std::to_string(rank_of(x)));
  for (size_t a = 0; a < reps.size(); ++a) {
    if (reps[a] < 0) n.fail("a repeat count must not be negative");
    if (reps[a] == 1) continue;
    Shape s = x.shape(), wide = x.shape();
    s.insert(s.begin() + std::ptrdiff_t(a), 1);
    wide.insert(wide.begin() + std::ptrdiff_t(a), reps[a]);
    Shape out = x.shape();
    out[a] *= reps[a];
    x = reshape(broadcast_to(reshape(x, s), wide), out);
  }
  return {x + scalar_like(x, 0)};
}

V Range(const NodeContext& n) {
  const Tensor& s = n.input(0);
  const double start = n.input_doubles(0).at(0), limit = n.input_doubles(1).at(0), delta = n.input_doubles(2).at(0);
  if (!std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta))
    n.fail("needs finite start, limit and delta, given " + std::to_string(start) + ", " + std::to_string(limit) + ", " + std::to_string(delta));
  if (delta == 0) n.fail("delta must not be 0");
  const double steps = std::ceil((limit - start) / delta);
  // (Past 2^53 a count is no longer exact in a double, and no machine holds such a tensor.)
  if (steps > 9.0e15) n.fail("would have " + std::to_string(steps) + " elements: (limit - start) / delta is too large");
  const int64_t count = std::max<int64_t>(int64_t(steps), 0);
  const Tensor i = iota({count}, 0, is_float(s.dtype()) ? s.dtype() : DType::I64);
  return {as_dtype(i * n.input(2) + n.input(0), s.dtype())};
}

V Pad(const NodeContext& n) {
  Tensor x = n.input(0);
  const int64_t r = rank_of(x);
  std::vector<int64_t> pads;
  double value = 0;
  if (n.opset() < 11) {
    pads = n.attr_ints("pads");
    value = n.attr_float("value", 0);
  } else {
    pads = n.input_ints(1);
    if (n.has_input(2)) {
      const std::vector<double> v = n.input_doubles(2);
      if (v.size() != 1) n.fail("its constant_value holds " + std::to_string(v.size()) + " values; it must hold one");
      value = v[0];
    }
  }
  if (int64_t(pads.size()) != 2 * r) n.fail("has " + std::to_string(pads.size()) + " pads for a tensor of rank " + std::to_string(r));
  const std::string mode = n.attr_string("mode", "constant");
  if (mode == "constant") {
    std::vector<std::pair<int64_t, int64_t>> widths;
    for (int64_t d = 0; d < r; ++d) widths.push_back({pads[size_t(d)], pads[size_t(d + r)]});
    return {pad(x, widths, value)};
  }
  if (mode != "reflect" && mode != "edge") n.fail("has pad mode '" + mode + "' (constant, reflect or edge)");
  Shape padded = x.shape();
  for (int64_t d = 0; d < r; ++d) {
    int64_t& e = padded[size_t(d)];
    if (__builtin_add_overflow(e, pads[size_t(d)], &e) || __builtin_add_overflow(e, pads[size_t(d + r)], &e) || e < 0)
      n.fail("pads an axis of " + std::to_string(x.shape()[size_t(d)]) + " by " + std::to_string(pads[size_t(d)]) + " and " +
             std::to_string(pads[size_t(d + r)]) + ", which leaves no size");
  }
  n.require_fits(padded, x.dtype());
  for (int64_t d = 0; d < r; ++d) {
    const int64_t before = pads[size_t(d)], after = pads[size_t(d + r)], e = x.shape()[size_t(d)];
    if (before == 0 && after == 0) continue;
    if (e == 0 || (mode == "reflect" && (before >= e || after >= e) && e > 1))
      n.fail("cannot " + mode + "-pad an axis of " + std::to_string(e) + " by " + std::to_string(std::max(before, after)));
    std::vector<int64_t> at;
    for (int64_t i = -before; i < e + after; ++i) {
      int64_t j = i;
      if (mode == "edge" || e == 1) j = std::clamp<int64_t>(i, 0, e - 1);
      else if (i < 0) j = -i;
      else if (i >= e) j = 2 * (e - 1) - i;
      at.push_back(std::max<int64_t>(j, 0));
    }
    x = pick(x, int(d), at);
  }
  return {x};
}

V Dropout(const NodeContext& n) {
  const Tensor& x = n.input(0);
  if (n.opset() >= 12 && n.has_input(2) && n.input_ints(2).at(0) != 0) {
    const double ratio = n.has_input(1) ? n.input_doubles(1).at(0) : 0.5;
    if (ratio != 0) n.fail("runs in training mode, whose mask comes from a random draw hjit cannot reproduce");
  }
  return {x + scalar_like(x, 0), Tensor::ones(x.shape(), DType::Bool)};
}

V Trilu(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t k = n.has_input(1) ? n.input_ints(1).at(0) : 0;
  return {n.attr_int("upper", 1) ? triu(x, k) : tril(x, k)};
}

V CumSum(const NodeContext& n) {
  Tensor x = n.input(0);
  const int axis = n.axis(n.input_ints(1).at(0), rank_of(x));
  const bool reverse = n.attr_int("reverse", 0) != 0, exclusive = n.attr_int("exclusive", 0) != 0;
  std::vector<int64_t> back(size_t(x.shape()[size_t(axis)]));
  std::iota(back.rbegin(), back.rend(), 0);
  if (reverse) x = pick(x, axis, back);
  Tensor y = as_dtype(cumsum(x, axis), x.dtype());
  if (exclusive) y = y - x;
  if (reverse) y = pick(y, axis, back);
  return {y};
}

// Hann, Hamming and Blackman windows of a length known when converting: sums of cosines of
// 2 pi n / N (N = size when periodic, size - 1 when symmetric).
Tensor cosine_window(const NodeContext& n, const std::vector<double>& a) {
  const int64_t size = n.input_ints(0).at(0);
  if (size < 0) n.fail("a window's size must not be negative");
  const DType to = dtype_from_onnx(int(n.attr_int("output_datatype", 1)), "hjit::onnx: " + n.where() + " attribute 'output_datatype'");
  const double denom = n.attr_int("periodic", 1) ? double(size) : double(size - 1);
  const Tensor t = iota({size}, 0, DType::F64) * (denom > 0 ? 2 * M_PI / denom : 0.0);
  Tensor w = Tensor::full({size}, a[0], DType::F64);
  for (size_t k = 1; k < a.size(); ++k) w = w + cos(t * double(k)) * a[k];
  return astype(w, to);
}
V HannWindow(const NodeContext& n) { return {cosine_window(n, {0.5, -0.5})}; }
V HammingWindow(const NodeContext& n) { return {cosine_window(n, {25.0 / 46, -(1 - 25.0 / 46)})}; }
V BlackmanWindow(const NodeContext& n) { return {cosine_window(n, {0.42, -0.5, 0.08})}; }

}  // namespace

void add_shape_ops(ConverterTable& t) {
#define HJIT_ONNX_OP(name) t[#name] = name;
  HJIT_ONNX_OP(Constant) HJIT_ONNX_OP(ConstantOfShape) HJIT_ONNX_OP(Size) HJIT_ONNX_OP(Reshape) HJIT_ONNX_OP(Flatten)
  HJIT_ONNX_OP(Transpose) HJIT_ONNX_OP(Squeeze) HJIT_ONNX_OP(Unsqueeze) HJIT_ONNX_OP(Concat) HJIT_ONNX_OP(Split)
  HJIT_ONNX_OP(Slice) HJIT_ONNX_OP(Gather) HJIT_ONNX_OP(Expand) HJIT_ONNX_OP(Tile) HJIT_ONNX_OP(Range) HJIT_ONNX_OP(Pad)
  HJIT_ONNX_OP(Dropout) HJIT_ONNX_OP(Trilu) HJIT_ONNX_OP(CumSum) HJIT_ONNX_OP(HannWindow) HJIT_ONNX_OP(HammingWindow)
  HJIT_ONNX_OP(BlackmanWindow)
#undef HJIT_ONNX_OP
  t["Shape"] = ShapeOp;
}

}  // namespace hjit::onnx_import
