// ONNX's neural network ops: matrix products, convolution, pooling, normalizations, softmax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

int64_t rank_of(const Tensor& t) { return int64_t(t.shape().size()); }

V MatMul(const NodeContext& n) {
  if (std::optional<Factored> q = dequantized_product(n, false, false)) {
    n.note_factored(0, *q);
    return {q->expanded()};
  }
  return {as_dtype(matmul(n.input(0), n.input(1)), n.input(0).dtype())};
}

V Gemm(const NodeContext& n) {
  Tensor a = n.input(0), b = n.input(1);
  if (rank_of(a) != 2 || rank_of(b) != 2) n.fail("multiplies matrices (rank 2), given " + shape_str(a.shape()) + " and " + shape_str(b.shape()));
  const bool trans_a = n.attr_int("transA", 0) != 0, trans_b = n.attr_int("transB", 0) != 0;
  if (trans_a) a = transpose(a);
  if (trans_b) b = transpose(b);
  const double alpha = n.attr_float("alpha", 1.0), beta = n.attr_float("beta", 1.0);
  std::optional<Factored> q = dequantized_product(n, trans_a, trans_b);
  const std::optional<Tensor> c = beta != 0.0 ? n.optional_input(2) : std::nullopt;
  if (q && alpha == 1.0 && (!c || c->dtype() == DType::F32)) {
    if (c) q->offset = beta == 1.0 ? *c : *c * beta;
    n.note_factored(0, *q);
    return {q->expanded()};
  }
  Tensor y = q ? q->expanded() : matmul(a, b);
  if (alpha != 1.0) y = y * alpha;
  if (c) y = y + (beta == 1.0 ? *c : *c * beta);
  return {as_dtype(y, n.input(0).dtype())};
}

// Spatial attributes of Conv and the pools, for 1 or 2 spatial dimensions (1-d runs as 2-d with a
// height of 1): explicit pads with auto_pad resolved, and the extra end padding of ceil_mode.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
};

Window window_of(const NodeContext& n, const Shape& x, std::vector<int64_t> kernel, bool ceil_mode) {
  const size_t dims = x.size() - 2;
  if (dims < 1 || dims > 3) n.fail("hjit converts 1-d, 2-d and 3-d windows; this input is " + shape_str(x));
  if (kernel.size() != dims) n.fail("its kernel has " + std::to_string(kernel.size()) + " dimensions for " + std::to_string(dims) + " spatial ones");
  Window w{kernel, n.attr_ints("strides", std::vector<int64_t>(dims, 1)), n.attr_ints("dilations", std::vector<int64_t>(dims, 1)), {}, {}};
  std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * dims, 0));
  if (w.strides.size() != dims || w.dilations.size() != dims || pads.size() != 2 * dims) n.fail("its strides, dilations or pads do not match the kernel");
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  for (size_t d = 0; d < dims; ++d) {
    const int64_t in = x[2 + d], s = w.strides[d];
    if (s <= 0 || w.dilations[d] <= 0 || kernel[d] <= 0) n.fail("strides, dilations and kernel sizes must be positive");
    // The window's span, no larger than the input with its padding (checked below): its taps are
    // then a number a loop can count.
    int64_t k = 0;
    if (__builtin_mul_overflow(kernel[d] - 1, w.dilations[d], &k) || k == std::numeric_limits<int64_t>::max())
      n.fail("has a window of " + std::to_string(kernel[d]) + " taps, " + std::to_string(w.dilations[d]) + " apart, over an input of " + std::to_string(in));
    k += 1;
    int64_t b = pads[d], e = pads[d + dims];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = in / s + (in % s != 0), total = std::max<int64_t>(int64_t(std::min<__int128>(__int128(out - 1) * s + k - in, k)), 0);
      b = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      e = total - b;
    } else if (auto_pad == "VALID") {
      b = e = 0;
    } else if (auto_pad != "NOTSET") {
      n.fail("has auto_pad '" + auto_pad + "'");
    }
    if (b < 0 || e < 0) n.fail("pads must not be negative");
    if (__int128(in) + b + e < k)
      n.fail("has a window spanning " + std::to_string(k) + " over an input of " + std::to_string(in) + " padded by " + std::to_string(b) + " and " +
             std::to_string(e) + ": it does not fit once");
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
  std::vector<std::pair<int64_t, int64_t>> widths{{0, 0}, {0, 0}};
  bool any = false;
  for (size_t d = 0; d < w.pads_begin.size(); ++d) {
    widths.push_back({w.pads_begin[d], w.pads_end[d]});
    any |= w.pads_begin[d] != 0 || w.pads_end[d] != 0;
  }
  return any ? pad(x, widths, value) : x;
}

