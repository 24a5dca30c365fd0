// Random numbers as values of the program, as JAX's jax.random: a key (u32[2]) is an ordinary
// tensor, traced like any argument, and every draw is a pure function of the key and the shape
// (Threefry-2x32, JAX's bit layout: random_bits equals jax.random.bits for the same key). A jitted
// function that takes a key draws new numbers for each new key without re-tracing; eager and
// compiled draws are the same numbers. Never reuse a key for two draws: split it.
//
//   Tensor key = hjit::random_key(0);
//   auto [next, sub] = hjit::split(key);         // key, subkey = jax.random.split(key)
//   Tensor y = hjit::dropout(sub, x, 0.1);
#pragma once
#include <cstdint>
#include <utility>

#include <hjit/tensor.h>

namespace hjit {

// jax.random.PRNGKey(seed): [seed >> 32, seed & 0xffffffff] as u32[2].
Tensor random_key(uint64_t seed);
// Two new independent keys (jax.random.split(key)), and `num` of them as rows of a u32[num, 2].
std::pair<Tensor, Tensor> split(const Tensor& key);
Tensor split(const Tensor& key, int64_t num);
// Uniform u32 bits of `shape`.
Tensor random_bits(const Tensor& key, Shape shape);
// Uniform in [lo, hi) (f32: 23 random mantissa bits, as JAX's; f64: 32 random bits).
Tensor random_uniform(const Tensor& key, Shape shape, DType dtype = DType::F32, double lo = 0, double hi = 1);
// Standard normal (Box-Muller on two independent uniform draws).
Tensor random_normal(const Tensor& key, Shape shape, DType dtype = DType::F32);
// Each element kept with probability 1 - p and scaled by 1 / (1 - p), else 0 (inverted dropout).
Tensor dropout(const Tensor& key, const Tensor& x, double p);

}  // namespace hjit
