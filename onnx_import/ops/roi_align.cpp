// RoiAlign (opsets 10 and 16): each output bin of each region averages (or takes the largest of)
// bilinear samples of the feature map. How many samples a bin takes depends on the regions'
// sizes (sampling_ratio 0), so the regions are read when the model is converted (an initializer,
// or a graph break under fullgraph = false); the samples become one gather of the feature map with
// constant indices, weighted, and a sum or max over each bin's taps.
#include <array>
#include <cmath>
#include <limits>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

struct Taps {
  std::vector<int64_t> index;  // [bins, samples, 4] flat positions in the [N * H * W] map
  std::vector<double> weight;  // the same, 0 for a sample outside the map
  int64_t samples = 0;         // per bin (the most of any region; regions with fewer pad with 0 weights)
  std::vector<double> count;   // [bins]: the samples a bin averages
};

// One bilinear sample at (y, x) of an H x W map: four corners and their weights (ONNX's
// reference: outside [-1, H] x [-1, W] contributes nothing, the last row and column clamp).
void sample(double y, double x, int64_t h, int64_t w, int64_t base, int64_t* idx, double* wt) {
  if (y < -1.0 || y > double(h) || x < -1.0 || x > double(w)) {
    for (int k = 0; k < 4; ++k) idx[k] = base, wt[k] = 0;
    return;
  }
  y = std::max(y, 0.0), x = std::max(x, 0.0);
  int64_t y0 = int64_t(y), x0 = int64_t(x), y1, x1;
  if (y0 >= h - 1) y1 = y0 = h - 1, y = double(y0);
  else y1 = y0 + 1;
  if (x0 >= w - 1) x1 = x0 = w - 1, x = double(x0);
  else x1 = x0 + 1;
  const double ly = y - double(y0), lx = x - double(x0), hy = 1 - ly, hx = 1 - lx;
  const int64_t at[4] = {y0 * w + x0, y0 * w + x1, y1 * w + x0, y1 * w + x1};
  const double by[4] = {hy * hx, hy * lx, ly * hx, ly * lx};
  for (int k = 0; k < 4; ++k) idx[k] = base + at[k], wt[k] = by[k];
}

V RoiAlign(const NodeContext& n) {
  const Tensor& x = n.input(0);
  if (x.shape().size() != 4) n.fail("needs a feature map [N, C, H, W], given " + shape_str(x.shape()));
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const std::vector<double> rois = n.input_doubles(1);
  const std::vector<int64_t> batch = n.input_ints(2);
  const int64_t R = int64_t(batch.size());
  if (int64_t(rois.size()) != 4 * R) n.fail("needs rois [R, 4] for its " + std::to_string(R) + " batch indices");
  const int64_t ph = n.attr_int("output_height", 1), pw = n.attr_int("output_width", 1), ratio = n.attr_int("sampling_ratio", 0);
  const double scale = n.attr_float("spatial_scale", 1.0);
  const bool half_pixel = n.attr_string("coordinate_transformation_mode", n.opset() >= 16 ? "half_pixel" : "output_half_pixel") == "half_pixel";
  const std::string mode = n.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") n.fail("has mode '" + mode + "' (avg or max)");
  if (ph < 1 || pw < 1 || ratio < 0) n.fail("needs output sizes of at least 1 and a sampling_ratio of at least 0");
  // Each region's grid: its samples per bin along each axis.
  std::vector<std::array<double, 6>> geo;  // start_y, start_x, bin_h, bin_w, grid_h, grid_w
  int64_t most = 1;
  for (int64_t r = 0; r < R; ++r) {
    if (batch[size_t(r)] < 0 || batch[size_t(r)] >= N) n.fail<IndexError>("has a batch index outside the " + std::to_string(N) + " images");
    const double off = half_pixel ? 0.5 : 0.0;
    const double x0 = rois[size_t(4 * r)] * scale - off, y0 = rois[size_t(4 * r + 1)] * scale - off;
    double rw = rois[size_t(4 * r + 2)] * scale - off - x0, rh = rois[size_t(4 * r + 3)] * scale - off - y0;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / double(ph), bw = rw / double(pw);
    const double gh = ratio > 0 ? double(ratio) : std::ceil(rh / double(ph)), gw = ratio > 0 ? double(ratio) : std::ceil(rw / double(pw));
    if (!(gh * gw < 1e6)) n.fail("samples a region more than a million times per bin");
    geo.push_back({y0, x0, bh, bw, gh, gw});
    most = std::max(most, int64_t(gh * gw));
  }
  Taps t;
  t.samples = most;
  const int64_t bins = R * ph * pw;
  t.index.assign(size_t(bins * most * 4), 0), t.weight.assign(t.index.size(), 0.0), t.count.assign(size_t(bins), 1.0);
  for (int64_t r = 0; r < R; ++r) {
    const auto [y0, x0, bh, bw, gh, gw] = geo[size_t(r)];
    for (int64_t i = 0; i < ph; ++i)
      for (int64_t j = 0; j < pw; ++j) {
        const int64_t bin = (r * ph + i) * pw + j;
        t.count[size_t(bin)] = std::max(gh * gw, 1.0);
        int64_t s = 0;
        for (int64_t iy = 0; iy < int64_t(gh); ++iy)
          for (int64_t ix = 0; ix < int64_t(gw); ++ix, ++s) {
            const double y = y0 + double(i) * bh + (double(iy) + 0.5) * bh / gh, xx = x0 + double(j) * bw + (double(ix) + 0.5) * bw / gw;
            const size_t at = size_t((bin * most + s) * 4);
            sample(y, xx, H, W, batch[size_t(r)] * H * W, &t.index[at], &t.weight[at]);
          }
      }
  }
  // The map as rows of channels, gathered at every tap: [bins, samples, 4, C].
  const Tensor rows = reshape(transpose(x, {0, 2, 3, 1}), {N * H * W, C});
  const Tensor taps = reshape(take(rows, Tensor::from_vector<int64_t>(t.index, Shape{int64_t(t.index.size())}), 0), {bins, most, 4, C});
  const Tensor weights = astype(Tensor::from_vector<double>(t.weight, Shape{bins, most, 4, 1}), x.dtype());
  Tensor y;
  if (mode == "avg") {
    const Tensor count = astype(Tensor::from_vector<double>(t.count, Shape{bins, 1}), x.dtype());
    y = sum(taps * weights, {1, 2}) / count;
  } else {
    // ONNX's reference: the largest weighted corner of each sample, the largest sample of each bin
    // (padded samples of a region with fewer are copies of a real one's weights of 0: skipped).
    Tensor best = max(taps * weights, {2});  // [bins, samples, C]
    std::vector<double> real(size_t(bins * most), 0.0);
    for (int64_t b = 0; b < bins; ++b)
      for (int64_t s = 0; s < int64_t(t.count[size_t(b)]); ++s) real[size_t(b * most + s)] = 1.0;
    const Tensor is_real = Tensor::from_vector<double>(real, Shape{bins, most, 1}) > 0.5;
    y = max(where(is_real, best, -std::numeric_limits<double>::infinity()), {1});
  }
  return {transpose(reshape(y, {R, ph, pw, C}), {0, 3, 1, 2})};
}

}  // namespace

void add_roi_align_ops(ConverterTable& t) { t["RoiAlign"] = RoiAlign; }

}  // namespace hjit::onnx_import
