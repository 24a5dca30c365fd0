// GridSample (opset 16): each output position samples the input at a grid point, with PyTorch's
// grid_sample semantics (which ONNX's test data follow): bilinear, nearest or bicubic; zeros,
// border or reflection padding; align_corners. The grid is data, so each tap is a gather of the
// input flattened per (batch, channel) at data-dependent positions, weighted and masked.
#include <array>
#include <cmath>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

// A grid coordinate in [-1, 1] as a position along an axis of `size`.
Tensor unnormalize(const Tensor& g, int64_t size, bool align) {
  return align ? (g + 1.0) * (0.5 * double(size - 1)) : ((g + 1.0) * double(size) - 1.0) * 0.5;
}

// x reflected into [lo, hi] (PyTorch's reflect_coordinates), any number of times.
Tensor reflect(const Tensor& x, double lo, double hi) {
  if (hi <= lo) return x * 0.0 + lo;
  const double span = hi - lo;
  const Tensor d = abs(x - lo);
  const Tensor flips = floor(d / span);
  const Tensor rest = d - flips * span;
  const Tensor even = flips - floor(flips * 0.5) * 2.0 < 0.5;
  return where(even, rest + lo, hi - rest);
}

Tensor clip(const Tensor& x, int64_t size) { return clamp(x, 0.0, double(size - 1)); }

// What padding does to a coordinate before bilinear and nearest sampling.
Tensor pad_coordinate(const Tensor& x, int64_t size, const std::string& padding, bool align) {
  if (padding == "border") return clip(x, size);
  if (padding == "reflection") return clip(align ? reflect(x, 0, double(size - 1)) : reflect(x, -0.5, double(size) - 0.5), size);
  return x;
}

struct Sampler {
  Tensor flat;  // [N, C, H * W]
  int64_t N, C, H, W, positions;
  std::string padding;
  bool align;

  // The input at integer positions (yi, xi) of shape [N, 1, P] (f64), out-of-range taps 0 with zeros
  // padding; bicubic taps are moved inside first by border and reflection padding.
  Tensor at(const Tensor& yi, const Tensor& xi, bool pad_taps) const {
    Tensor y = yi, x = xi;
    if (pad_taps && padding != "zeros") y = pad_coordinate(y, H, padding, align), x = pad_coordinate(x, W, padding, align);
    const Tensor inside = logical_and(logical_and(y >= 0.0, y <= double(H - 1)), logical_and(x >= 0.0, x <= double(W - 1)));
    const Tensor index = astype(clip(y, H) * double(W) + clip(x, W), DType::I64);
    const Tensor full = broadcast_to(index, {N, C, positions});
    Tensor flat_index = full + iota({N, C, positions}, 1, DType::I64) * (H * W) + iota({N, C, positions}, 0, DType::I64) * (C * H * W);
    const Tensor v = take(reshape(flat, {-1}), flat_index, 0);
    return where(inside, v, Tensor::scalar(0, flat.dtype()));
  }
};

// The four cubic weights of the taps at floor(t) - 1 + k for the fraction f = t - floor(t).
std::array<Tensor, 4> cubic_weights(const Tensor& f) {
  const double A = -0.75;
  auto near = [&](const Tensor& d) { return ((d * (A + 2)) - (A + 3)) * d * d + 1.0; };
  auto far = [&](const Tensor& d) { return ((d * A - 5 * A) * d + 8 * A) * d - 4 * A; };
  return {far(f + 1.0), near(f), near(1.0 - f), far(2.0 - f)};
}

V GridSample(const NodeContext& n) {
  const Tensor &x = n.input(0), &grid = n.input(1);
  if (x.shape().size() != 4 || grid.shape().size() != 4 || grid.shape()[3] != 2 || grid.shape()[0] != x.shape()[0])
    n.fail("samples [N, C, H, W] at a grid [N, H_out, W_out, 2]");
  const std::string mode = n.attr_string("mode", "bilinear"), padding = n.attr_string("padding_mode", "zeros");
  const bool align = n.attr_int("align_corners", 0) != 0;
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") n.fail("has mode '" + mode + "'");
  if (padding != "zeros" && padding != "border" && padding != "reflection") n.fail("has padding_mode '" + padding + "'");
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3], Ho = grid.shape()[1], Wo = grid.shape()[2];
  const Sampler s{reshape(astype(x, DType::F64), {N, C, H * W}), N, C, H, W, Ho * Wo, padding, align};
  const Tensor g = reshape(astype(grid, DType::F64), {N, 1, Ho * Wo, 2});
  Tensor gx = unnormalize(reshape(slice(g, 3, 0, 1), {N, 1, Ho * Wo}), W, align);
  Tensor gy = unnormalize(reshape(slice(g, 3, 1, 2), {N, 1, Ho * Wo}), H, align);
  Tensor out;
  if (mode == "bicubic") {
    const Tensor x0 = floor(gx), y0 = floor(gy);
    const std::array<Tensor, 4> wx = cubic_weights(gx - x0), wy = cubic_weights(gy - y0);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        const Tensor tap = s.at(y0 + double(i - 1), x0 + double(j - 1), true) * (wy[size_t(i)] * wx[size_t(j)]);
        out = out.defined() ? out + tap : tap;
      }
  } else {
    gx = pad_coordinate(gx, W, padding, align), gy = pad_coordinate(gy, H, padding, align);
    if (mode == "nearest") {
      out = s.at(round(gy), round(gx), false);  // half to even, as numpy's and PyTorch's nearbyint
    } else {
      const Tensor x0 = floor(gx), y0 = floor(gy), fx = gx - x0, fy = gy - y0;
      out = s.at(y0, x0, false) * ((1.0 - fy) * (1.0 - fx)) + s.at(y0, x0 + 1.0, false) * ((1.0 - fy) * fx) +
            s.at(y0 + 1.0, x0, false) * (fy * (1.0 - fx)) + s.at(y0 + 1.0, x0 + 1.0, false) * (fy * fx);
    }
  }
  return {astype(reshape(out, {N, C, Ho, Wo}), x.dtype())};
}

}  // namespace

void add_grid_sample_ops(ConverterTable& t) { t["GridSample"] = GridSample; }

}  // namespace hjit::onnx_import
