// ONNX's neural network ops: matrix products, convolution, pooling, normalizations, softmax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

int64_t rank_of(const Tensor& t) { return int64_t(t.shape().size()); }

V MatMul(const NodeContext& n) { return {as_dtype(matmul(n.input(0), n.input(1)), n.input(0).dtype())}; }

V Gemm(const NodeContext& n) {
  Tensor a = n.input(0), b = n.input(1);
  if (rank_of(a) != 2 || rank_of(b) != 2) n.fail("multiplies matrices (rank 2), given " + shape_str(a.shape()) + " and " + shape_str(b.shape()));
  if (n.attr_int("transA", 0)) a = transpose(a);
  if (n.attr_int("transB", 0)) b = transpose(b);
  const double alpha = n.attr_float("alpha", 1.0), beta = n.attr_float("beta", 1.0);
  Tensor y = matmul(a, b);
  if (alpha != 1.0) y = y * alpha;
  if (auto c = n.optional_input(2); c && beta != 0.0) y = y + (beta == 1.0 ? *c : *c * beta);
  return {as_dtype(y, n.input(0).dtype())};
}

// Spatial attributes of Conv and the pools, for 1 or 2 spatial dimensions (1-d runs as 2-d with a
// height of 1): explicit pads with auto_pad resolved, and the extra end padding of ceil_mode.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
};

Window window_of(const NodeContext& n, const Shape& x, std::vector<int64_t> kernel, bool ceil_mode) {
  const size_t dims = x.size() - 2;
  if (dims != 1 && dims != 2) n.fail("hjit converts 1-d and 2-d windows; this input is " + shape_str(x));
  if (kernel.size() != dims) n.fail("its kernel has " + std::to_string(kernel.size()) + " dimensions for " + std::to_string(dims) + " spatial ones");
  Window w{kernel, n.attr_ints("strides", std::vector<int64_t>(dims, 1)), n.attr_ints("dilations", std::vector<int64_t>(dims, 1)), {}, {}};
  std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * dims, 0));
  if (w.strides.size() != dims || w.dilations.size() != dims || pads.size() != 2 * dims) n.fail("its strides, dilations or pads do not match the kernel");
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  for (size_t d = 0; d < dims; ++d) {
    const int64_t in = x[2 + d], k = (kernel[d] - 1) * w.dilations[d] + 1, s = w.strides[d];
    if (s <= 0 || w.dilations[d] <= 0 || kernel[d] <= 0) n.fail("strides, dilations and kernel sizes must be positive");
    int64_t b = pads[d], e = pads[d + dims];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in + s - 1) / s, total = std::max<int64_t>((out - 1) * s + k - in, 0);
      b = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      e = total - b;
    } else if (auto_pad == "VALID") {
      b = e = 0;
    } else if (auto_pad != "NOTSET") {
      n.fail("has auto_pad '" + auto_pad + "'");
    }
    if (b < 0 || e < 0) n.fail("pads must not be negative");
    if (ceil_mode) {
      const int64_t span = in + b + e - k;
      if (span >= 0 && span % s != 0) {
        int64_t extra = s - span % s;
        // The last window must start inside the input or its left padding (PyTorch's and ONNX's rule).
        if (((span + extra) / s) * s >= in + b) extra = 0;
        e += extra;
      }
    }
    w.pads_begin.push_back(b), w.pads_end.push_back(e);
  }
  return w;
}

// 1-d windows as 2-d ones with a height of 1: a leading 1 in each list (0 in the pads).
void lift(Window& w) {
  w.kernel.insert(w.kernel.begin(), 1), w.strides.insert(w.strides.begin(), 1), w.dilations.insert(w.dilations.begin(), 1);
  w.pads_begin.insert(w.pads_begin.begin(), 0), w.pads_end.insert(w.pads_end.begin(), 0);
}

// [N, C, L] -> [N, C, 1, L] with the window lifted; true when x was 1-d.
bool as_2d(Tensor& x, Window& w) {
  if (rank_of(x) != 3) return false;
  x = unsqueeze(x, 2);
  lift(w);
  return true;
}

Tensor pad_spatial(const Tensor& x, const Window& w, double value) {
  if (w.pads_begin == std::vector<int64_t>{0, 0} && w.pads_end == std::vector<int64_t>{0, 0}) return x;
  return pad(x, {{0, 0}, {0, 0}, {w.pads_begin[0], w.pads_end[0]}, {w.pads_begin[1], w.pads_end[1]}}, value);
}

