// Symmetric quantization as hjit's narrow weights and caches store values: each run along `axis`
// scaled so that its largest magnitude is level `top` (a run of zeros has scale 1), every value
// rounded to the nearest level. Shared by weight-only weights (weight_only.cpp) and the i8
// key/value cache (generation.cpp).
#pragma once
#include <utility>

#include <hjit/ops.h>

namespace hjit::nn {

// {levels (f32, whole numbers in [-top, top]), scales (f32, `axis` kept as 1)} of f32 x.
inline std::pair<Tensor, Tensor> symmetric_levels(const Tensor& x, int axis, double top) {
  const Tensor range = max(abs(x), {axis}, true);
  const Tensor scale = where(range > 0.0, range / top, 1.0).astype(DType::F32);
  return {clamp(round(x / scale), -top, top), scale};
}

}  // namespace hjit::nn
