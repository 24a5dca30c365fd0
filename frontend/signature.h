// The signature of a call: for each tensor argument its position, dtype and shape, plus the values
// of the static arguments. jit() and grad() cache on it.
#pragma once
#include <string>
#include <vector>

#include <hjit/jit.h>

namespace hjit::detail {

struct Signature {
  uint64_t hash = 0;
  std::vector<int64_t> sig;  // per tensor: argument position, dtype, rank, dims
  StaticKey statics;

  // The hash of a call's signature (allocation-free: the hot path of a cached call). Throws
  // ValueError for an undefined tensor or a tracer whose trace has ended.
  static uint64_t hash_of(const CallArgs& a, const std::string& fn);
  static Signature of(const CallArgs& a, uint64_t hash);
  bool matches(const CallArgs& a) const;
  // What differs from another signature, for the log line of a cache miss.
  std::string describe_change_to(const Signature& now) const;
};

}  // namespace hjit::detail
