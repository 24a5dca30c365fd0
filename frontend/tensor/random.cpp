// Seeded random tensors. Element i depends only on (seed, i), so the values do not depend on the
// number of threads.
#include <cmath>
#include <limits>

#include <hjit/ops.h>
#include <hjit/random.h>
#include <hjit/tensor.h>

#include "frontend/tensor/dispatch.h"
#include "frontend/tensor/tensor_impl.h"
#include "support/thread_pool.h"

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
  parallel_loop(n, n >= (1 << 15), [&](int64_t i) { p[i] = value(i); });
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

// ---- keyed draws (hjit/random.h): graph ops, so traced keys stay traced
namespace hjit::random {
Tensor key(uint64_t seed) {
  return Tensor::from_vector(std::vector<uint32_t>{uint32_t(seed >> 32), uint32_t(seed & 0xffffffffu)});
}

Tensor bits(const Tensor& key, Shape shape) {
  return detail::apply(OpKind::RandomBits, {key}, Attrs{{"shape", std::vector<int64_t>(shape.begin(), shape.end())}});
}

Tensor split(const Tensor& key, int64_t num) {
  if (num < 0) throw ValueError("random::split: cannot make " + std::to_string(num) + " keys");
  return bits(key, {num * 2}).reshape({num, 2});
}

std::pair<Tensor, Tensor> split(const Tensor& key) {
  Tensor keys = random::split(key, 2);
  return {slice(keys, 0, 0, 1).reshape({2}), slice(keys, 0, 1, 2).reshape({2})};
}

Tensor uniform(const Tensor& key, Shape shape, DType dtype, double lo, double hi) {
  if (!is_floating(dtype)) throw DTypeError("random::uniform: needs a float dtype, got " + std::string(dtype_name(dtype)));
  if (!(hi >= lo)) throw ValueError("random::uniform: needs lo <= hi, got lo=" + std::to_string(lo) + " hi=" + std::to_string(hi));
  Tensor b = bits(key, shape).astype(DType::F64);
  // f32 (and the 16-bit floats): the top 23 bits as a mantissa, [0, 1) in steps of 2^-23 (what
  // JAX's bitcast of bits >> 9 | 1.0f gives); f64: all 32 bits, in steps of 2^-32.
  Tensor unit = dtype == DType::F64 ? b * std::ldexp(1.0, -32) : floor(b * (1.0 / 512)) * std::ldexp(1.0, -23);
  Tensor u = unit.astype(dtype);
  if (lo == 0 && hi == 1) return u;
  return maximum(u * (hi - lo) + lo, lo);  // JAX's max(minval, ...): rounding stays in range
}

Tensor normal(const Tensor& key, Shape shape, DType dtype) {
  if (!is_floating(dtype)) throw DTypeError("random::normal: needs a float dtype, got " + std::string(dtype_name(dtype)));
  auto [k1, k2] = random::split(key);
  Tensor u1 = uniform(k1, shape, DType::F64), u2 = uniform(k2, shape, DType::F64);
  return (sqrt(log(1.0 - u1) * -2.0) * cos(u2 * (2.0 * M_PI))).astype(dtype);
}

Tensor bernoulli(const Tensor& key, double p, Shape shape) {
  if (!(p >= 0 && p <= 1)) throw ValueError("random::bernoulli: p must be in [0, 1], got " + std::to_string(p));
  return uniform(key, std::move(shape), DType::F32) < p;
}

Tensor categorical(const Tensor& key, const Tensor& logits, int axis) {
  if (!is_floating(logits.dtype()))
    throw DTypeError("random::categorical: the logits must be floating point, got " + TensorType{logits.dtype(), logits.shape()}.str());
  if (logits.ndim() == 0) throw ShapeError("random::categorical: the logits need at least one dimension (the classes)");
  // Gumbel noise -log(-log(u)), u in (0, 1): the argmax of logits + noise is a draw from
  // softmax(logits) (jax.random.categorical). u from the open interval: log(0) would win every draw.
  const DType t = logits.dtype() == DType::F64 ? DType::F64 : DType::F32;
  const Tensor u = uniform(key, logits.shape(), t, std::numeric_limits<float>::min(), 1.0);
  return argmax(logits.astype(t) - log(-log(u)), axis);
}

}  // namespace hjit::random

namespace hjit {

Tensor dropout(const Tensor& key, const Tensor& x, double p) {
  if (!(p >= 0 && p < 1)) throw ValueError("dropout: p must be in [0, 1), got " + std::to_string(p));
  if (!is_floating(x.dtype())) throw DTypeError("dropout: needs a float tensor, got " + TensorType{x.dtype(), x.shape()}.str());
  if (p == 0) return x;
  Tensor keep = random::uniform(key, x.shape(), DType::F32) >= p;
  return where(keep, x * (1.0 / (1.0 - p)), 0.0);
}

}  // namespace hjit
