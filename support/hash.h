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
    return add_bytes(&v, sizeof(T));
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

}  // namespace hjit
