// ONNX's reductions and arg reductions: axes as an attribute (or an input: ReduceSum from opset
// 13), keepdims, noop_with_empty_axes.
#include <limits>
#include <numeric>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

struct Axes {
  std::vector<int> axes;  // non-negative, every axis when none were given
  bool keepdims;
  bool noop;  // noop_with_empty_axes with no axes: the input unchanged
};

Axes reduce_axes(const NodeContext& n, bool axes_input) {
  const Tensor& x = n.input(0);
  const int64_t r = int64_t(x.shape().size());
  std::vector<int64_t> given = axes_input ? (n.has_input(1) ? n.input_ints(1) : std::vector<int64_t>{}) : n.attr_ints("axes");
  Axes a{{}, n.attr_int("keepdims", 1) != 0, false};
  if (given.empty()) {
    a.noop = n.attr_int("noop_with_empty_axes", 0) != 0;
    for (int d = 0; d < r; ++d) a.axes.push_back(d);
  }
  for (int64_t g : given) a.axes.push_back(n.axis(g, r));
  return a;
}

template <Tensor (*Reduce)(const Tensor&, std::vector<int>, bool), Tensor (*Before)(const Tensor&),
          Tensor (*After)(const Tensor&)>
V reduction(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const Axes a = reduce_axes(n, n.proto().op_type() == "ReduceSum" && n.opset() >= 13);
  if (a.noop) return {x + scalar_like(x, 0)};
  if (a.axes.empty() && x.shape().empty()) return {After(Before(x))};
  return {as_dtype(After(Reduce(Before(x), a.axes, a.keepdims)), x.dtype())};
}

Tensor same(const Tensor& x) { return x; }
Tensor square(const Tensor& x) { return x * x; }
Tensor absolute(const Tensor& x) { return abs(x); }
Tensor root(const Tensor& x) { return sqrt(x); }
Tensor logarithm(const Tensor& x) { return log(x); }

V ReduceLogSumExp(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const Axes a = reduce_axes(n, false);
  if (a.noop) return {x + scalar_like(x, 0)};
  Tensor m = max(x, a.axes, true);
  m = where(abs(m) == std::numeric_limits<double>::infinity(), 0.0, m);  // all -inf (or +inf): no shift
  Tensor s = log(sum(exp(x - m), a.axes, true)) + m;
  if (!a.keepdims) s = squeeze(s, a.axes);
  return {as_dtype(s, x.dtype())};
}

// ReduceProd: the product of the magnitudes through logarithms, the sign from the count of
// negative factors, zero where any factor is zero.
V ReduceProd(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const Axes a = reduce_axes(n, false);
  if (a.noop) return {x + scalar_like(x, 0)};
  return {product_along(x, a.axes, a.keepdims)};
}

// select_last_index: the last of equal extremes, found as the first in the reversed axis.
template <Tensor (*Arg)(const Tensor&, int, bool)>
V arg_reduction(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int axis = n.axis(n.attr_int("axis", 0), int64_t(x.shape().size()));
  const bool keep = n.attr_int("keepdims", 1) != 0;
  if (n.attr_int("select_last_index", 0) == 0) return {Arg(x, axis, keep)};
  const int64_t e = x.shape()[size_t(axis)];
  std::vector<int64_t> back(static_cast<size_t>(e));
  std::iota(back.rbegin(), back.rend(), 0);
  const Tensor rev = take(x, Tensor::from_vector<int64_t>(back, Shape{e}), axis);
  return {(Arg(rev, axis, keep) * int64_t(-1)) + (e - 1)};
}

}  // namespace

Tensor product_along(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  const Tensor xf = astype(x, is_float(x.dtype()) ? x.dtype() : DType::F64);
  const Tensor zero = sum(astype(xf == 0.0, DType::I64), axes, keepdims) > int64_t(0);
  const Tensor negatives = sum(astype(xf < 0.0, DType::F64), axes, keepdims);
  const Tensor odd = negatives - floor(negatives * 0.5) * 2.0 > 0.5;
  const Tensor mag = exp(sum(log(abs(xf)), axes, keepdims));
  Tensor p = where(zero, 0.0, where(odd, -mag, mag));
  if (!is_float(x.dtype())) p = round(p);
  return as_dtype(p, x.dtype());
}

void add_reduce_ops(ConverterTable& t) {
  t["ReduceSum"] = reduction<sum, same, same>;
  t["ReduceMean"] = reduction<mean, same, same>;
  t["ReduceMax"] = reduction<max, same, same>;
  t["ReduceMin"] = reduction<min, same, same>;
  t["ReduceL1"] = reduction<sum, absolute, same>;
  t["ReduceL2"] = reduction<sum, square, root>;
  t["ReduceSumSquare"] = reduction<sum, square, same>;
  t["ReduceLogSum"] = reduction<sum, same, logarithm>;
  t["ReduceLogSumExp"] = ReduceLogSumExp;
  t["ReduceProd"] = ReduceProd;
  t["ArgMax"] = arg_reduction<argmax>;
  t["ArgMin"] = arg_reduction<argmin>;
}

}  // namespace hjit::onnx_import
