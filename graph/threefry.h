// The definition of the random_bits op, shared by its eager kernel and its Halide lowering (they
// instantiate it with uint32_t and with Halide::Expr): Threefry-2x32 with 20 rounds (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011), laid out over the elements exactly as
// JAX's threefry_random_bits lays out 32-bit draws, so that hjit::random::bits(key, shape) equals
// jax.random.bits(key, shape) for the same key.
#pragma once
#include <cstdint>
#include <utility>

namespace hjit::threefry {

// Keys are u32[2]; a draw of n elements may not exceed 2^32 counters (as JAX's).
inline constexpr int64_t kMaxElements = int64_t(1) << 32;

inline constexpr int kRounds = 20;
inline constexpr uint32_t kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};  // round r rotates by [r % 8]
inline constexpr uint32_t kParity = 0x1BD11BDAu;  // the third key word: k0 ^ k1 ^ kParity

// Threefry-2x32-20 of counter (x0, x1) under key (k0, k1): after every fourth round r, the key
// words ks[(r / 4 + 1) % 3] and ks[(r / 4 + 2) % 3] + r / 4 + 1 are added. U is uint32_t or an
// expression type with wrapping 32-bit unsigned +, ^, << and >>; `bind` names an intermediate
// value (expressions: a let, so that the rounds stay a chain, not a tree doubling every round).
template <class U, class Bind>
std::pair<U, U> threefry2x32(const U& k0, const U& k1, U x0, U x1, Bind bind) {
  const U ks[3] = {bind(k0), bind(k1), bind(k0 ^ k1 ^ U(kParity))};
  x0 = bind(x0 + ks[0]);
  x1 = bind(x1 + ks[1]);
  for (int r = 0; r < kRounds; ++r) {
    const uint32_t rot = kRotations[r % 8];
    x0 = bind(x0 + x1);
    x1 = bind(((x1 << rot) | (x1 >> (32 - rot))) ^ x0);
    if (r % 4 == 3) {
      const uint32_t g = uint32_t(r / 4);
      x0 = bind(x0 + ks[(g + 1) % 3]);
      x1 = bind(x1 + ks[(g + 2) % 3] + U(g + 1));
    }
  }
  return {x0, x1};
}
inline std::pair<uint32_t, uint32_t> threefry2x32(uint32_t k0, uint32_t k1, uint32_t x0, uint32_t x1) {
  return threefry2x32(k0, k1, x0, x1, [](uint32_t v) { return v; });
}

// JAX's layout of n draws: the counters 0..n-1 (padded with a 0 to an even count) are split in two
// halves that form the pairs; the first output words come first, then the second ones. Element i
// is word `second` of the pair (c0, c1). I is the index type (an integer, or an expression made
// from a constant by `konst`).
template <class I, class Konst, class Select>
void counter_of(const I& i, int64_t n, Konst konst, Select select, I* c0, I* c1, I* second) {
  const I h = konst((n + 1) / 2);
  const auto first_half = i < h;
  *second = !first_half;
  *c0 = select(first_half, i, i - h);
  *c1 = select(first_half, select(i + h < konst(n), i + h, konst(0)), i);
}

}  // namespace hjit::threefry
