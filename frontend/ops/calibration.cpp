// Calibration ranges for post-training quantization (calibration.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include <hjit/calibration.h>
#include <hjit/error.h>
#include <hjit/ops.h>

namespace hjit {

namespace {

double percentile_of_abs(std::vector<float> v, double pct) {
  if (v.empty()) return 0;
  for (float& x : v) x = std::abs(x);
  const size_t k = std::min(v.size() - 1, size_t(std::floor(pct / 100.0 * double(v.size() - 1))));
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
  return v[k];
}

}  // namespace

void QuantizeOptions::check(const std::string& who) const {
  if (calibration == Calibration::Percentile && !(percentile > 50 && percentile <= 100))
    throw ValueError(who + ": the percentile must be in (50, 100], got " + std::to_string(percentile));
}

void ActivationRange::observe(const Tensor& x, const std::string& where) {
  if (x.is_traced())
    throw ValueError("hjit: calibrating " + where + " inside a traced function: calibration reads the values, so run the model "
                     "eagerly (call it directly, not through jit)");
  const std::vector<float> v = x.astype(DType::F32).to_vector<float>();
  for (float e : v)
    if (std::isfinite(e)) lo_ = std::min(lo_, double(e)), hi_ = std::max(hi_, double(e));
  if (options_.calibration == QuantizeOptions::Calibration::Percentile) tails_ += percentile_of_abs(v, options_.percentile);
  ++calls_;
}

std::pair<double, int64_t> ActivationRange::scale_and_zero_point() const {
  double lo = lo_, hi = hi_;
  if (options_.calibration == QuantizeOptions::Calibration::Percentile && calls_ > 0) {
    // One-sided where the values are (a relu's output).
    const double tail = tails_ / double(calls_);
    hi = std::min(hi, tail);
    lo = std::max(lo, -tail);
  }
  double scale = (hi - lo) / 255.0;
  if (!(scale > 0) || !std::isfinite(scale)) scale = 1.0;
  const double zp = std::clamp(std::nearbyint(-lo / scale), 0.0, 255.0);
  return {scale, int64_t(zp)};
}

QuantizedWeight quantize_weight(const Tensor& weight, int channel_axis, const QuantizeOptions& options) {
  const Tensor w = weight.astype(DType::F32);
  std::vector<int> reduce;
  for (int d = 0; d < w.ndim(); ++d)
    if (d != channel_axis || !options.per_channel) reduce.push_back(d);
  const Tensor amax = max(abs(w), reduce, true);
  const Tensor scale = where(amax > 0, amax / 127.0, Tensor::scalar(1.0f));
  return {clamp(round(w / scale), -127, 127).astype(DType::I8),
          options.per_channel ? scale.reshape({w.dim(channel_axis)}) : scale.reshape({})};
}

}  // namespace hjit
