// dtype conversion and the source ops (fill, iota).
#include "frontend/eager/loops.h"

namespace hjit::eager {
namespace {

// One element converted like a C++ cast, except that anything to bool means "is nonzero" and the
// 16-bit floats go through f32.
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) return v != From(0);
  else if constexpr (std::is_same_v<To, f16> || std::is_same_v<To, bf16>) return To(float(v));
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
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
      for (int64_t i = 0; i < n; ++i) o[i] = convert<T>(C<F>(x[i]));
    });
  });
}

void Full(const KernelArgs& a) {
  const double v = a.attrs.f("value");
  const int64_t n = a.out.type->numel();
  dispatch_all(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T x;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) x = static_cast<T>(static_cast<int64_t>(v));
    else x = convert<T>(v);
    T* o = static_cast<T*>(a.out.data);
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) o[i] = x;
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
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) o[i] = convert<T>(C<T>((i / inner) % extent));
  });
}

void Parameter(const KernelArgs&) { throw InternalError("a parameter is bound by the caller, never run"); }
void Constant(const KernelArgs&) { throw InternalError("a constant carries its bytes, it is never run"); }

}  // namespace hjit::eager
