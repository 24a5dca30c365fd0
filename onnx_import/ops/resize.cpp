// Resize (opsets 10 to 17) and Upsample: every mode (nearest with its four roundings, linear,
// cubic) and coordinate transformation. The output size is known when converting, so each resized
// axis becomes a few taps: constant source indices and weights, one take per tap, summed.
#include <algorithm>
#include <cmath>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

struct Taps {
  std::vector<std::vector<int64_t>> index;  // [tap][output position]
  std::vector<std::vector<double>> weight;
  std::vector<bool> outside;  // tf_crop_and_resize: positions that take extrapolation_value
};

struct AxisResize {
  int64_t in, out;
  double scale, roi_start, roi_end;
  double out_length;  // in * scale before rounding down: what align_corners divides by, as ONNX's reference
};

// Where output position x samples the input, as ONNX's coordinate_transformation_mode says.
double source_coordinate(const NodeContext& n, const std::string& mode, const AxisResize& a, double x) {
  const double L = double(a.in), O = double(a.out), s = a.scale, R = a.out_length;
  if (mode == "half_pixel") return (x + 0.5) / s - 0.5;
  if (mode == "pytorch_half_pixel") return O > 1 ? (x + 0.5) / s - 0.5 : 0.0;
  if (mode == "align_corners") return R == 1 ? 0.0 : x * (L - 1) / (R - 1);
  if (mode == "asymmetric") return x / s;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5) / s;
  if (mode == "tf_crop_and_resize")
    return R > 1 ? a.roi_start * (L - 1) + x * (a.roi_end - a.roi_start) * (L - 1) / (R - 1) : 0.5 * (a.roi_start + a.roi_end) * (L - 1);
  n.fail("has coordinate_transformation_mode '" + mode + "'");
}

double cubic_weight(double d, double A) {  // Keys' kernel at distance |d|
  d = std::abs(d);
  if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
  if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
  return 0;
}

Taps taps_for(const NodeContext& n, const AxisResize& a, const std::string& mode, const std::string& transform,
              const std::string& nearest_mode, double cubic_a, bool exclude_outside) {
  const int64_t last = a.in - 1;
  auto clamp = [&](int64_t i) { return std::min(std::max<int64_t>(i, 0), last); };
  const int count = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  Taps t{std::vector<std::vector<int64_t>>(size_t(count)), std::vector<std::vector<double>>(size_t(count)), {}};
  for (int64_t x = 0; x < a.out; ++x) {
    const double c = source_coordinate(n, transform, a, double(x));
    t.outside.push_back(transform == "tf_crop_and_resize" && (c < 0 || c > double(last)));
    if (mode == "nearest") {
      double r;
      if (nearest_mode == "round_prefer_floor") r = (c == std::floor(c) + 0.5) ? std::floor(c) : std::round(c);
      else if (nearest_mode == "round_prefer_ceil") r = std::round(c);
      else if (nearest_mode == "floor") r = std::floor(c);
      else if (nearest_mode == "ceil") r = std::ceil(c);
      else n.fail("has nearest_mode '" + nearest_mode + "'");
      t.index[0].push_back(clamp(int64_t(r)));
      t.weight[0].push_back(1.0);
      continue;
    }
    const double base = std::floor(c), frac = c - base;
    if (mode == "linear") {
      t.index[0].push_back(clamp(int64_t(base))), t.weight[0].push_back(1 - frac);
      t.index[1].push_back(clamp(int64_t(base) + 1)), t.weight[1].push_back(frac);
      continue;
    }
    double total = 0;
    for (int k = 0; k < 4; ++k) {
      const int64_t i = int64_t(base) - 1 + k;
      double w = cubic_weight(double(i) - c, cubic_a);
      if (exclude_outside && (i < 0 || i > last)) w = 0;
      t.index[size_t(k)].push_back(clamp(i)), t.weight[size_t(k)].push_back(w);
      total += w;
    }
    if (exclude_outside && total != 0)
      for (int k = 0; k < 4; ++k) t.weight[size_t(k)].back() /= total;
  }
  return t;
}

Tensor resize_axis(const Tensor& x, int axis, const Taps& t, double extrapolation) {
  Shape wshape(x.shape().size(), 1);
  wshape[size_t(axis)] = int64_t(t.index[0].size());
  Tensor y;
  for (size_t k = 0; k < t.index.size(); ++k) {
    const Tensor picked = take(x, Tensor::from_vector<int64_t>(t.index[k], Shape{int64_t(t.index[k].size())}), axis);
    if (t.index.size() == 1) {
      y = picked;
      break;
    }
    const Tensor w = astype(reshape(Tensor::from_vector<double>(t.weight[k], Shape{int64_t(t.weight[k].size())}), wshape), x.dtype());
    y = k == 0 ? picked * w : y + picked * w;
  }
  if (std::find(t.outside.begin(), t.outside.end(), true) != t.outside.end()) {
    const Tensor m = reshape(Tensor::from_vector<bool>(t.outside, Shape{int64_t(t.outside.size())}), wshape);
    y = where(m, Tensor::scalar(extrapolation, x.dtype()), y);
  }
  return y;
}

