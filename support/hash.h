// A small incremental hash (64-bit FNV-1a over the bytes, with a final avalanche).
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace hjit {

class Hasher {
 public:
  Hasher& add_bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ b[i]) * 0x100000001b3ull;
    return *this;
  }
  template <class T>
  Hasher& add(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    if constexpr ((std::is_integral_v<T> || std::is_enum_v<T>) && sizeof(T) <= 8) {
      // A word at a time: a call's signature (dtypes and dims) is hashed on every jitted call.
      h_ = (h_ ^ static_cast<uint64_t>(v)) * 0x100000001b3ull;
      h_ ^= h_ >> 29;
      return *this;
    } else {
      return add_bytes(&v, sizeof(T));
    }
  }
  Hasher& add_string(std::string_view s) { return add(s.size()).add_bytes(s.data(), s.size()); }
  template <class R>
  Hasher& add_range(const R& r) {
    add(size_t(std::size(r)));
    for (const auto& x : r) add(x);
    return *this;
  }
  uint64_t value() const {
    uint64_t z = h_ + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

// 128 bits of a fast hash of a byte range, for checksums and content keys of large buffers (cache
// entries, constants): four independent 64-bit lanes of xxHash64's round, 32 bytes a step, so
// that a megabyte takes well under a millisecond (Hasher takes a multiply per byte).
struct Hash128 {
  uint64_t lo = 0, hi = 0;
};
inline Hash128 hash128(const void* data, size_t n, uint64_t seed = 0) {
  constexpr uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full, P3 = 0x165667B19E3779F9ull,
                     P4 = 0x85EBCA77C2B2AE63ull;
  auto rotl = [](uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  auto round = [&](uint64_t acc, uint64_t word) { return rotl(acc + word * P2, 31) * P1; };
  auto avalanche = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t a = seed + P1 + P2, b = seed + P2, c = seed, d = seed - P1;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    a = round(a, w[0]), b = round(b, w[1]), c = round(c, w[2]), d = round(d, w[3]);
  }
  uint64_t tail[4] = {0, 0, 0, 0};
  std::memcpy(tail, p + i, n - i);
  a = round(a, tail[0]), b = round(b, tail[1]), c = round(c, tail[2]), d = round(d, tail[3] ^ uint64_t(n));
  return Hash128{avalanche(a ^ rotl(c, 17) ^ P3), avalanche(b ^ rotl(d, 29) ^ P4 ^ uint64_t(n))};
}

}  // namespace hjit
