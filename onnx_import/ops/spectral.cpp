// DFT and STFT (opset 17): the transform along one axis as two matrix products with constant
// cosine and sine tables (the length is known when converting), real or complex input (a last
// axis of 1 or 2), inverse and one-sided outputs.
#include <cmath>

#include "onnx_import/ops/ops.h"
#include "onnx_import/tensor_proto.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

// cos and sin of 2 pi t k / n for t < n, k < out: [n, out] each, in f64.
std::pair<Tensor, Tensor> tables(int64_t n, int64_t out) {
  std::vector<double> c(size_t(n * out)), s(size_t(n * out));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < out; ++k) {
      const double a = 2 * M_PI * double((t * k) % std::max<int64_t>(n, 1)) / double(n);
      c[size_t(t * out + k)] = std::cos(a), s[size_t(t * out + k)] = std::sin(a);
    }
  return {Tensor::from_vector<double>(c, {n, out}), Tensor::from_vector<double>(s, {n, out})};
}

// x [..., n, 1|2] transformed along its second-last axis: [..., out, 2].
Tensor transform_last(const NodeContext& n, const Tensor& x, int64_t length, bool inverse, bool onesided) {
  const Shape& s = x.shape();
  const int64_t have = s[s.size() - 2];
  const bool complex = s.back() == 2;
  if (s.back() != 1 && !complex) n.fail("its input's last axis holds the real (1) or real and imaginary (2) parts");
  Tensor xr = astype(squeeze(slice(x, -1, 0, 1), {int(s.size()) - 1}), DType::F64);
  Tensor xi = complex ? astype(squeeze(slice(x, -1, 1, 2), {int(s.size()) - 1}), DType::F64) : Tensor();
  auto fit = [&](const Tensor& t) {  // truncated or zero-padded to the transform's length
    if (have == length) return t;
    if (have > length) return slice(t, -1, 0, length);
    std::vector<std::pair<int64_t, int64_t>> w(t.shape().size(), {0, 0});
    w.back() = {0, length - have};
    return pad(t, w, 0);
  };
  xr = fit(xr);
  if (complex) xi = fit(xi);
  const int64_t out = onesided ? length / 2 + 1 : length;
  const auto [c, sn] = tables(length, out);
  const double sign = inverse ? 1.0 : -1.0;  // e^(sign * i * angle)
  Tensor re = matmul(xr, c), im = matmul(xr, sn) * sign;
  if (complex) re = re - matmul(xi, sn) * sign, im = im + matmul(xi, c);
  if (inverse) re = re / double(length), im = im / double(length);
  return astype(stack({re, im}, -1), x.dtype());
}

V DFT(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t r = int64_t(x.shape().size());
  const int axis = n.axis(n.attr_int("axis", 1), r - 1);
  const int64_t length = n.has_input(1) ? n.input_ints(1).at(0) : x.shape()[size_t(axis)];
  if (length <= 0) n.fail("dft_length must be positive");
  const bool inverse = n.attr_int("inverse", 0) != 0, onesided = n.attr_int("onesided", 0) != 0;
  // The transformed axis moved next to the last (the parts), and back after.
  std::vector<int> perm;
  for (int d = 0; d < r - 1; ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  perm.push_back(int(r - 1));
  Tensor y = transform_last(n, transpose(x, perm), length, inverse, onesided);
  std::vector<int> back(static_cast<size_t>(r));
  for (size_t i = 0; i < perm.size(); ++i) back[size_t(perm[i])] = int(i);
  return {transpose(y, back)};
}

V STFT(const NodeContext& n) {
  const Tensor& x = n.input(0);  // [batch, length, 1|2]
  if (x.shape().size() != 3) n.fail("takes signals [batch, length, 1 or 2]");
  const int64_t step = n.input_ints(1).at(0);
  std::optional<Tensor> window = n.optional_input(2);
  const int64_t frame = n.has_input(3) ? n.input_ints(3).at(0) : window ? window->shape().at(0) : 0;
  const int64_t length = x.shape()[1];
  if (step <= 0 || frame <= 0 || frame > length) n.fail("needs a positive frame_step and a frame_length within the signal");
  const int64_t frames = (length - frame) / step + 1;
  std::vector<int64_t> at;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t t = 0; t < frame; ++t) at.push_back(f * step + t);
  Tensor framed = take(x, Tensor::from_vector<int64_t>(at, {frames, frame}), 1);  // [batch, frames, frame, parts]
  if (window) framed = framed * reshape(*window, {1, 1, frame, 1});
  return {transform_last(n, framed, frame, false, n.attr_int("onesided", 1) != 0)};
}

// MelWeightMatrix: triangular filters between mel-spaced bin edges, [dft_length / 2 + 1, mel bins],
// as ONNX's reference computes them (edges rounded down to spectrogram bins).
V MelWeightMatrix(const NodeContext& n) {
  const int64_t mels = n.input_ints(0).at(0), dft = n.input_ints(1).at(0), rate = n.input_ints(2).at(0);
  const double lo = n.input_doubles(3).at(0), hi = n.input_doubles(4).at(0);
  if (mels <= 0 || dft <= 0 || rate <= 0) n.fail("needs positive num_mel_bins, dft_length and sample_rate");
  const int64_t bins = dft / 2 + 1;
  auto to_mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double lo_mel = to_mel(lo), step = (to_mel(hi) - lo_mel) / double(mels + 2);
  std::vector<int64_t> edge;
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (double(i) * step + lo_mel) / 2595) - 1);
    edge.push_back(int64_t(std::floor(double(dft + 1) * hz / double(rate))));
  }
  std::vector<double> w(size_t(bins * mels), 0.0);
  auto set = [&](int64_t j, int64_t i, double v) {
    if (j < 0 || j >= bins) n.fail("a filter edge falls outside the spectrogram's bins");
    w[size_t(j * mels + i)] = v;
  };
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t left = edge[size_t(i)], center = edge[size_t(i + 1)], right = edge[size_t(i + 2)];
    if (center == left) set(center, i, 1);
    else
      for (int64_t j = left; j <= center; ++j) set(j, i, double(j - left) / double(center - left));
    if (right > center)
      for (int64_t j = center; j < right; ++j) set(j, i, double(right - j) / double(right - center));
  }
  const DType to = dtype_from_onnx(int(n.attr_int("output_datatype", 1)), "hjit::onnx: " + n.where() + " attribute 'output_datatype'");
  return {astype(Tensor::from_vector<double>(w, {bins, mels}), to)};
}

}  // namespace

void add_spectral_ops(ConverterTable& t) {
  t["DFT"] = DFT;
  t["STFT"] = STFT;
  t["MelWeightMatrix"] = MelWeightMatrix;
}

}  // namespace hjit::onnx_import
