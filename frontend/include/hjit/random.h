// Random numbers as values of the program, as JAX's jax.random: a key (u32[2]) is an ordinary
// tensor, traced like any argument, and every draw is a pure function of the key and the shape
// (Threefry-2x32, JAX's bit layout: random::bits equals jax.random.bits for the same key). A
// jitted function that takes a key draws new numbers for each new key without re-tracing; eager
// and compiled draws are the same numbers. Never reuse a key for two draws: split it.
//
//   Tensor key = hjit::random::key(0);
//   auto [next, sub] = hjit::random::split(key);   // key, subkey = jax.random.split(key)
//   Tensor y = hjit::dropout(sub, x, 0.1);
#pragma once
#include <cstdint>
#include <utility>

#include <hjit/tensor.h>

namespace hjit::random {

// jax.random.PRNGKey(seed): [seed >> 32, seed & 0xffffffff] as u32[2].
Tensor key(uint64_t seed);
// Two new independent keys (jax.random.split(key)), and `num` of them as rows of a u32[num, 2].
std::pair<Tensor, Tensor> split(const Tensor& key);
Tensor split(const Tensor& key, int64_t num);
// Uniform u32 bits of `shape`.
Tensor bits(const Tensor& key, Shape shape);
// Uniform in [lo, hi) (f32: 23 random mantissa bits, as JAX's; f64: 32 random bits).
Tensor uniform(const Tensor& key, Shape shape, DType dtype = DType::F32, double lo = 0, double hi = 1);
// Standard normal (Box-Muller on two independent uniform draws).
Tensor normal(const Tensor& key, Shape shape, DType dtype = DType::F32);
// True with probability p (jax.random.bernoulli), of `shape`.
Tensor bernoulli(const Tensor& key, double p, Shape shape);
// A class index drawn from each row of unnormalized log-probabilities along `axis`
// (jax.random.categorical: the argmax of logits plus Gumbel noise), i64, with that axis removed.
// Sampling a language model's next token: categorical(key, logits / temperature).
Tensor categorical(const Tensor& key, const Tensor& logits, int axis = -1);

}  // namespace hjit::random

namespace hjit {

// Each element kept with probability 1 - p and scaled by 1 / (1 - p), else 0 (inverted dropout).
Tensor dropout(const Tensor& key, const Tensor& x, double p);

// The names before hjit::random (hjit::split is now also the op that cuts a tensor in pieces).
[[deprecated("use hjit::random::key")]] inline Tensor random_key(uint64_t seed) { return random::key(seed); }
[[deprecated("use hjit::random::split (hjit::split(x, sizes, axis) cuts a tensor in pieces)")]] inline std::pair<Tensor, Tensor> split(
    const Tensor& key) {
  return random::split(key);
}
[[deprecated("use hjit::random::split (hjit::split(x, size, axis) cuts a tensor in pieces)")]] inline Tensor split(const Tensor& key,
                                                                                                                  int64_t num) {
  return random::split(key, num);
}
[[deprecated("use hjit::random::bits")]] inline Tensor random_bits(const Tensor& key, Shape shape) {
  return random::bits(key, std::move(shape));
}
[[deprecated("use hjit::random::uniform")]] inline Tensor random_uniform(const Tensor& key, Shape shape, DType dtype = DType::F32,
                                                                         double lo = 0, double hi = 1) {
  return random::uniform(key, std::move(shape), dtype, lo, hi);
}
[[deprecated("use hjit::random::normal")]] inline Tensor random_normal(const Tensor& key, Shape shape, DType dtype = DType::F32) {
  return random::normal(key, std::move(shape), dtype);
}

}  // namespace hjit