V Conv(const NodeContext& n) {
  Tensor x = n.input(0), wt = n.input(1);
  if (rank_of(wt) != rank_of(x)) n.fail("its weight " + shape_str(wt.shape()) + " does not match the input " + shape_str(x.shape()));
  std::vector<int64_t> kernel(wt.shape().begin() + 2, wt.shape().end());
  if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != kernel) n.fail("its kernel_shape differs from its weight's");
  Window w = window_of(n, x.shape(), kernel, false);
  const bool one_d = as_2d(x, w);
  if (one_d) wt = unsqueeze(wt, 2);
  const bool symmetric = w.pads_begin == w.pads_end;
  if (!symmetric) x = pad_spatial(x, w, 0);
  const Pair padding = symmetric ? Pair{w.pads_begin[0], w.pads_begin[1]} : Pair{0, 0};
  Tensor y = conv2d(x, wt, n.optional_input(2), {w.strides[0], w.strides[1]}, padding, {w.dilations[0], w.dilations[1]},
                    n.attr_int("group", 1));
  return {one_d ? squeeze(y, {2}) : y};
}

V MaxPool(const NodeContext& n) {
  Tensor x = n.input(0);
  if (n.num_outputs() > 1 && !n.proto().output(1).empty()) n.fail("hjit does not give MaxPool's Indices output");
  if (n.attr_int("storage_order", 0) != 0) n.fail("has storage_order 1 (only for the Indices output)");
  Window w = window_of(n, x.shape(), n.attr_ints("kernel_shape"), n.attr_int("ceil_mode", 0) != 0);
  const bool one_d = as_2d(x, w);
  if (w.dilations != std::vector<int64_t>{1, 1}) n.fail("hjit's max pooling has no dilations");
  const double lowest = is_float(x.dtype()) ? -std::numeric_limits<double>::infinity() : -128;
  if (!is_float(x.dtype())) n.fail("hjit pools floating-point tensors");
  x = pad_spatial(x, w, lowest);
  Tensor y = max_pool2d(x, {w.kernel[0], w.kernel[1]}, {w.strides[0], w.strides[1]});
  return {one_d ? squeeze(y, {2}) : y};
}

// The sum over each window of x padded with zeros, divided by the count of the positions that
// count (the input, and the explicit pads with count_include_pad, never ceil_mode's extra).
V AveragePool(const NodeContext& n) {
  Tensor x = n.input(0);
  const Shape in_shape = x.shape();
  const bool ceil = n.attr_int("ceil_mode", 0) != 0;
  Window w = window_of(n, in_shape, n.attr_ints("kernel_shape"), ceil);
  Window plain = window_of(n, in_shape, n.attr_ints("kernel_shape"), false);
  const bool one_d = as_2d(x, w);
  if (one_d) lift(plain);
  if (w.dilations != std::vector<int64_t>{1, 1}) n.fail("hjit's average pooling has no dilations");
  const Pair k{w.kernel[0], w.kernel[1]}, s{w.strides[0], w.strides[1]};
  const double area = double(k[0] * k[1]);
  Tensor sums = avg_pool2d(pad_spatial(x, w, 0), k, s) * area;
  Shape ones_shape{1, 1, x.shape()[2], x.shape()[3]};
  Tensor counted = Tensor::ones(ones_shape, x.dtype());
  if (n.attr_int("count_include_pad", 0) != 0) counted = pad_spatial(counted, plain, 1);
  else plain.pads_begin = {0, 0}, plain.pads_end = {0, 0};
  Window rest = w;  // what is left of w's padding around `counted`
  for (size_t d = 0; d < 2; ++d) rest.pads_begin[d] -= plain.pads_begin[d], rest.pads_end[d] -= plain.pads_end[d];
  Tensor counts = avg_pool2d(pad_spatial(counted, rest, 0), k, s) * area;
  Tensor y = sums / counts;
  return {one_d ? squeeze(y, {2}) : y};
}

std::vector<int> spatial_axes(const Tensor& x) {
  std::vector<int> axes;
  for (int d = 2; d < int(rank_of(x)); ++d) axes.push_back(d);
  return axes;
}

V GlobalAveragePool(const NodeContext& n) { return {mean(n.input(0), spatial_axes(n.input(0)), true)}; }
V GlobalMaxPool(const NodeContext& n) { return {max(n.input(0), spatial_axes(n.input(0)), true)}; }

// A per-channel vector [C] shaped to broadcast against [N, C, ...].
Tensor per_channel(const Tensor& v, int64_t rank) {
  Shape s(size_t(std::max<int64_t>(rank - 1, 1)), 1);
  s[0] = v.numel();
  return reshape(v, s);
}

V BatchNormalization(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t r = rank_of(x);
  if (n.opset() >= 14 && n.attr_int("training_mode", 0) != 0) n.fail("runs in training mode; hjit converts inference graphs");
  const double eps = n.attr_float("epsilon", 1e-5);
  const Tensor scale = per_channel(n.input(1), r), bias = per_channel(n.input(2), r);
  const Tensor m = per_channel(n.input(3), r), v = per_channel(n.input(4), r);
  return {(x - m) * (rsqrt(v + eps) * scale) + bias};
}

