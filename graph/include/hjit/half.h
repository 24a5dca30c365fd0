// 16-bit floating point storage types. hjit computes on them in F32 and stores them narrow, as
// PyTorch does on the CPU; these types only convert, they do no arithmetic of their own.
#pragma once
#include <cstdint>
#include <cstring>

namespace hjit {

namespace detail {
inline uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
}  // namespace detail

// IEEE 754 binary16.
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  f16(float f) : bits(from_float(f)) {}
  operator float() const { return to_float(bits); }

  static float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return detail::bits_float(sign | 0x7f800000u | (man << 13));  // inf / nan
    if (exp == 0) {                                                              // zero / subnormal
      if (man == 0) return detail::bits_float(sign);
      float v = float(man) * (1.0f / 16777216.0f);  // man * 2^-24
      return sign ? -v : v;
    }
    return detail::bits_float(sign | ((exp + 112) << 23) | (man << 13));
  }
  // Round to nearest even, with overflow to infinity and gradual underflow.
  static uint16_t from_float(float f) {
    uint32_t u = detail::float_bits(f), sign = (u >> 16) & 0x8000;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return uint16_t(sign | 0x7e00);       // nan
    if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00);      // overflow (>= 65520 rounds to inf)
    if (a < 0x38800000u) {                                     // subnormal or zero in f16
      float v = detail::bits_float(a) * 16777216.0f;           // scale to units of 2^-24
      uint32_t m = uint32_t(v);
      float frac = v - float(m);
      if (frac > 0.5f || (frac == 0.5f && (m & 1))) ++m;  // 1024 carries into the smallest normal
      return uint16_t(sign | m);
    }
    uint32_t exp = ((a >> 23) - 112) << 10, man = (a >> 13) & 0x3ff;
    uint32_t h = exp | man, rest = a & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h += 1;
    return uint16_t(sign | h);
  }
};

// bfloat16: the upper half of an F32.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  bf16(float f) : bits(from_float(f)) {}
  operator float() const { return to_float(bits); }

  static float to_float(uint16_t b) { return detail::bits_float(uint32_t(b) << 16); }
  static uint16_t from_float(float f) {
    uint32_t u = detail::float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet nan
    u += 0x7fff + ((u >> 16) & 1);                                           // round to nearest even
    return uint16_t(u >> 16);
  }
};

}  // namespace hjit
