// The signature of a call: for each tensor argument its position, dtype and shape, plus the values
// of the static arguments. jit() and grad() cache on it.
#pragma once
#include <string>
#include <vector>

#include <hjit/detail/tracing.h>

namespace hjit::detail {

// jit's dynamic_dims: {argument, axis} pairs whose extents leave the key.
using DynamicDims = std::vector<std::pair<int, int>>;

struct Signature {
  uint64_t hash = 0;
  std::vector<int64_t> sig;  // per tensor: argument position, dtype, rank, dims (-1: any size)
  StaticKey statics;
  int64_t autocast = -1;  // the autocast dtype in force at the call (hjit/autocast.h); -1: none

  // The hash of a call's signature (allocation-free: the hot path of a cached call). Throws
  // ValueError for an undefined tensor or a tracer whose trace has ended. With `dynamic`, its
  // dimensions are left out (-1).
  static uint64_t hash_of(const CallArgs& a, const std::string& fn, const DynamicDims* dynamic = nullptr);
  static Signature of(const CallArgs& a, uint64_t hash, const DynamicDims* dynamic = nullptr);
  bool matches(const CallArgs& a) const;
  // Whether tensor i's dimension d (of rank `rank`) is one of `dynamic`'s.
  static bool is_dynamic(const CallArgs& a, size_t i, int d, int rank, const DynamicDims* dynamic);
  // What differs from another signature, for the log line of a cache miss.
  std::string describe_change_to(const Signature& now) const;
};

}  // namespace hjit::detail
