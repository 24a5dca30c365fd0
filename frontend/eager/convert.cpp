// dtype conversion and the source ops (fill, iota).
#include <limits>

#include "frontend/eager/loops.h"
#include "support/thread_pool.h"

namespace hjit::eager {
namespace {

// A float truncated to the signed integer type W, or W's lowest value for NaN and out of range
// (what x86's cvtt instructions give, and so PyTorch; C++ leaves it undefined).
template <class W, class F>
inline W truncate_to(F v) {
  const F limit = F(std::ldexp(1.0, int(sizeof(W)) * 8 - 1));
  return (v > -limit - F(1) && v < limit) ? static_cast<W>(v) : std::numeric_limits<W>::min();
}

// A float converted to an integer type as PyTorch does on x86: truncated to i32 (i64 for the
// 64-bit and u32 targets, u64 above 2^63 by way of subtracting it), then wrapped to the type.
// The compiled code does the same (halide_backend/lowering/lower_ops.cpp, float_to_int).
template <class To, class F>
inline To float_to_int(F v) {
  if constexpr (std::is_same_v<To, uint64_t>) {
    const F two63 = F(std::ldexp(1.0, 63));
    if (v >= two63 && v < two63 * F(2)) return uint64_t(truncate_to<int64_t>(v - two63)) + (uint64_t(1) << 63);
    return uint64_t(truncate_to<int64_t>(v));
  } else if constexpr (sizeof(To) == 8 || std::is_same_v<To, uint32_t>) {
    return static_cast<To>(truncate_to<int64_t>(v));
  } else {
    return static_cast<To>(truncate_to<int32_t>(v));
  }
}

// One element converted like a C++ cast, except that anything to bool means "is nonzero" (NaN
// is), the 16-bit floats go through f32, and floats become integers as float_to_int says.
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) return v != From(0);
  else if constexpr (std::is_same_v<To, f16> || std::is_same_v<To, bf16>) return To(float(v));
  else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) return float_to_int<To>(v);
  else return static_cast<To>(v);
}

}  // namespace

void Cast(const KernelArgs& a) {
  const int64_t n = a.out.type->numel();
  dispatch_all(a.in[0].type->dtype, [&](auto from) {
    using F = typename decltype(from)::type;
    dispatch_all(a.out.type->dtype, [&](auto to) {
      using T = typename decltype(to)::type;
      const F* x = static_cast<const F*>(a.in[0].data);
      T* o = static_cast<T*>(a.out.data);
      parallel_loop(n, n >= kParallelGrain, [&](int64_t i) { o[i] = convert<T>(C<F>(x[i])); });
    });
  });
}

void Full(const KernelArgs& a) {
  const double v = a.attrs.f("value");
  const int64_t n = a.out.type->numel();
  dispatch_all(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T x;
    // Integers: the value truncated to i64, then wrapped (how PyTorch converts a scalar).
    if constexpr (std::is_same_v<T, uint64_t>) x = float_to_int<uint64_t>(v);
    else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) x = static_cast<T>(truncate_to<int64_t>(v));
    else x = convert<T>(v);
    T* o = static_cast<T*>(a.out.data);
    parallel_loop(n, n >= kParallelGrain, [&](int64_t i) { o[i] = x; });
  });
}

void Iota(const KernelArgs& a) {
  const Shape& s = a.out.type->shape;
  const int64_t axis = a.attrs.i("axis"), n = a.out.type->numel();
  int64_t inner = 1;
  for (size_t d = size_t(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t extent = s[size_t(axis)];
  dispatch_numeric(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = static_cast<T*>(a.out.data);
    parallel_loop(n, n >= kParallelGrain, [&](int64_t i) {
      o[i] = convert<T>(C<T>((i / inner) % extent));
    });
  });
}

void Parameter(const KernelArgs&) { throw InternalError("a parameter is bound by the caller, never run"); }
void Constant(const KernelArgs&) { throw InternalError("a constant carries its bytes, it is never run"); }

}  // namespace hjit::eager