// Output extent of a window along spatial dimension d of an input already padded.
int64_t windows_along(const Window& w, const Shape& padded, size_t d) {
  return (padded[2 + d] - ((w.kernel[d] - 1) * w.dilations[d] + 1)) / w.strides[d] + 1;
}

// The next kernel position after `tap` (the last axis fastest); false after the last one.
bool next_tap(std::vector<int64_t>& tap, const std::vector<int64_t>& kernel) {
  for (size_t d = tap.size(); d-- > 0;) {
    if (++tap[d] < kernel[d]) return true;
    tap[d] = 0;
  }
  return false;
}

// Pooling of any rank, dilation and dtype, one strided slice per kernel position: where hjit's
// pooling ops (2-d, undilated, floating point) do not apply. x is padded already.
Tensor pool_by_taps(const Tensor& x, const Window& w, bool take_max) {
  const size_t dims = w.kernel.size();
  std::vector<int64_t> out(dims);
  for (size_t d = 0; d < dims; ++d) out[d] = windows_along(w, x.shape(), d);
  Tensor acc;
  std::vector<int64_t> tap(dims, 0);
  do {
    Tensor t = x;
    for (size_t d = 0; d < dims; ++d) {
      const int64_t start = tap[d] * w.dilations[d];
      t = slice(t, int(2 + d), start, start + (out[d] - 1) * w.strides[d] + 1, w.strides[d]);
    }
    acc = !acc.defined() ? t : take_max ? maximum(acc, t) : acc + t;
  } while (next_tap(tap, w.kernel));
  return acc;
}

V Conv(const NodeContext& n) {
  if (std::optional<Factored> q = dequantized_conv(n)) {
    n.note_factored(0, *q);
    return {q->expanded()};
  }
  Tensor x = n.input(0), wt = n.input(1);
  if (rank_of(wt) != rank_of(x)) n.fail("its weight " + shape_str(wt.shape()) + " does not match the input " + shape_str(x.shape()));
  std::vector<int64_t> kernel(wt.shape().begin() + 2, wt.shape().end());
  if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != kernel) n.fail("its kernel_shape differs from its weight's");
  Window w = window_of(n, x.shape(), kernel, false);
  const int64_t groups = n.attr_int("group", 1);
  if (rank_of(x) == 5) {
    return {conv3d(pad_spatial(x, w, 0), wt, n.optional_input(2), {w.strides[0], w.strides[1], w.strides[2]}, {0, 0, 0},
                   {w.dilations[0], w.dilations[1], w.dilations[2]}, groups)};
  }
  const bool one_d = as_2d(x, w);
  if (one_d) wt = unsqueeze(wt, 2);
  const bool symmetric = w.pads_begin == w.pads_end;
  if (!symmetric) x = pad_spatial(x, w, 0);
  const Pair padding = symmetric ? Pair{w.pads_begin[0], w.pads_begin[1]} : Pair{0, 0};
  Tensor y = conv2d(x, wt, n.optional_input(2), {w.strides[0], w.strides[1]}, padding, {w.dilations[0], w.dilations[1]}, groups);
  return {one_d ? squeeze(y, {2}) : y};
}