V resize(const NodeContext& n, std::vector<double> scales, std::vector<int64_t> sizes, std::vector<double> roi, std::string mode,
         std::string transform, std::string nearest_mode) {
  Tensor x = n.input(0);
  const size_t r = x.shape().size();
  if (!sizes.empty() && sizes.size() != r) n.fail("has " + std::to_string(sizes.size()) + " sizes for rank " + std::to_string(r));
  if (sizes.empty() && scales.size() != r) n.fail("has " + std::to_string(scales.size()) + " scales for rank " + std::to_string(r));
  if (mode != "nearest" && mode != "linear" && mode != "cubic") n.fail("has mode '" + mode + "' (nearest, linear or cubic)");
  if (!is_float(x.dtype()) && mode != "nearest") n.fail("interpolates floating-point tensors");
  Shape out = x.shape();  // sized before any tap list of its length is made
  for (size_t d = 0; d < r; ++d) {
    if (!sizes.empty()) {
      if (sizes[d] < 0) n.fail("gives a negative output size");
      out[d] = sizes[d];
      continue;
    }
    if (!(scales[d] > 0) || !std::isfinite(scales[d])) n.fail("scales must be positive and finite");
    const double e = std::floor(double(out[d]) * scales[d]);
    if (e > 9.0e15) n.fail("scales an axis of " + std::to_string(out[d]) + " by " + std::to_string(scales[d]) + ": too large");
    out[d] = int64_t(e);
  }
  n.require_fits(out, x.dtype());
  // Axes that shrink first, then those that grow, the innermost first: an upsampled image's rows
  // are interpolated (a gather along the row) before there are more of them, and the outer axis
  // then picks whole rows (LR-ASPP's head, 28x28 to 224x224: the row gathers of 21x28 rows, not
  // of 21x224).
  std::vector<size_t> order(r);
  for (size_t d = 0; d < r; ++d) order[d] = r - 1 - d;
  const Shape in_shape = x.shape();
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return double(out[a]) * double(in_shape[b]) < double(out[b]) * double(in_shape[a]);
  });
  for (size_t d : order) {
    AxisResize a{x.shape()[d], 0, 1.0, 0.0, 1.0, 0.0};
    if (!sizes.empty()) {
      a.out = sizes[d];
      a.scale = a.in ? double(a.out) / double(a.in) : 1.0;
    } else {
      if (!(scales[d] > 0)) n.fail("scales must be positive");
      a.scale = scales[d];
      a.out = int64_t(std::floor(double(a.in) * scales[d]));
    }
    a.out_length = sizes.empty() ? double(a.in) * a.scale : double(a.out);
    if (a.out < 0) n.fail("gives a negative output size");
    if (roi.size() == 2 * r) a.roi_start = roi[d], a.roi_end = roi[d + r];
    if (a.out == a.in && a.scale == 1.0 && transform != "tf_crop_and_resize") continue;
    if (a.in == 0 || a.out == 0) n.fail("cannot resize an axis of " + std::to_string(a.in) + " to " + std::to_string(a.out));
    const Taps t = taps_for(n, a, mode, transform, nearest_mode, n.attr_float("cubic_coeff_a", -0.75), n.attr_int("exclude_outside", 0) != 0);
    x = resize_axis(x, int(d), t, n.attr_float("extrapolation_value", 0.0));
  }
  return {as_dtype(x + scalar_like(x, 0), n.input(0).dtype())};
}

V Resize(const NodeContext& n) {
  const std::string mode = n.attr_string("mode", "nearest");
  if (n.opset() < 11) return resize(n, n.input_doubles(1), {}, {}, mode, "asymmetric", "floor");
  std::vector<double> roi = n.has_input(1) ? n.input_doubles(1) : std::vector<double>{};
  std::vector<double> scales = n.has_input(2) ? n.input_doubles(2) : std::vector<double>{};
  std::vector<int64_t> sizes = n.has_input(3) ? n.input_ints(3) : std::vector<int64_t>{};
  return resize(n, scales, sizes, roi, mode, n.attr_string("coordinate_transformation_mode", "half_pixel"),
                n.attr_string("nearest_mode", "round_prefer_floor"));
}

// Upsample (opsets 7 to 9): Resize with asymmetric coordinates, nearest rounding down.
V Upsample(const NodeContext& n) {
  std::vector<double> scales = n.opset() < 9 ? n.attr_floats("scales") : n.input_doubles(1);
  return resize(n, scales, {}, {}, n.attr_string("mode", "nearest"), "asymmetric", "floor");
}

}  // namespace

void add_resize_ops(ConverterTable& t) {
  t["Resize"] = Resize;
  t["Upsample"] = Upsample;
}

}  // namespace hjit::onnx_import
