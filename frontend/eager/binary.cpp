// Elementwise kernels of two or three operands, with numpy broadcasting.
#include "frontend/eager/loops.h"

namespace hjit::eager {
namespace {

// out[i] = f(x[i], y[i]) over broadcast operands; T the operand type, R the result type.
template <class T, class R, class F>
void binary_loop(const KernelArgs& a, F f) {
  const T* x = static_cast<const T*>(a.in[0].data);
  const T* y = static_cast<const T*>(a.in[1].data);
  R* o = static_cast<R*>(a.out.data);
  BroadcastPlan p = plan_broadcast(a.out.type->shape, {&a.in[0].type->shape, &a.in[1].type->shape});
  const int64_t sx = p.strides[0].back(), sy = p.strides[1].back();
  for_each_row(p, [&](int64_t j, const int64_t* off, int64_t n) {
    const T* px = x + off[0];
    const T* py = y + off[1];
    R* po = o + j * n;
    if (sx == 1 && sy == 1) {
      for (int64_t i = 0; i < n; ++i) po[i] = R(f(C<T>(px[i]), C<T>(py[i])));
    } else if (sx == 1) {
      const C<T> v = C<T>(py[0]);
      for (int64_t i = 0; i < n; ++i) po[i] = R(f(C<T>(px[i]), v));
    } else if (sy == 1) {
      const C<T> v = C<T>(px[0]);
      for (int64_t i = 0; i < n; ++i) po[i] = R(f(v, C<T>(py[i])));
    } else {
      const R v = R(f(C<T>(px[0]), C<T>(py[0])));
      for (int64_t i = 0; i < n; ++i) po[i] = v;
    }
  });
}

template <class F>
void arith(const KernelArgs& a, F f) {
  dispatch_all(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_loop<T, T>(a, f);
  });
}

template <class F>
void compare(const KernelArgs& a, F f) {
  dispatch_all(a.in[0].type->dtype, [&](auto tag) { binary_loop<typename decltype(tag)::type, bool>(a, f); });
}

}  // namespace

// Integer operands of add/sub/mul wrap like the compiled code: computed in the type, not promoted.
void Add(const KernelArgs& a) { arith(a, [](auto x, auto y) { return wrapping(x, y, std::plus<>{}); }); }
void Sub(const KernelArgs& a) { arith(a, [](auto x, auto y) { return wrapping(x, y, std::minus<>{}); }); }
void Mul(const KernelArgs& a) { arith(a, [](auto x, auto y) { return wrapping(x, y, std::multiplies<>{}); }); }
void Div(const KernelArgs& a) {
  dispatch_float(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_loop<T, T>(a, [](auto x, auto y) { return x / y; });
  });
}
namespace {
// Square and multiply, wrapping as the type does (in unsigned arithmetic, where C++ defines the
// wrap); a negative exponent gives 1 for base 1, +-1 for base -1 and 0 otherwise (PyTorch's rule).
template <class T>
T int_pow(T x, T y) {
  if constexpr (std::is_signed_v<T>) {
    if (y < 0) return x == 1 ? T(1) : x == -1 ? ((y & 1) ? T(-1) : T(1)) : T(0);
  }
  uint64_t r = 1, b = uint64_t(x), e = uint64_t(y);
  for (; e; e >>= 1, b *= b)
    if (e & 1) r *= b;
  return T(r);
}
}  // namespace

void Pow(const KernelArgs& a) {
  dispatch_numeric(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) binary_loop<T, T>(a, [](T x, T y) { return int_pow(x, y); });
    else binary_loop<T, T>(a, [](auto x, auto y) { return std::pow(x, y); });
  });
}
void Max(const KernelArgs& a) { arith(a, [](auto x, auto y) { return max_nan(x, y); }); }
void Min(const KernelArgs& a) { arith(a, [](auto x, auto y) { return min_nan(x, y); }); }
void Eq(const KernelArgs& a) { compare(a, [](auto x, auto y) { return x == y; }); }
void Ne(const KernelArgs& a) { compare(a, [](auto x, auto y) { return x != y; }); }
void Lt(const KernelArgs& a) { compare(a, [](auto x, auto y) { return x < y; }); }
void Le(const KernelArgs& a) { compare(a, [](auto x, auto y) { return x <= y; }); }
void Gt(const KernelArgs& a) { compare(a, [](auto x, auto y) { return x > y; }); }
void Ge(const KernelArgs& a) { compare(a, [](auto x, auto y) { return x >= y; }); }
void And(const KernelArgs& a) { binary_loop<bool, bool>(a, [](bool x, bool y) { return x && y; }); }
void Or(const KernelArgs& a) { binary_loop<bool, bool>(a, [](bool x, bool y) { return x || y; }); }

void Where(const KernelArgs& a) {
  dispatch_all(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool* c = static_cast<const bool*>(a.in[0].data);
    const T* x = static_cast<const T*>(a.in[1].data);
    const T* y = static_cast<const T*>(a.in[2].data);
    T* o = static_cast<T*>(a.out.data);
    BroadcastPlan p = plan_broadcast(a.out.type->shape,
                                     {&a.in[0].type->shape, &a.in[1].type->shape, &a.in[2].type->shape});
    const int64_t sc = p.strides[0].back(), sx = p.strides[1].back(), sy = p.strides[2].back();
    for_each_row(p, [&](int64_t j, const int64_t* off, int64_t n) {
      const bool* pc = c + off[0];
      const T* px = x + off[1];
      const T* py = y + off[2];
      T* po = o + j * n;
      for (int64_t i = 0; i < n; ++i) po[i] = pc[i * sc] ? px[i * sx] : py[i * sy];
    });
  });
}

}  // namespace hjit::eager