// ConvTranspose (1-, 2- and 3-d): hjit::conv_transpose with the pads auto_pad or output_shape
// imply, output_padding taken off the end padding.
V ConvTranspose(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const Tensor& w = n.input(1);
  if (rank_of(w) != rank_of(x) || rank_of(x) < 3 || rank_of(x) > 5) n.fail("takes 1-, 2- and 3-d inputs with a weight of the same rank");
  const size_t dims = size_t(rank_of(x)) - 2;
  auto ints = [&](const char* name, int64_t fill) {
    std::vector<int64_t> v = n.attr_ints(name, std::vector<int64_t>(dims, fill));
    if (v.size() != dims) n.fail(std::string("its ") + name + " do not match the kernel");
    return v;
  };
  const std::vector<int64_t> strides = ints("strides", 1), dil = ints("dilations", 1), out_pad = ints("output_padding", 0);
  std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * dims, 0));
  if (pads.size() != 2 * dims) n.fail("its pads do not match the kernel");
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  const std::vector<int64_t> out_shape = n.attr_ints("output_shape");
  for (size_t d = 0; d < dims; ++d) {
    const int64_t in = x.shape()[2 + d], k = (w.shape()[2 + d] - 1) * dil[d] + 1;
    int64_t target = -1;
    if (!out_shape.empty()) target = out_shape.at(out_shape.size() - dims + d);
    else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") target = in * strides[d];
    if (target < 0) continue;
    const int64_t total = strides[d] * (in - 1) + out_pad[d] + k - target;
    const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // rounded down, as ONNX's reference
    pads[d] = auto_pad == "SAME_UPPER" ? half : total - half;
    pads[d + dims] = total - pads[d];
  }
  std::vector<int64_t> begin(pads.begin(), pads.begin() + long(dims)), end(pads.begin() + long(dims), pads.end());
  for (size_t d = 0; d < dims; ++d) end[d] -= out_pad[d];
  return {conv_transpose(x, w, n.optional_input(2), strides, begin, end, dil, n.attr_int("group", 1))};
}

// The lowest value of x's dtype: what max pooling pads with.
double lowest_of(DType t) {
  switch (t) {
    case DType::U8: case DType::U16: case DType::U32: case DType::U64: case DType::Bool: return 0;
    case DType::I8: return -128;
    case DType::I16: return -32768;
    case DType::I32: return -2147483648.0;
    case DType::I64: return -9223372036854775808.0;
    default: return -std::numeric_limits<double>::infinity();
  }
}

// MaxPool's Indices: for each window the flat position (over N, C and the spatial axes, row-major;
// column-major spatially with storage_order 1) of its first largest element, by taps as
// pool_by_taps does.
Tensor pool_indices(const NodeContext& n, const Tensor& padded, const Window& w, const Shape& in) {
  const size_t dims = w.kernel.size();
  std::vector<int64_t> out(dims);
  for (size_t d = 0; d < dims; ++d) out[d] = windows_along(w, padded.shape(), d);
  Shape out_shape{in[0], in[1]};
  out_shape.insert(out_shape.end(), out.begin(), out.end());
  const bool column_major = n.attr_int("storage_order", 0) != 0;
  int64_t spatial = 1;
  for (size_t d = 0; d < dims; ++d) spatial *= in[2 + d];
  Tensor best, best_at;
  std::vector<int64_t> tap(dims, 0);
  do {
    Tensor t = padded;
    Tensor at = (iota(out_shape, 0, DType::I64) * in[1] + iota(out_shape, 1, DType::I64)) * spatial;
    int64_t stride = 1;
    for (size_t k = 0; k < dims; ++k) {
      const size_t d = column_major ? k : dims - 1 - k;
      const int64_t start = tap[d] * w.dilations[d];
      t = slice(t, int(2 + d), start, start + (out[d] - 1) * w.strides[d] + 1, w.strides[d]);
      const Tensor pos = iota(out_shape, int(2 + d), DType::I64) * w.strides[d] + (start - w.pads_begin[d]);
      at = at + pos * stride;
      stride *= in[2 + d];
    }
    if (!best.defined()) best = t, best_at = at;
    else best_at = where(t > best, at, best_at), best = maximum(best, t);
  } while (next_tap(tap, w.kernel));
  return best_at;
}

