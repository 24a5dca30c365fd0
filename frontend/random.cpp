// Seeded random tensors. Element i depends only on (seed, i), so the values do not depend on the
// number of threads.
#include <cmath>

#include <hjit/ops.h>
#include <hjit/tensor.h>

#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"

namespace hjit {
namespace {

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A uniform double in (0, 1) from the 53 high bits.
double unit(uint64_t bits) { return (double(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

template <class F>
Tensor generate(Shape shape, DType dtype, F value) {
  Tensor f64 = detail::make_tensor(TensorType{DType::F64, std::move(shape)});
  double* p = static_cast<double*>(f64.impl()->data());
  const int64_t n = f64.numel();
#pragma omp parallel for schedule(static) if (n >= (1 << 15))
  for (int64_t i = 0; i < n; ++i) p[i] = value(i);
  return dtype == DType::F64 ? f64 : astype(f64, dtype);
}

}  // namespace

Tensor Tensor::randn(Shape shape, uint64_t seed, DType dtype) {
  const uint64_t s = mix(seed ^ 0x5eed);
  return generate(std::move(shape), dtype, [s](int64_t i) {
    // Box-Muller on two independent uniforms of element i.
    uint64_t a = mix(s + 2 * uint64_t(i)), b = mix(s + 2 * uint64_t(i) + 1);
    return std::sqrt(-2.0 * std::log(unit(a))) * std::cos(2.0 * M_PI * unit(b));
  });
}

Tensor Tensor::uniform(Shape shape, uint64_t seed, double lo, double hi, DType dtype) {
  if (!(hi >= lo)) throw ValueError("uniform: needs lo <= hi, got lo=" + std::to_string(lo) + " hi=" + std::to_string(hi));
  const uint64_t s = mix(seed ^ 0x0ddba11);
  return generate(std::move(shape), dtype, [=](int64_t i) { return lo + (hi - lo) * unit(mix(s + uint64_t(i))); });
}

}  // namespace hjit
