// What post-training quantization asks of calibration, shared by hjit::nn::quantize (a module's
// layers) and hjit::onnx::quantize (an ONNX model's activations): the options, and the range of
// one activation over the calibration calls, turned into a u8 scale and zero point.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include <hjit/tensor.h>

namespace hjit {

struct QuantizeOptions {
  enum class Calibration {
    MinMax,      // the activation's whole range over the calibration calls
    Percentile,  // clipped to a percentile of |x| (averaged over the calls): rare outliers cost fewer steps
  };
  Calibration calibration = Calibration::MinMax;
  double percentile = 99.99;  // in (50, 100]
  bool per_channel = true;    // weights: one scale per output channel; false: one per weight

  // ValueError naming `who` when the percentile is out of range.
  void check(const std::string& who) const;
};

class ActivationRange {
 public:
  explicit ActivationRange(const QuantizeOptions& options) : options_(options) {}
  // One calibration value (eager: a traced value is a ValueError naming `where`).
  void observe(const Tensor& x, const std::string& where);
  bool observed() const { return calls_ > 0; }
  // The u8 scale and zero point: the range widened to hold 0 (exact in u8) over 255 steps.
  std::pair<double, int64_t> scale_and_zero_point() const;

 private:
  QuantizeOptions options_;
  double lo_ = 0, hi_ = 0, tails_ = 0;
  int64_t calls_ = 0;
};

// A weight in i8, symmetric: the largest |w| of each slice along `channel_axis` (of the whole
// weight without options.per_channel) is 127 steps. `scale` is f32, one per channel ([channels],
// or a scalar), so that w ~ q * scale along that axis.
struct QuantizedWeight {
  Tensor q, scale;
};
QuantizedWeight quantize_weight(const Tensor& w, int channel_axis, const QuantizeOptions& options);

}  // namespace hjit