V MaxPool(const NodeContext& n) {
  Tensor x = n.input(0);
  const Shape in_shape = x.shape();
  Window w = window_of(n, x.shape(), n.attr_ints("kernel_shape"), n.attr_int("ceil_mode", 0) != 0);
  x = pad_spatial(x, w, lowest_of(x.dtype()));
  if (n.num_outputs() > 1 && !n.proto().output(1).empty()) return {pool_by_taps(x, w, true), pool_indices(n, x, w, in_shape)};
  const bool plain = rank_of(x) == 4 && is_float(x.dtype()) && w.dilations == std::vector<int64_t>{1, 1};
  if (!plain) return {pool_by_taps(x, w, true)};
  return {max_pool2d(x, {w.kernel[0], w.kernel[1]}, {w.strides[0], w.strides[1]})};
}

// The sum over each window of x padded with zeros, divided by the count of the positions that
// count (the input, and the explicit pads with count_include_pad, never ceil_mode's extra).
V AveragePool(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
  Window w = window_of(n, x.shape(), kernel, n.attr_int("ceil_mode", 0) != 0);
  Window plain = window_of(n, x.shape(), kernel, false);
  Shape ones_shape(x.shape().size(), 1);
  for (size_t d = 2; d < ones_shape.size(); ++d) ones_shape[d] = x.shape()[d];
  Tensor counted = Tensor::ones(ones_shape, x.dtype());
  if (n.attr_int("count_include_pad", 0) != 0) counted = pad_spatial(counted, plain, 1);
  else std::fill(plain.pads_begin.begin(), plain.pads_begin.end(), 0), std::fill(plain.pads_end.begin(), plain.pads_end.end(), 0);
  Window rest = w;  // what is left of w's padding around `counted`
  for (size_t d = 0; d < kernel.size(); ++d) rest.pads_begin[d] -= plain.pads_begin[d], rest.pads_end[d] -= plain.pads_end[d];
  const Tensor sums = pool_by_taps(pad_spatial(x, w, 0), w, false);
  const Tensor counts = pool_by_taps(pad_spatial(counted, rest, 0), w, false);
  return {sums / counts};
}