V InstanceNormalization(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const std::vector<int> axes = spatial_axes(x);
  const Tensor m = mean(x, axes, true);
  const Tensor v = mean((x - m) * (x - m), axes, true);
  const int64_t r = rank_of(x);
  return {(x - m) * rsqrt(v + n.attr_float("epsilon", 1e-5)) * per_channel(n.input(1), r) + per_channel(n.input(2), r)};
}

V LayerNormalization(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t r = rank_of(x);
  const int axis = n.axis(n.attr_int("axis", -1), r);
  std::vector<int> axes;
  for (int d = axis; d < int(r); ++d) axes.push_back(d);
  const Tensor m = mean(x, axes, true);
  const Tensor d = x - m;
  const Tensor inv = rsqrt(mean(d * d, axes, true) + n.attr_float("epsilon", 1e-5));
  Tensor y = d * inv * n.input(1);
  if (auto b = n.optional_input(2)) y = y + *b;
  return {y, m, inv};
}

V MeanVarianceNormalization(const NodeContext& n) {
  const Tensor& x = n.input(0);
  std::vector<int> axes;
  for (int64_t a : n.attr_ints("axes", {0, 2, 3})) axes.push_back(n.axis(a, rank_of(x)));
  const Tensor m = mean(x, axes, true);
  const Tensor d = x - m;
  return {d / (sqrt(mean(d * d, axes, true)) + 1e-9)};
}

// Before opset 13, Softmax, LogSoftmax and Hardmax work on the input flattened to 2-d at `axis`
// (default 1); from 13 on, along one axis (default -1).
template <Tensor (*F)(const Tensor&, int)>
V softmax_like(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t r = rank_of(x);
  if (n.opset() >= 13) return {F(x, n.axis(n.attr_int("axis", -1), r))};
  const int axis = n.axis(n.attr_int("axis", 1), r);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < r; ++d) (d < axis ? outer : inner) *= x.shape()[size_t(d)];
  return {reshape(F(reshape(x, {outer, inner}), 1), x.shape())};
}
Tensor softmax_axis(const Tensor& x, int axis) { return softmax(x, axis); }
Tensor log_softmax_axis(const Tensor& x, int axis) { return log_softmax(x, axis); }
Tensor hardmax_axis(const Tensor& x, int axis) {
  const Tensor at = argmax(x, axis, true);
  return astype(iota(x.shape(), axis, DType::I64) == at, x.dtype());
}

V LRN(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t size = n.attr_int("size");
  const double alpha = n.attr_float("alpha", 1e-4), beta = n.attr_float("beta", 0.75), bias = n.attr_float("bias", 1.0);
  const int64_t c = x.shape().at(1);
  std::vector<std::pair<int64_t, int64_t>> widths(size_t(rank_of(x)), {0, 0});
  widths[1] = {(size - 1) / 2, size - 1 - (size - 1) / 2};
  const Tensor sq = pad(x * x, widths, 0);
  Tensor acc = slice(sq, 1, 0, c);
  for (int64_t i = 1; i < size; ++i) acc = acc + slice(sq, 1, i, i + c);
  return {x / pow(acc * (alpha / double(size)) + bias, beta)};
}

V Shrink(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const double lambd = n.attr_float("lambd", 0.5), bias = n.attr_float("bias", 0.0);
  return {as_dtype(where(x < -lambd, x + bias, where(x > lambd, x - bias, 0.0)), x.dtype())};
}

}  // namespace

void add_nn_ops(ConverterTable& t) {
#define HJIT_ONNX_OP(name) t[#name] = name;
  HJIT_ONNX_OP(MatMul) HJIT_ONNX_OP(Gemm) HJIT_ONNX_OP(Conv) HJIT_ONNX_OP(MaxPool) HJIT_ONNX_OP(AveragePool)
  HJIT_ONNX_OP(GlobalAveragePool) HJIT_ONNX_OP(GlobalMaxPool) HJIT_ONNX_OP(BatchNormalization)
  HJIT_ONNX_OP(InstanceNormalization) HJIT_ONNX_OP(LayerNormalization) HJIT_ONNX_OP(MeanVarianceNormalization)
  HJIT_ONNX_OP(LRN) HJIT_ONNX_OP(Shrink)
#undef HJIT_ONNX_OP
  t["Softmax"] = softmax_like<softmax_axis>;
  t["LogSoftmax"] = softmax_like<log_softmax_axis>;
  t["Hardmax"] = softmax_like<hardmax_axis>;
}

}  // namespace hjit::onnx_import