// MaxUnpool: X's values placed at their Indices (flat over the output) in zeros: each output
// position sums the values whose index names it (one-hot over X's elements).
V MaxUnpool(const NodeContext& n) {
  const Tensor &x = n.input(0), &idx = n.input(1);
  const std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
  const size_t dims = kernel.size();
  if (x.shape().size() != dims + 2 || idx.shape() != x.shape()) n.fail("needs X and I of one shape [N, C, spatial...]");
  // The indices count positions of the default output (as MaxPool gave them); an explicit
  // output_shape places each at the same coordinates of the larger output.
  Shape natural = {x.shape()[0], x.shape()[1]};
  const std::vector<int64_t> strides = n.attr_ints("strides", std::vector<int64_t>(dims, 1));
  const std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * dims, 0));
  for (size_t d = 0; d < dims; ++d) natural.push_back((x.shape()[2 + d] - 1) * strides[d] + kernel[d] - pads[d] - pads[d + dims]);
  Shape out = natural;
  if (n.has_input(2)) {
    const std::vector<int64_t> given = n.input_ints(2);
    out = Shape(given.begin(), given.end());
    if (out.size() != natural.size()) n.fail("its output_shape has the wrong rank");
  }
  int64_t total = 1, natural_total = 1;
  for (int64_t e : out) total *= e;
  for (int64_t e : natural) natural_total *= e;
  Tensor at = check_index(astype(idx, DType::I64), 0, natural_total, "MaxUnpool index");
  if (out != natural) {  // coordinates in the natural output, flattened again in `out`
    Tensor rest = at, flat = Tensor::zeros(at.shape(), DType::I64);
    int64_t out_stride = 1;
    for (size_t d = natural.size(); d-- > 0;) {
      const Tensor q = astype(floor(astype(rest, DType::F64) / double(natural[d])), DType::I64);
      flat = flat + (rest - q * natural[d]) * out_stride;
      rest = q;
      out_stride *= out[d];
    }
    at = flat;
  }
  const Tensor flat_idx = reshape(at, {1, -1});
  const Tensor hit = iota({total, 1}, 0, DType::I64) == flat_idx;  // [total, elements of X]
  const Tensor y = sum(where(hit, reshape(x, {1, -1}), Tensor::scalar(0, x.dtype())), {1});
  return {reshape(y, out)};
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
  const double eps = n.attr_float("epsilon", 1e-5);
  const Tensor scale = per_channel(n.input(1), r), bias = per_channel(n.input(2), r);
  if (n.opset() >= 14 && n.attr_int("training_mode", 0) != 0) {
    // Normalized by the batch's statistics (the variance biased); the running statistics move
    // towards them by 1 - momentum.
    std::vector<int> axes{0};
    for (int d = 2; d < int(r); ++d) axes.push_back(d);
    const Tensor mean_b = mean(x, axes, true), var_b = mean((x - mean_b) * (x - mean_b), axes, true);
    const double momentum = n.attr_float("momentum", 0.9);
    const Tensor y = (x - mean_b) * (rsqrt(var_b + eps) * scale) + bias;
    const Tensor flat_mean = reshape(mean_b, {-1}), flat_var = reshape(var_b, {-1});
    return {y, n.input(3) * momentum + flat_mean * (1 - momentum), n.input(4) * momentum + flat_var * (1 - momentum)};
  }
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
// A softmax of dequantized values (the QDQ form, whose QuantizeLinear usually follows) is
// hjit::softmax's arithmetic written out, its quotient noted (Factored): the quantization then
// multiplies each row by one reciprocal where the two divisions of every element were most of the
// time of an int8 encoder's attention rows (their divider's throughput).
V Softmax(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t r = rank_of(x);
  if (n.opset() < 13 || !n.dequantized_input(0) || x.dtype() != DType::F32 || r == 0) return softmax_like<softmax_axis>(n);
  const int axis = n.axis(n.attr_int("axis", -1), r);
  if (x.shape()[size_t(axis)] == 0) return softmax_like<softmax_axis>(n);
  const Tensor e = exp(x - max(x, {axis}, true));
  const Factored q{e, sum(e, {axis}, true), std::nullopt, true};
  n.note_factored(0, q);
  return {q.expanded()};
}
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
  HJIT_ONNX_OP(MatMul) HJIT_ONNX_OP(Gemm) HJIT_ONNX_OP(Conv) HJIT_ONNX_OP(ConvTranspose) HJIT_ONNX_OP(MaxUnpool) HJIT_ONNX_OP(MaxPool) HJIT_ONNX_OP(AveragePool)
  HJIT_ONNX_OP(GlobalAveragePool) HJIT_ONNX_OP(GlobalMaxPool) HJIT_ONNX_OP(BatchNormalization)
  HJIT_ONNX_OP(InstanceNormalization) HJIT_ONNX_OP(LayerNormalization) HJIT_ONNX_OP(MeanVarianceNormalization)
  HJIT_ONNX_OP(LRN) HJIT_ONNX_OP(Shrink)
#undef HJIT_ONNX_OP
  t["Softmax"] = Softmax;
  t["LogSoftmax"] = softmax_like<log_softmax_axis>;
  t["Hardmax"] = softmax_like<hardmax_axis>;
}

}  // namespace hjit::onnx_import
